package xdp

import (
	"fmt"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The kernel's netdev generic netlink family (Documentation/netlink/specs/
// netdev.yaml): the XDP features of a device.
const (
	netdevCmdDevGet       = 1
	netdevAttrIfindex     = 1
	netdevAttrXDPFeatures = 3
	xdpActNDOXmit         = 1 << 2 // NETDEV_XDP_ACT_NDO_XMIT
)

// RedirectCapable reports whether the kernel takes frames redirected into
// the link ifindex (the device advertises NETDEV_XDP_ACT_NDO_XMIT). A veth
// does only while its peer runs NAPI (an XDP program or GRO on the peer);
// a redirect into one that does not is dropped by the kernel and counted
// as a receive drop of the ingress link. It asks the netdev netlink family
// in the calling thread's network namespace.
func RedirectCapable(ifindex int) (bool, error) {
	c, err := genetlink.Dial(nil)
	if err != nil {
		return false, fmt.Errorf("XDP features: %w", err)
	}
	defer c.Close()
	fam, err := c.GetFamily("netdev")
	if err != nil {
		return false, fmt.Errorf("XDP features: netdev netlink family: %w", err)
	}
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(netdevAttrIfindex, uint32(ifindex))
	body, err := ae.Encode()
	if err != nil {
		return false, err
	}
	msgs, err := c.Execute(genetlink.Message{Header: genetlink.Header{Command: netdevCmdDevGet, Version: fam.Version}, Data: body},
		fam.ID, netlink.Request)
	if err != nil {
		return false, fmt.Errorf("XDP features of interface %d: %w", ifindex, err)
	}
	for _, m := range msgs {
		ad, err := netlink.NewAttributeDecoder(m.Data)
		if err != nil {
			return false, err
		}
		for ad.Next() {
			if ad.Type() == netdevAttrXDPFeatures {
				return ad.Uint64()&xdpActNDOXmit != 0, nil
			}
		}
		if err := ad.Err(); err != nil {
			return false, err
		}
	}
	return false, fmt.Errorf("XDP features of interface %d: %w", ifindex, unix.ENODATA)
}

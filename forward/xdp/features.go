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

// Features reads devices' XDP features from the kernel's netdev netlink
// family, in the network namespace where it was opened (a socket keeps
// its namespace, so a Features opened by a goroutine in the node's
// namespace answers for it from any goroutine). Its methods are not safe
// for concurrent use.
type Features struct {
	c   *genetlink.Conn
	fam genetlink.Family
}

// OpenFeatures opens a Features in the calling thread's network namespace.
func OpenFeatures() (*Features, error) {
	c, err := genetlink.Dial(nil)
	if err != nil {
		return nil, fmt.Errorf("XDP features: %w", err)
	}
	fam, err := c.GetFamily("netdev")
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("XDP features: netdev netlink family: %w", err)
	}
	return &Features{c: c, fam: fam}, nil
}

// Close closes the netlink socket.
func (f *Features) Close() error { return f.c.Close() }

// RedirectCapable is Features.RedirectCapable with a Features opened and
// closed for the call, in the calling thread's network namespace.
func RedirectCapable(ifindex int) (bool, error) {
	f, err := OpenFeatures()
	if err != nil {
		return false, err
	}
	defer f.Close()
	return f.RedirectCapable(ifindex)
}

// RedirectCapable reports whether the kernel takes frames redirected into
// the link ifindex (the device advertises NETDEV_XDP_ACT_NDO_XMIT). A veth
// does only while its peer runs NAPI (an XDP program or GRO on the peer);
// a redirect into one that does not is dropped by the kernel and counted
// as a receive drop of the ingress link.
func (f *Features) RedirectCapable(ifindex int) (bool, error) {
	c, fam := f.c, f.fam
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

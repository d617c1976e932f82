// Package arpmsg builds ARP messages (RFC 826, IPv4 over Ethernet) for
// tests that put them on a link. Only tests import it.
package arpmsg

import (
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// Request returns the ARP request of senderMAC at sender for target's
// hardware address (left zero in the message).
func Request(senderMAC tcpip.LinkAddress, sender, target netip.Addr) []byte {
	return message(header.ARPRequest, senderMAC, sender, "", target)
}

// Reply returns the ARP reply of senderMAC at sender to targetMAC at
// target.
func Reply(senderMAC tcpip.LinkAddress, sender netip.Addr, targetMAC tcpip.LinkAddress, target netip.Addr) []byte {
	return message(header.ARPReply, senderMAC, sender, targetMAC, target)
}

func message(op header.ARPOp, senderMAC tcpip.LinkAddress, sender netip.Addr, targetMAC tcpip.LinkAddress, target netip.Addr) []byte {
	b := make([]byte, header.ARPSize)
	a := header.ARP(b)
	a.SetIPv4OverEthernet()
	a.SetOp(op)
	copy(a.HardwareAddressSender(), senderMAC)
	copy(a.ProtocolAddressSender(), sender.AsSlice())
	copy(a.HardwareAddressTarget(), targetMAC)
	copy(a.ProtocolAddressTarget(), target.AsSlice())
	return b
}

package forward

import (
	"net/netip"

	"github.com/mplsnode/mplsnode/forward/verdict"
	"github.com/mplsnode/mplsnode/internal/icmp"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// An LSR that holds only label routes has no IP route back to the sender
// of a packet whose label TTL ran out. As routers do (RFC 3032 §2.3.2), it
// sends the ICMP error on down the LSP the packet was expiring on: the IP
// packet to the original source goes under the received label stack and
// through the same decision as a received frame (verdict.DecideLabelled
// on the top label's ILM entry), so the LSP's egress, which routes back
// to the sender, turns it round.

// routesTo reports whether the node has an IP route (a route or a
// connected subnet) to dst; without a Router it assumes one (the stack's
// routes are then all there is).
func (ls *Switch) routesTo(dst netip.Addr) bool {
	rp := ls.router.Load()
	if rp == nil || *rp == nil {
		return true
	}
	_, ok := (*rp).Lookup(dst, nil)
	return ok
}

// errorLabelTTL is the TTL of the labels an ICMP error sent down an LSP
// carries: in the uniform model the IP TTL of the error, as a push copies
// it (RFC 3443 §3.1), so that the pop at the egress hands the error its
// own TTL back; in the pipe model the LSP's own, as a push sets it.
func (ls *Switch) errorLabelTTL() uint8 {
	return mpls.PushTTL(ls.ttlModel, icmp.ErrorTTL, mpls.DefaultPipeTTL)
}

// icmpViaLSP sends msgFor's ICMP error for a labelled packet received on
// in, with no IP route to its source dst, down the LSP it arrived on:
// labels is the received label stack as on the wire (outermost first, the
// S bit on the last entry); the error is sourced from in's address, else
// any of the node's. It reports whether the error left; when not, the
// caller counts the drop.
func (ls *Switch) icmpViaLSP(st *attached, in *mplsendpoint.Endpoint, v6 bool, labels []byte, dst netip.Addr, msgFor func(src netip.Addr) []byte) bool {
	if len(labels) == 0 || len(labels)%mpls.EntryLen != 0 || len(labels)/mpls.EntryLen > verdict.MaxOut {
		return false
	}
	src, ok := errorSource(st, in, v6)
	if !ok {
		return false
	}
	msg := msgFor(src)
	ip := ipPacket(v6, src, dst, msg)
	const eth = header.EthernetMinimumSize
	frame := make([]byte, eth+len(labels)+len(ip))
	header.Ethernet(frame).Encode(&header.EthernetFields{Type: mplsendpoint.EthertypeMPLSUnicast}) // addresses: the egress link's
	ttl := ls.errorLabelTTL()
	for i := 0; i < len(labels); i += mpls.EntryLen {
		e := mpls.DecodeEntry(labels[i:])
		e.TTL = ttl
		e.Encode(frame[eth+i:])
	}
	copy(frame[eth+len(labels):], ip)
	pkt := gstack.NewPacketBuffer(gstack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
	defer pkt.DecRef()
	data := pkt.Data()
	b, ok := data.PullUp(data.Size())
	if !ok {
		return false
	}
	var ilm *mpls.ILM
	if t := in.Tables(); t != nil {
		ilm = t.ILM()
	}
	t := ls.tables(st, ilm, len(labels)/mpls.EntryLen)
	var v verdict.Verdict
	t.DecideLabelled(b[eth:], data.Size()-eth, &v)
	if v.Action != verdict.Forward {
		// The LSP ends here or is broken: there is nowhere to send it.
		return false
	}
	ls.carryOut(st, in, pkt, eth, b, &v, false)
	ls.ctr.icmpViaLSP.Add(1)
	return true
}

// errorSource picks the source address of an ICMP error sent down an LSP:
// an address of the ingress link in the family, else one of any other of
// the node's links; IPv6 link-local addresses never (the error leaves the
// link). ok is false when the node has none.
func errorSource(st *attached, in *mplsendpoint.Endpoint, v6 bool) (netip.Addr, bool) {
	proto := header.IPv4ProtocolNumber
	if v6 {
		proto = header.IPv6ProtocolNumber
	}
	all := st.ns.AllAddresses()
	pick := func(nic tcpip.NICID) (netip.Addr, bool) {
		for _, pa := range all[nic] {
			if pa.Protocol != proto {
				continue
			}
			a, ok := netip.AddrFromSlice(pa.AddressWithPrefix.Address.AsSlice())
			if ok && a.IsGlobalUnicast() {
				return a, true
			}
		}
		return netip.Addr{}, false
	}
	if nic, ok := st.nics[in]; ok {
		if a, ok := pick(nic); ok {
			return a, true
		}
	}
	best := tcpip.NICID(0)
	var found netip.Addr
	for nic := range all {
		// The lowest NIC ID that has one: the same choice every time.
		if a, ok := pick(nic); ok && (best == 0 || nic < best) {
			best, found = nic, a
		}
	}
	return found, best != 0
}

// ipPacket returns msg, an ICMP message, in an IP header from src to dst
// with the TTL (hop limit) of the errors the node originates. An IPv4
// error is sent with DF and ID 0 (an atomic datagram, RFC 6864 §4.1): it
// holds at most 576 bytes and is never fragmented.
func ipPacket(v6 bool, src, dst netip.Addr, msg []byte) []byte {
	if v6 {
		b := make([]byte, header.IPv6MinimumSize+len(msg))
		header.IPv6(b).Encode(&header.IPv6Fields{
			PayloadLength:     uint16(len(msg)),
			TransportProtocol: header.ICMPv6ProtocolNumber,
			HopLimit:          icmp.ErrorTTL,
			SrcAddr:           tcpip.AddrFrom16(src.As16()),
			DstAddr:           tcpip.AddrFrom16(dst.As16()),
		})
		copy(b[header.IPv6MinimumSize:], msg)
		return b
	}
	b := make([]byte, header.IPv4MinimumSize+len(msg))
	h := header.IPv4(b)
	h.Encode(&header.IPv4Fields{
		TotalLength: uint16(len(b)),
		Flags:       header.IPv4FlagDontFragment,
		TTL:         icmp.ErrorTTL,
		Protocol:    uint8(header.ICMPv4ProtocolNumber),
		SrcAddr:     tcpip.AddrFrom4(src.As4()),
		DstAddr:     tcpip.AddrFrom4(dst.As4()),
	})
	h.SetChecksum(^h.CalculateChecksum())
	copy(b[header.IPv4MinimumSize:], msg)
	return b
}

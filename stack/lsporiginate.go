package stack

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// ErrNoNeighbor is originate's error when a next hop's MAC cannot be
// resolved.
var ErrNoNeighbor = errors.New("stack: next hop unreachable (no ARP/NDP answer)")

// errNoLink: originate was given a link the stack does not have.
var errNoLink = errors.New("stack: no such link, or no next hop")

// resolveTimeout bounds the wait for a next hop's MAC.
const resolveTimeout = 3 * time.Second

// originate sends the stack's own IP packet ip on link dev to the
// neighbour via with the label stack labels (outermost first, as encoded:
// the S bit on the last), the neighbour's MAC from the stack's neighbour
// table. LSP ping sends its requests so: to a 127/8 destination that no
// route would carry, down the label stack the FIB gives the FEC.
func (s *Stack) originate(ctx context.Context, dev string, via netip.Addr, labels []mpls.Entry, ip []byte) error {
	l, ok := s.byName[dev]
	if !ok || !via.IsValid() || len(ip) == 0 {
		return errNoLink
	}
	proto := header.IPv4ProtocolNumber
	if via.Is6() {
		proto = header.IPv6ProtocolNumber
	}
	type result struct {
		mac tcpip.LinkAddress
		err tcpip.Error
	}
	done := make(chan result, 1)
	addr := tcpip.AddrFromSlice(via.AsSlice())
	terr := s.ns.GetLinkAddress(l.nic, addr, tcpip.Address{}, proto, func(r gstack.LinkResolutionResult) {
		done <- result{r.LinkAddress, r.Err}
	})
	if terr != nil {
		if _, wait := terr.(*tcpip.ErrWouldBlock); !wait {
			return ErrNoNeighbor
		}
	}
	var mac tcpip.LinkAddress
	select {
	case r := <-done:
		if r.err != nil {
			return ErrNoNeighbor
		}
		mac = r.mac
	case <-time.After(resolveTimeout):
		return ErrNoNeighbor
	case <-ctx.Done():
		return ctx.Err()
	}
	typ := header.IPv4ProtocolNumber
	if ip[0]>>4 == 6 {
		typ = header.IPv6ProtocolNumber
	}
	if len(labels) > 0 {
		typ = mplsendpoint.EthertypeMPLSUnicast
	}
	hdrLen := header.EthernetMinimumSize + len(labels)*mpls.EntryLen
	pkt := gstack.NewPacketBuffer(gstack.PacketBufferOptions{ReserveHeaderBytes: hdrLen,
		Payload: buffer.MakeWithData(append([]byte(nil), ip...))})
	pkt.NetworkProtocolNumber = typ
	h := pkt.LinkHeader().Push(hdrLen)
	header.Ethernet(h).Encode(&header.EthernetFields{SrcAddr: l.endpoint.LinkAddress(), DstAddr: mac, Type: typ})
	for i, e := range labels {
		e.Encode(h[header.EthernetMinimumSize+i*mpls.EntryLen:])
	}
	var list gstack.PacketBufferList
	list.PushBack(pkt)
	n, _ := l.endpoint.WriteRawFrames(list)
	list.Reset()
	if n != 1 {
		return errors.New("stack: the link refused the frame")
	}
	return nil
}

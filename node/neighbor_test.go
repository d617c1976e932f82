package node

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/linktest"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// TestNeighborWatchObserve drives neighborWatch.observe and observeFrame
// against a gVisor stack on a channel link: an existing neighbour that
// announces another MAC is resolved again (the request goes out, the
// answer from the new MAC makes the entry reachable with it, notify runs
// both times), once a locktime; the same MAC, an unknown host, an ARP
// probe, a static entry and a frame to another host change nothing.
func TestNeighborWatchObserve(t *testing.T) {
	own := tcpip.LinkAddress("\x02\x00\x00\x00\x00\x01")
	ch := channel.New(16, 1500, own)
	s := linktest.NewStack(t, ch, netip.MustParsePrefix("192.0.2.1/24"), false)
	t.Cleanup(func() { ch.Drain() }) // what the stack sent and nobody read
	const nic = linktest.NICID
	ownIP := tcpip.AddrFrom4([4]byte{192, 0, 2, 1})
	var notified atomic.Int32
	w := newNeighborWatch(s, slog.New(slog.NewTextHandler(io.Discard, nil)), func() { notified.Add(1) })

	entry := func(addr tcpip.Address) (gstack.NeighborEntry, bool) {
		nbrs, err := s.Neighbors(nic, header.IPv4ProtocolNumber)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range nbrs {
			if e.Addr == addr {
				return e, true
			}
		}
		return gstack.NeighborEntry{}, false
	}
	// request reads the ARP request the stack sends for addr.
	request := func(addr tcpip.Address) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for {
			pkt := ch.ReadContext(ctx)
			if pkt == nil {
				t.Fatalf("no ARP request for %s went out", addr)
			}
			v := pkt.ToView()
			b := append([]byte(nil), v.AsSlice()...)
			v.Release()
			pkt.DecRef()
			if len(b) >= header.EthernetMinimumSize+header.ARPSize && header.Ethernet(b).Type() == header.ARPProtocolNumber {
				a := header.ARP(b[header.EthernetMinimumSize:])
				if a.Op() == header.ARPRequest && tcpip.AddrFrom4Slice(a.ProtocolAddressTarget()) == addr {
					return
				}
			}
		}
	}
	arpFrame := func(dst, mac tcpip.LinkAddress, addr tcpip.Address, op header.ARPOp) []byte {
		f := make([]byte, header.EthernetMinimumSize+header.ARPSize)
		header.Ethernet(f).Encode(&header.EthernetFields{SrcAddr: mac, DstAddr: dst, Type: header.ARPProtocolNumber})
		a := header.ARP(f[header.EthernetMinimumSize:])
		a.SetIPv4OverEthernet()
		a.SetOp(op)
		copy(a.HardwareAddressSender(), mac)
		copy(a.ProtocolAddressSender(), addr.AsSlice())
		copy(a.HardwareAddressTarget(), own)
		copy(a.ProtocolAddressTarget(), ownIP.AsSlice())
		return f
	}
	// answer delivers addr's reply from mac and waits for the entry to
	// be reachable with it.
	answer := func(addr tcpip.Address, mac tcpip.LinkAddress) {
		t.Helper()
		pkt := gstack.NewPacketBuffer(gstack.PacketBufferOptions{Payload: buffer.MakeWithData(arpFrame(own, mac, addr, header.ARPReply))})
		ch.InjectInbound(header.ARPProtocolNumber, pkt)
		pkt.DecRef()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			if e, ok := entry(addr); ok && e.State == gstack.Reachable && e.LinkAddr == mac {
				return
			}
			if time.Now().After(deadline) {
				e, _ := entry(addr)
				t.Fatalf("%s: entry %+v, want reachable at %s", addr, e, mac)
			}
		}
	}
	nbr := tcpip.AddrFrom4([4]byte{192, 0, 2, 2})
	oldMAC, newMAC := tcpip.LinkAddress("\x02\x00\x00\x00\x00\x02"), tcpip.LinkAddress("\x02\x00\x00\x00\x00\x03")
	s.GetLinkAddress(nic, nbr, tcpip.Address{}, header.IPv4ProtocolNumber, nil)
	request(nbr)
	answer(nbr, oldMAC)

	if w.observe(nic, nbr, oldMAC) {
		t.Error("the MAC the entry holds: resolved again")
	}
	if n := notified.Load(); n != 0 {
		t.Errorf("notified %d times before any change", n)
	}
	if !w.observe(nic, nbr, newMAC) {
		t.Fatal("a new MAC for a reachable neighbour: not resolved again")
	}
	if e, ok := entry(nbr); !ok || e.State != gstack.Incomplete {
		t.Errorf("after the new MAC: entry %+v (present %v), want incomplete (resolving again)", e, ok)
	}
	if n := notified.Load(); n != 1 {
		t.Errorf("notified %d times when resolving again, want 1", n)
	}
	request(nbr)
	answer(nbr, newMAC)
	if n := notified.Load(); n != 2 {
		t.Errorf("notified %d times after the answer, want 2", n)
	}
	if w.observe(nic, nbr, oldMAC) {
		t.Error("another MAC within the locktime: resolved again")
	}

	// A host with no entry gets none; an ARP probe (sender 0.0.0.0) and
	// a multicast sender MAC are ignored.
	stranger := tcpip.AddrFrom4([4]byte{192, 0, 2, 9})
	if w.observe(nic, stranger, newMAC) {
		t.Error("an unknown host: resolved")
	}
	if _, ok := entry(stranger); ok {
		t.Error("an unknown host's announcement made an entry")
	}
	if w.observe(nic, tcpip.AddrFrom4([4]byte{}), newMAC) || w.observe(nic, nbr, "\x01\x00\x5e\x00\x00\x01") {
		t.Error("an ARP probe or a multicast sender MAC: resolved again")
	}

	// A static entry stays as it was set.
	static := tcpip.AddrFrom4([4]byte{192, 0, 2, 3})
	if err := s.AddStaticNeighbor(nic, header.IPv4ProtocolNumber, static, oldMAC); err != nil {
		t.Fatal(err)
	}
	if w.observe(nic, static, newMAC) {
		t.Error("a static entry: resolved again")
	}
	if e, _ := entry(static); e.State != gstack.Static || e.LinkAddr != oldMAC {
		t.Errorf("static entry now %+v", e)
	}

	// Frames: a broadcast request (arping -U) from another neighbour's new
	// MAC is taken; one to another host's MAC is not.
	nbr2 := tcpip.AddrFrom4([4]byte{192, 0, 2, 4})
	s.GetLinkAddress(nic, nbr2, tcpip.Address{}, header.IPv4ProtocolNumber, nil)
	request(nbr2)
	answer(nbr2, oldMAC)
	if w.observeFrame(nic, own, arpFrame("\x02\x00\x00\x00\x00\x99", newMAC, nbr2, header.ARPRequest)) {
		t.Error("an ARP frame to another host's MAC: taken")
	}
	if !w.observeFrame(nic, own, arpFrame(header.EthernetBroadcastAddress, newMAC, nbr2, header.ARPRequest)) {
		t.Error("a broadcast ARP request from a neighbour's new MAC: not taken")
	}
	request(nbr2)
	answer(nbr2, newMAC)
}

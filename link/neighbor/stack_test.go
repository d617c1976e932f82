package neighbor_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/arpmsg"
	"github.com/mplsnode/mplsnode/link/neighbor"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

const macC = tcpip.LinkAddress("\x02\x00\x00\x00\x00\x0c")

var (
	ownAddr  = netip.MustParseAddr("192.0.2.1")
	hopKey   = neighbor.Key{Link: "a", Addr: hopAddr}
	waitTime = 5 * time.Second
)

// gvisorStack is a gVisor stack with one NIC (1) on a channel endpoint
// whose ARP (gVisor's, the oracle here) the test answers; nud adjusts
// its neighbour timers.
func gvisorStack(t *testing.T, nud func(*stack.NUDConfigurations)) (*stack.Stack, *channel.Endpoint) {
	t.Helper()
	ns := stack.New(stack.Options{NetworkProtocols: []stack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol}})
	t.Cleanup(func() { ns.Close(); ns.Wait() })
	ch := channel.New(16, 1500, macA)
	ch.LinkEPCapabilities |= stack.CapabilityResolutionRequired
	if err := ns.CreateNIC(1, ch); err != nil {
		t.Fatal(err)
	}
	pa := tcpip.ProtocolAddress{Protocol: ipv4.ProtocolNumber, AddressWithPrefix: tcpip.AddressWithPrefix{Address: tcpip.AddrFromSlice(ownAddr.AsSlice()), PrefixLen: 24}}
	if err := ns.AddProtocolAddress(1, pa, stack.AddressProperties{}); err != nil {
		t.Fatal(err)
	}
	c := stack.DefaultNUDConfigurations()
	c.RetransmitTimer = 10 * time.Millisecond
	c.MaxMulticastProbes = 2
	if nud != nil {
		nud(&c)
	}
	if err := ns.SetNUDConfigurations(1, ipv4.ProtocolNumber, c); err != nil {
		t.Fatal(err)
	}
	return ns, ch
}

// readARPRequest returns the next ARP request the stack sent, failing
// the test if none comes in time or it is not a request for target.
func readARPRequest(t *testing.T, ch *channel.Endpoint, target netip.Addr) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTime)
	defer cancel()
	pkt := ch.ReadContext(ctx)
	if pkt == nil {
		t.Fatal("no ARP request sent")
	}
	defer pkt.DecRef()
	b := pkt.ToView().AsSlice()
	if pkt.NetworkProtocolNumber != arp.ProtocolNumber || len(b) < header.ARPSize || !header.ARP(b).IsValid() {
		t.Fatalf("sent %#x %x, want an ARP packet", pkt.NetworkProtocolNumber, b)
	}
	a := header.ARP(b)
	if a.Op() != header.ARPRequest || netip.AddrFrom4([4]byte(a.ProtocolAddressTarget())) != target ||
		tcpip.LinkAddress(a.HardwareAddressSender()) != macA || netip.AddrFrom4([4]byte(a.ProtocolAddressSender())) != ownAddr {
		t.Fatalf("ARP op %d for %v from %v %s, want a request for %v from %v %s", a.Op(), a.ProtocolAddressTarget(),
			a.ProtocolAddressSender(), tcpip.LinkAddress(a.HardwareAddressSender()), target, ownAddr, macA)
	}
}

// answerARP injects target's ARP reply from mac.
func answerARP(ch *channel.Endpoint, target netip.Addr, mac tcpip.LinkAddress) {
	b := arpmsg.Reply(mac, target, macA, ownAddr)
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(b)})
	ch.InjectInbound(arp.ProtocolNumber, pkt)
	pkt.DecRef()
}

// chanTable returns a table on ns's neighbour table whose Handler sends
// its events on the channel it returns.
func chanTable(ns *stack.Stack) (*neighbor.Table[string, int], chan event) {
	ev := make(chan event, 16)
	tbl := neighbor.New(neighbor.Options[string, int]{
		Resolve: neighbor.StackResolver(ns),
		Handler: neighbor.Handler[string, int]{
			Write: func(_ *neighbor.Entry[string, int], item int, mac tcpip.LinkAddress, queued bool) {
				ev <- event{item: item, mac: mac, queued: queued}
			},
			Drop: func(_ *neighbor.Entry[string, int], item int, why neighbor.Reason, queued bool) {
				ev <- event{item: item, why: why, drop: true, queued: queued}
			},
		},
	})
	return tbl, ev
}

func next(t *testing.T, ev chan event) event {
	t.Helper()
	select {
	case e := <-ev:
		return e
	case <-time.After(waitTime):
		t.Fatal("no item written or dropped in time")
	}
	return event{}
}

// TestStackResolves: against gVisor's neighbour table, an item sent to an
// unknown neighbour waits while ARP asks for it, leaves to the MAC of the
// reply, and the next one leaves at once; Known reads the same answer.
func TestStackResolves(t *testing.T) {
	ns, ch := gvisorStack(t, nil)
	tbl, ev := chanTable(ns)
	e := tbl.Add(hopKey, 1, "")
	if got := tbl.Send(e, 1); got != neighbor.Queued {
		t.Fatalf("first Send = %d, want Queued", got)
	}
	readARPRequest(t, ch, hopAddr)
	answerARP(ch, hopAddr, macB)
	if x := next(t, ev); x != (event{item: 1, mac: macB, queued: true}) {
		t.Fatalf("after the reply: %+v, want item 1 written to %s", x, macB)
	}
	if got := tbl.Send(e, 2); got != neighbor.Sent {
		t.Fatalf("Send once resolved = %d, want Sent", got)
	}
	if x := next(t, ev); x != (event{item: 2, mac: macB}) {
		t.Fatalf("%+v, want item 2 written to %s at once", x, macB)
	}
	if mac, ok := neighbor.Known(ns, 1, hopAddr, nil); !ok || mac != macB {
		t.Errorf("Known = %s, %v; want %s", mac, ok, macB)
	}
}

// TestStackMACChange: when the stack's table answers another MAC (a
// static entry replacing the learned one) the next item leaves to it.
func TestStackMACChange(t *testing.T) {
	ns, ch := gvisorStack(t, nil)
	tbl, ev := chanTable(ns)
	e := tbl.Add(hopKey, 1, "")
	tbl.Send(e, 1)
	readARPRequest(t, ch, hopAddr)
	answerARP(ch, hopAddr, macB)
	next(t, ev)
	addr := tcpip.AddrFromSlice(hopAddr.AsSlice())
	if err := ns.RemoveNeighbor(1, ipv4.ProtocolNumber, addr); err != nil {
		t.Fatal(err)
	}
	if err := ns.AddStaticNeighbor(1, ipv4.ProtocolNumber, addr, macC); err != nil {
		t.Fatal(err)
	}
	tbl.Send(e, 2)
	if x := next(t, ev); x != (event{item: 2, mac: macC}) {
		t.Fatalf("%+v, want item 2 written to the new MAC %s", x, macC)
	}
	if mac, _ := e.MAC(); mac != macC {
		t.Errorf("MAC() = %s, want %s", mac, macC)
	}
}

// TestStackUnresolved: a neighbour that never answers ARP fails after the
// stack's probes, and the waiting items are dropped as unresolved.
func TestStackUnresolved(t *testing.T) {
	ns, _ := gvisorStack(t, nil)
	tbl, ev := chanTable(ns)
	e := tbl.Add(hopKey, 1, "")
	tbl.Send(e, 1)
	tbl.Send(e, 2)
	for i := 1; i <= 2; i++ {
		if x := next(t, ev); x != (event{item: i, why: neighbor.Unresolved, drop: true, queued: true}) {
			t.Fatalf("%+v, want item %d dropped unresolved", x, i)
		}
	}
}

// TestKnownStale: Known starts the resolution of an unknown neighbour
// (and reports its answer), reads the MAC of a stale one and starts its
// reachability check (Stale -> Delay), and skips an unusable one.
func TestKnownStale(t *testing.T) {
	ns, ch := gvisorStack(t, func(c *stack.NUDConfigurations) {
		c.BaseReachableTime = 5 * time.Millisecond
		c.MinRandomFactor, c.MaxRandomFactor = 1, 1
		c.DelayFirstProbeTime = time.Minute
	})
	answered := make(chan stack.LinkResolutionResult, 1)
	if _, ok := neighbor.Known(ns, 1, hopAddr, func(r stack.LinkResolutionResult) { answered <- r }); ok {
		t.Fatal("Known answered before any ARP reply")
	}
	readARPRequest(t, ch, hopAddr)
	answerARP(ch, hopAddr, macB)
	select {
	case r := <-answered:
		if r.Err != nil || r.LinkAddress != macB {
			t.Fatalf("answer %+v, want %s", r, macB)
		}
	case <-time.After(waitTime):
		t.Fatal("Known's callback not called after the reply")
	}
	state := func() stack.NeighborState {
		nbrs, err := ns.Neighbors(1, ipv4.ProtocolNumber)
		if err != nil || len(nbrs) != 1 {
			t.Fatalf("neighbours %v, %v", nbrs, err)
		}
		return nbrs[0].State
	}
	deadline := time.Now().Add(waitTime)
	for state() != stack.Stale {
		if time.Now().After(deadline) {
			t.Fatalf("neighbour never went stale (%s)", state())
		}
		time.Sleep(time.Millisecond)
	}
	if mac, ok := neighbor.Known(ns, 1, hopAddr, nil); !ok || mac != macB {
		t.Fatalf("Known of a stale neighbour = %s, %v; want %s", mac, ok, macB)
	}
	if s := state(); s != stack.Delay {
		t.Errorf("after Known the neighbour is %s, want Delay (its reachability checked)", s)
	}
	if neighbor.Usable(stack.NeighborEntry{LinkAddr: macB, State: stack.Unreachable}) ||
		neighbor.Usable(stack.NeighborEntry{State: stack.Incomplete}) || !neighbor.Usable(stack.NeighborEntry{LinkAddr: macB, State: stack.Static}) {
		t.Error("Usable: unreachable or incomplete usable, or static not")
	}
	if _, ok := neighbor.Known(ns, 1, netip.Addr{}, nil); ok {
		t.Error("Known of an invalid address answered")
	}
}

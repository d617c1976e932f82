package mplsendpoint

import (
	"encoding/binary"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

type countUp struct{ n int }

func (c *countUp) DeliverNetworkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) { c.n++ }
func (*countUp) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer)      {}

// testFragment returns an Ethernet frame holding an IPv4 fragment of
// datagram id: 8 payload bytes at offset off, More set or not.
func testFragment(mac tcpip.LinkAddress, id uint16, off uint16, more bool) []byte {
	b := make([]byte, header.EthernetMinimumSize+header.IPv4MinimumSize+8)
	header.Ethernet(b).Encode(&header.EthernetFields{DstAddr: mac, Type: header.IPv4ProtocolNumber})
	ip := header.IPv4(b[header.EthernetMinimumSize:])
	var flags uint8
	if more {
		flags = header.IPv4FlagMoreFragments
	}
	ip.Encode(&header.IPv4Fields{TotalLength: uint16(len(ip)), TTL: 64, Protocol: uint8(header.UDPProtocolNumber), ID: id,
		Flags: flags, FragmentOffset: off, SrcAddr: tcpip.AddrFrom4([4]byte{10, 0, 0, 2}), DstAddr: tcpip.AddrFrom4([4]byte{10, 0, 0, 1})})
	ip.SetChecksum(^ip.CalculateChecksum())
	return b
}

// TestFragmentTimeout: a datagram whose fragments span more than the
// reassembly timeout is not completed from the stale piece: the held
// fragment is dropped (fragment_timeout) when the next one arrives after
// the deadline, and the later fragments start a new datagram. Planted bug
// (expireDue removed from deliverFragment): the stale and the new
// fragment completed one datagram, 2 delivered.
func TestFragmentTimeout(t *testing.T) {
	const mac = tcpip.LinkAddress("\x02\x00\x00\x00\x00\x0a")
	e, err := New(channel.New(8, 1500, mac), Options{})
	if err != nil {
		t.Fatal(err)
	}
	up := &countUp{}
	e.Attach(up)
	defer e.Close()
	inject := func(f []byte) {
		deliverFrame(e, f)
	}
	inject(testFragment(mac, 9, 0, true))
	if st := e.Stats(); st.RXFragmentsHeld != 1 {
		t.Fatalf("%d fragments held, want 1", st.RXFragmentsHeld)
	}
	e.frag.mu.Lock()
	e.frag.epoch = e.frag.epoch.Add(-fragTimeout4 - time.Second) // 31 s later
	e.frag.mu.Unlock()
	inject(testFragment(mac, 9, 8, false))
	st := e.Stats()
	if got := st.Drop(DropFragmentTimeout); got != 1 {
		t.Errorf("fragment_timeout = %d, want 1", got)
	}
	if st.RXFragmentsHeld != 1 || up.n != 0 {
		t.Errorf("%d fragments held, %d delivered: want the last one held alone, none delivered", st.RXFragmentsHeld, up.n)
	}
}

// testFragmentN returns an Ethernet frame holding an IPv4 or IPv6 UDP
// fragment of datagram id with n payload bytes (a multiple of 8 unless
// it is the last) at byte offset off, More set or not.
func testFragmentN(mac tcpip.LinkAddress, v6 bool, id uint32, off int, more bool, n int) []byte {
	src4, dst4 := [4]byte{10, 0, 0, 2}, [4]byte{10, 0, 0, 1}
	src6, dst6 := [16]byte{0xfd, 15: 0xb}, [16]byte{0xfd, 15: 0xa}
	ethType, l3 := header.IPv4ProtocolNumber, header.IPv4MinimumSize
	if v6 {
		ethType, l3 = header.IPv6ProtocolNumber, header.IPv6MinimumSize+header.IPv6FragmentHeaderSize
	}
	b := make([]byte, header.EthernetMinimumSize+l3+n)
	header.Ethernet(b).Encode(&header.EthernetFields{DstAddr: mac, Type: ethType})
	p := b[header.EthernetMinimumSize:]
	if !v6 {
		var flags uint8
		if more {
			flags = header.IPv4FlagMoreFragments
		}
		ip := header.IPv4(p)
		ip.Encode(&header.IPv4Fields{TotalLength: uint16(len(p)), TTL: 64, Protocol: uint8(header.UDPProtocolNumber), ID: uint16(id),
			Flags: flags, FragmentOffset: uint16(off), SrcAddr: tcpip.AddrFrom4(src4), DstAddr: tcpip.AddrFrom4(dst4)})
		ip.SetChecksum(^ip.CalculateChecksum())
		return b
	}
	header.IPv6(p).Encode(&header.IPv6Fields{PayloadLength: uint16(header.IPv6FragmentHeaderSize + n), TransportProtocol: 44,
		HopLimit: 64, SrcAddr: tcpip.AddrFrom16(src6), DstAddr: tcpip.AddrFrom16(dst6)})
	fh := p[header.IPv6MinimumSize:]
	fh[0] = uint8(header.UDPProtocolNumber)
	m := uint16(off)
	if more {
		m |= 1
	}
	binary.BigEndian.PutUint16(fh[2:], m)
	binary.BigEndian.PutUint32(fh[4:], id)
	return b
}

// fragTestEndpoint returns a host endpoint whose reassembly timeouts are
// v4 and v6 (set before the first fragment, as the table reads them
// then), with a counting dispatcher, closed at the end of the test.
func fragTestEndpoint(t *testing.T, v4, v6 time.Duration) (*Endpoint, *countUp) {
	t.Helper()
	const mac = tcpip.LinkAddress("\x02\x00\x00\x00\x00\x0a")
	e, err := New(channel.New(8, 1500, mac), Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.frag.timeout = [2]time.Duration{v4, v6}
	up := &countUp{}
	e.Attach(up)
	t.Cleanup(e.Close)
	return e, up
}

// injectFragment delivers a frame from testFragmentN to e as the lower
// link does.
func injectFragment(e *Endpoint, v6 bool, id uint32, off int, more bool, n int) {
	const mac = tcpip.LinkAddress("\x02\x00\x00\x00\x00\x0a")
	deliverFrame(e, testFragmentN(mac, v6, id, off, more, n))
}

// deliverFrame hands frame to e as the lower link does.
func deliverFrame(e *Endpoint, frame []byte) {
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
	e.DeliverNetworkPacket(0, pkt)
	pkt.DecRef()
}

// waitHeld waits (10 s at most, however loaded the machine) until e
// holds want fragments, and fails with the stats it saw otherwise.
func waitHeld(t *testing.T, e *Endpoint, want uint64) Stats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := e.Stats()
		if st.RXFragmentsHeld == want {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s, %d fragments held, want %d (fragment_timeout %d): the timer did not discard the expired datagrams",
				st.RXFragmentsHeld, want, st.Drop(DropFragmentTimeout))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// heldKeys returns how many datagrams are in reassembly.
func heldKeys(e *Endpoint) int {
	e.frag.mu.Lock()
	defer e.frag.mu.Unlock()
	return len(e.frag.index)
}

// TestFragmentTimerExpires: datagrams missing their last fragment are
// discarded after the reassembly timeout with no further traffic: every
// fragment held counts once in fragment_timeout, none stays held and
// none goes up. An IPv6 datagram (deadline 200 ms) comes first, so the
// timer is armed for it; the IPv4 one after it (deadline 20 ms) expires
// first, and the timer, re-armed when it fires, expires the IPv6 one
// too. Planted bugs: the timer never armed (arm returning at once):
// fails after 10 s with 5 fragments held; fire not re-arming: fails with
// the IPv6 datagram's 2 fragments held.
func TestFragmentTimerExpires(t *testing.T) {
	e, up := fragTestEndpoint(t, 20*time.Millisecond, 200*time.Millisecond)
	injectFragment(e, true, 7, 0, true, 16)
	injectFragment(e, true, 7, 16, true, 16)
	for off := 0; off < 24; off += 8 {
		injectFragment(e, false, 9, off, true, 8)
	}
	if st := e.Stats(); st.RXFragmentsHeld != 5 || st.Drop(DropFragmentTimeout) != 0 {
		// The timeouts are far longer than injecting five fragments
		// takes, unless the machine stalled for 20 ms: then the IPv4
		// datagram may be gone already, which the end state allows for.
		t.Logf("right after injection: %d held, fragment_timeout %d", st.RXFragmentsHeld, st.Drop(DropFragmentTimeout))
	}
	st := waitHeld(t, e, 0)
	if got := st.Drop(DropFragmentTimeout); got != 5 {
		t.Errorf("fragment_timeout = %d, want 5 (one per fragment held)", got)
	}
	if n := heldKeys(e); n != 0 || up.n != 0 {
		t.Errorf("%d datagrams left in the table, %d fragments delivered; want 0, 0", n, up.n)
	}
}

// TestFragmentTimerArmsEarlier: an IPv4 datagram (20 ms) after an IPv6
// one (an hour) makes the timer fire for the IPv4 one, not in an hour;
// the IPv6 one stays held until Close, which drops it (endpoint_closed).
// Planted bug (arm never moves an armed timer earlier): fails after
// 10 s with the IPv4 datagram's 2 fragments still held.
func TestFragmentTimerArmsEarlier(t *testing.T) {
	e, _ := fragTestEndpoint(t, 20*time.Millisecond, time.Hour)
	injectFragment(e, true, 7, 0, true, 16)
	injectFragment(e, false, 9, 0, true, 8)
	injectFragment(e, false, 9, 8, true, 8)
	st := waitHeld(t, e, 1)
	if got := st.Drop(DropFragmentTimeout); got != 2 {
		t.Errorf("fragment_timeout = %d, want 2 (the IPv4 datagram's fragments)", got)
	}
	e.Close()
	st = e.Stats()
	if st.RXFragmentsHeld != 0 || st.Drop(DropEndpointClosed) != 1 || st.Drop(DropFragmentTimeout) != 2 {
		t.Errorf("after Close: %d held, endpoint_closed %d, fragment_timeout %d; want 0, 1, 2",
			st.RXFragmentsHeld, st.Drop(DropEndpointClosed), st.Drop(DropFragmentTimeout))
	}
}

// TestFragmentCloseStopsTimer: Close with fragments held and the timer
// armed drops them (endpoint_closed, one per fragment), frees the table
// and stops the timer; a timer run that was already waiting for the lock
// does nothing, and a fragment delivered after Close is dropped, not
// held. TestMain's leak check fails if a PacketBuffer stays held. Planted
// bugs: close not stopping the timer (Stop then reports it was still
// armed); close not releasing the entries (3 fragments held, and the
// leak check panics); fragments held after Close (1 held).
func TestFragmentCloseStopsTimer(t *testing.T) {
	e, up := fragTestEndpoint(t, time.Hour, time.Hour)
	injectFragment(e, false, 9, 0, true, 8)
	injectFragment(e, false, 9, 8, true, 8)
	injectFragment(e, true, 7, 0, true, 16)
	e.frag.mu.Lock()
	armed := e.frag.armed
	e.frag.mu.Unlock()
	if !armed {
		t.Fatal("the timer is not armed with 3 fragments held")
	}
	e.Close()
	st := e.Stats()
	if st.RXFragmentsHeld != 0 || st.Drop(DropEndpointClosed) != 3 || heldKeys(e) != 0 {
		t.Errorf("after Close: %d held, endpoint_closed %d, %d datagrams in the table; want 0, 3, 0",
			st.RXFragmentsHeld, st.Drop(DropEndpointClosed), heldKeys(e))
	}
	if e.frag.timer.Stop() {
		t.Error("the timer was still armed after Close")
	}
	e.frag.fire(e) // a run that was waiting for the lock while Close ran
	injectFragment(e, false, 10, 0, true, 8)
	st = e.Stats()
	if st.RXFragmentsHeld != 0 || st.Drop(DropEndpointClosed) != 4 || st.Drop(DropFragmentTimeout) != 0 || up.n != 0 {
		t.Errorf("after Close and a late fragment: %d held, endpoint_closed %d, fragment_timeout %d, %d delivered; want 0, 4, 0, 0",
			st.RXFragmentsHeld, st.Drop(DropEndpointClosed), st.Drop(DropFragmentTimeout), up.n)
	}
}

// TestFragmentCloseRacesTimer: Close while the timer fires (1 ms
// timeouts), many times over; run with -race. Every fragment is dropped
// exactly once, by one or the other, and none stays held.
func TestFragmentCloseRacesTimer(t *testing.T) {
	for range 50 {
		e, _ := fragTestEndpoint(t, time.Millisecond, time.Millisecond)
		injectFragment(e, false, 9, 0, true, 8)
		injectFragment(e, true, 7, 0, true, 16)
		time.Sleep(time.Millisecond)
		e.Close()
		st := e.Stats()
		if got := st.Drop(DropFragmentTimeout) + st.Drop(DropEndpointClosed); got != 2 || st.RXFragmentsHeld != 0 {
			t.Fatalf("fragment_timeout %d + endpoint_closed %d = %d, %d held; want 2, 0",
				st.Drop(DropFragmentTimeout), st.Drop(DropEndpointClosed), got, st.RXFragmentsHeld)
		}
	}
}

// hasKey reports whether datagram id of a family is in reassembly.
func hasKey(e *Endpoint, v6 bool, id uint32) bool {
	e.frag.mu.Lock()
	defer e.frag.mu.Unlock()
	for k := range e.frag.index {
		if k.v6 == v6 && k.id == id {
			return true
		}
	}
	return false
}

// TestFragmentEvictsOldest: a full table evicts the datagram nearest its
// deadline. The IPv6 datagram that arrived first (deadline in 2 h) stays;
// the IPv4 ones after it (deadlines in 1 h) go in their order of
// arrival, one per new datagram (fragment_timeout, one per fragment
// held). Planted bugs: eviction by arrival alone, families mixed (the
// IPv6 datagram goes first); eviction of the newest (IPv4 1022 goes).
func TestFragmentEvictsOldest(t *testing.T) {
	e, _ := fragTestEndpoint(t, time.Hour, 2*time.Hour)
	injectFragment(e, true, 1, 0, true, 16)
	for id := range uint32(fragTableSize - 1) {
		injectFragment(e, false, id, 0, true, 8)
	}
	if n := heldKeys(e); n != fragTableSize {
		t.Fatalf("%d datagrams in reassembly, want %d (full)", n, fragTableSize)
	}
	for k := range uint32(3) {
		injectFragment(e, false, 5000+k, 0, true, 8)
		if got := statDropInternal(e, DropFragmentTimeout); got != uint64(k+1) {
			t.Fatalf("after new datagram %d: fragment_timeout = %d, want %d", k, got, k+1)
		}
		if hasKey(e, false, k) || !hasKey(e, true, 1) || !hasKey(e, false, k+1) || !hasKey(e, false, fragTableSize-2) || !hasKey(e, false, 5000+k) {
			t.Fatalf("after new datagram %d: evicted the wrong datagram (want IPv4 %d gone, IPv6 1, IPv4 %d and the newest kept)", k, k, k+1)
		}
	}
	if st := e.Stats(); st.RXFragmentsHeld != fragTableSize || heldKeys(e) != fragTableSize {
		t.Errorf("%d fragments held in %d datagrams, want %d in %d", st.RXFragmentsHeld, heldKeys(e), fragTableSize, fragTableSize)
	}
}

// TestFragmentEvictsOldestHolding: too many bytes held evict the oldest
// datagram that holds fragments; a poisoned one (holding none) older
// than it stays, and still drops its later fragments. 1500-byte
// fragments, 40 a datagram (59200 bytes): the 4 MiB bound (2796 of them)
// is reached inside the 70th datagram. Planted bug (evict from every datagram's
// list, poisoned ones included): the poisoned datagram is evicted first
// for nothing, and its later fragment is held as a new datagram.
func TestFragmentEvictsOldestHolding(t *testing.T) {
	e, _ := fragTestEndpoint(t, time.Hour, time.Hour)
	injectFragment(e, false, 1, 0, true, 8)
	injectFragment(e, false, 1, 0, true, 8) // duplicate: poisoned
	if got := statDropInternal(e, DropFragmentOverlap); got != 2 {
		t.Fatalf("fragment_overlap = %d, want 2", got)
	}
	const perDatagram, payload = 40, 1480
	sent := 0
	for id := uint32(2); sent < fragMaxHeld/(header.IPv4MinimumSize+payload)+1; id++ {
		for k := range perDatagram {
			injectFragment(e, false, id, k*payload, true, payload)
			sent++
		}
	}
	st := e.Stats()
	if got := st.Drop(DropFragmentTimeout); got != perDatagram {
		t.Errorf("fragment_timeout = %d, want %d (datagram 2 evicted)", got, perDatagram)
	}
	if hasKey(e, false, 2) || !hasKey(e, false, 1) || !hasKey(e, false, 3) {
		t.Errorf("datagram 2 in reassembly %v, 1 (poisoned) %v, 3 %v; want false, true, true", hasKey(e, false, 2), hasKey(e, false, 1), hasKey(e, false, 3))
	}
	if want := uint64(sent - perDatagram); st.RXFragmentsHeld != want {
		t.Errorf("%d fragments held, want %d", st.RXFragmentsHeld, want)
	}
	injectFragment(e, false, 1, 8, true, 8) // still poisoned
	if got := statDropInternal(e, DropFragmentOverlap); got != 3 {
		t.Errorf("fragment_overlap = %d after a later fragment of the poisoned datagram, want 3", got)
	}
}

func statDropInternal(e *Endpoint, r DropReason) uint64 {
	st := e.Stats()
	return st.Drop(r)
}

// TestFragmentPathAllocs: holding and completing datagrams allocates
// nothing per fragment once the table exists, nor does re-arming the
// timer (it is made once, with the table).
func TestFragmentPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector (sync.Pool drops items)")
	}
	e, _ := fragTestEndpoint(t, time.Hour, time.Hour)
	frames := [][]byte{
		testFragmentN("\x02\x00\x00\x00\x00\x0a", false, 3, 0, true, 8),
		testFragmentN("\x02\x00\x00\x00\x00\x0a", false, 3, 8, false, 8),
		testFragmentN("\x02\x00\x00\x00\x00\x0a", true, 4, 0, true, 8),
		testFragmentN("\x02\x00\x00\x00\x00\x0a", true, 4, 8, false, 8),
	}
	run := func() {
		for _, f := range frames {
			deliverFrame(e, f)
		}
	}
	run() // the table and the timer are made on the first fragment
	if n := testing.AllocsPerRun(200, run); n != 0 {
		t.Errorf("%.1f allocations per run of 4 fragments, want 0", n)
	}
	rearm := func() {
		e.frag.mu.Lock()
		e.frag.armed = false
		e.frag.arm(e.frag.now(), e.frag.now()+int64(time.Hour))
		e.frag.mu.Unlock()
	}
	if n := testing.AllocsPerRun(200, rearm); n != 0 {
		t.Errorf("%.1f allocations re-arming the timer, want 0", n)
	}
}

// BenchmarkFragmentTableFull measures a fragment of a new datagram when
// the table is full (1024 datagrams each holding one fragment): it
// evicts the oldest. Finding it is O(1), whatever the table's size.
func BenchmarkFragmentTableFull(b *testing.B) {
	const mac = tcpip.LinkAddress("\x02\x00\x00\x00\x00\x0a")
	e, err := New(channel.New(8, 1500, mac), Options{})
	if err != nil {
		b.Fatal(err)
	}
	e.Attach(&countUp{})
	b.Cleanup(e.Close)
	frames := make([][]byte, 1<<16)
	for id := range frames {
		frames[id] = testFragment(mac, uint16(id), 0, true)
	}
	inject := func(id int) {
		deliverFrame(e, frames[id%len(frames)])
	}
	for id := range fragTableSize {
		inject(id)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		inject(fragTableSize + i)
	}
	b.StopTimer()
	if st := e.Stats(); st.RXFragmentsHeld != fragTableSize || st.Drop(DropFragmentTimeout) != uint64(b.N) {
		b.Fatalf("%d held, fragment_timeout %d after %d new datagrams; want %d, %d", st.RXFragmentsHeld, st.Drop(DropFragmentTimeout), b.N, fragTableSize, b.N)
	}
}

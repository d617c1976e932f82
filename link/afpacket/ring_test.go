package afpacket_test

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/link/afpacket"
	"github.com/mplsnode/mplsnode/link/lowerlink"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// testEthertype is IEEE 802's local experimental ethertype: the kernels
// in the namespaces ignore it.
const testEthertype = 0x88b5

// seqFrame builds a frame of size bytes to dst: Ethernet header, the
// sequence number, then bytes that depend on both, so a frame that lost
// or mixed bytes (a slot overwritten early, a stale length) is caught.
func seqFrame(dst, src tcpip.LinkAddress, seq uint32, size int) []byte {
	b := make([]byte, size)
	copy(b, dst)
	copy(b[6:], src)
	binary.BigEndian.PutUint16(b[12:], testEthertype)
	binary.BigEndian.PutUint32(b[14:], seq)
	binary.BigEndian.PutUint16(b[18:], uint16(size))
	for i := 20; i < size; i++ {
		b[i] = byte(seq) ^ byte(i)
	}
	return b
}

// recorder is a BatchDispatcher that checks seqFrame frames: each intact,
// sequence numbers increasing.
type recorder struct {
	mu      sync.Mutex
	last    int64 // last sequence number seen, -1 before any
	got     int
	bad     int
	reorder int
	batches int
	sizes   map[int]int
	seen    map[uint32]int // size of each sequence number delivered
}

func newRecorder() *recorder {
	return &recorder{last: -1, sizes: map[int]int{}, seen: map[uint32]int{}}
}

func (r *recorder) DeliverNetworkPacket(_ tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	b := pkt.Data().AsRange().ToSlice()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(b) < 20 || binary.BigEndian.Uint16(b[12:]) != testEthertype {
		return // not ours (IPv6 neighbour discovery of the kernel, say)
	}
	seq := binary.BigEndian.Uint32(b[14:])
	ok := int(binary.BigEndian.Uint16(b[18:])) == len(b)
	for i := 20; ok && i < len(b); i++ {
		ok = b[i] == byte(seq)^byte(i)
	}
	if !ok {
		r.bad++
		return
	}
	if int64(seq) <= r.last {
		r.reorder++
	}
	r.last = int64(seq)
	r.got++
	r.sizes[len(b)]++
	r.seen[seq] = len(b)
}

func (r *recorder) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

func (r *recorder) EndBatch() {
	r.mu.Lock()
	r.batches++
	r.mu.Unlock()
}

func (r *recorder) snapshot() (got, bad, reorder, batches int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got, r.bad, r.reorder, r.batches
}

var _ lowerlink.BatchDispatcher = (*recorder)(nil)

// sendFrames writes frames through ep in batches of 64 and returns how
// many the endpoint took.
func sendFrames(t *testing.T, ep *afpacket.Endpoint, frames [][]byte) int {
	t.Helper()
	sent := 0
	for i := 0; i < len(frames); i += 64 {
		var l stack.PacketBufferList
		for _, f := range frames[i:min(i+64, len(frames))] {
			l.PushBack(stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(f)}))
		}
		n, err := ep.WritePackets(l)
		l.DecRef()
		sent += n
		if err != nil {
			t.Fatalf("WritePackets after %d frames: %v", sent, err)
		}
	}
	return sent
}

// pair opens a sending endpoint in ns a and a receiving one, with a
// recorder attached, in ns b.
func pair(t *testing.T, tp topo, sendOpts, recvOpts afpacket.Options) (tx, rx *afpacket.Endpoint, rec *recorder) {
	t.Helper()
	// No IPv6 neighbour discovery from the kernels: frames that are not
	// ours would be counted in the receive drops too.
	tp.a.MustExec("sysctl", "-qw", "net.ipv6.conf."+tp.va+".disable_ipv6=1")
	tp.b.MustExec("sysctl", "-qw", "net.ipv6.conf."+tp.vb+".disable_ipv6=1")
	sendOpts.Interface, recvOpts.Interface = tp.va, tp.vb
	tx, err := openIn(t, tp.a, sendOpts)
	if err != nil {
		t.Fatalf("sender: %v", err)
	}
	t.Cleanup(func() { tx.Close(); tx.Wait() })
	rx, err = openIn(t, tp.b, recvOpts)
	if err != nil {
		t.Fatalf("receiver: %v", err)
	}
	t.Cleanup(func() { rx.Close(); rx.Wait() })
	rec = newRecorder()
	rx.Attach(rec)
	return tx, rx, rec
}

// waitAccounted waits until the receiver has delivered or counted as
// dropped every frame the sender took (or the deadline passes) and
// returns the receiver's and sender's stats.
func waitAccounted(t *testing.T, rec *recorder, tx, rx *afpacket.Endpoint, sent int) (afpacket.Stats, afpacket.Stats) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, _, _, _ := rec.snapshot()
		rs, ts := rx.Stats(), tx.Stats()
		if uint64(got)+rs.RXDrops+rs.RXTruncated+ts.TXDropped >= uint64(sent) || time.Now().After(deadline) {
			return rs, ts
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRingWrapAround sends 100,000 frames of mixed sizes from a transmit
// ring of 64 slots to a receive ring of 64 slots (the frame ring) or of 8
// small blocks (the block ring), so both rings wrap well over a thousand
// times, and checks that every frame is delivered intact and in order or
// counted as dropped (receive ring full, device queue full): delivered +
// counted = sent. Planted bug it caught: the frame ring's reader wrapping
// one slot early (that slot never handed back: the kernel stalled on it,
// 126 frames delivered).
func TestRingWrapAround(t *testing.T) {
	for _, tc := range []struct {
		name string
		recv afpacket.Options
	}{
		{"frame", afpacket.Options{Mode: afpacket.ModeRing, RXRingFrames: 64}},
		{"block", afpacket.Options{Mode: afpacket.ModeRing, RXRing: afpacket.RXRingBlock, RingBlockSize: 16 << 10, RingBlocks: 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTopo(t)
			tx, rx, rec := pair(t, tp, afpacket.Options{Mode: afpacket.ModeRing, TXRingFrames: 64}, tc.recv)
			const n = 100000
			frames := make([][]byte, n)
			for i := range frames {
				frames[i] = seqFrame(rx.LinkAddress(), tx.LinkAddress(), uint32(i), 60+(i*97)%1455)
			}
			sent := sendFrames(t, tx, frames)
			rs, ts := waitAccounted(t, rec, tx, rx, sent)
			got, bad, reorder, batches := rec.snapshot()
			t.Logf("sent %d, delivered %d in %d batches, receive ring drops %d, device drops %d; sender %+v",
				sent, got, batches, rs.RXDrops, ts.TXDropped, ts)
			if bad != 0 || reorder != 0 {
				t.Errorf("got %d corrupt and %d reordered frames, want 0", bad, reorder)
			}
			if acc := uint64(got) + rs.RXDrops + ts.TXDropped; acc != uint64(sent) {
				t.Errorf("delivered %d + receive drops %d + device drops %d = %d, want the %d sent", got, rs.RXDrops, ts.TXDropped, acc, sent)
			}
			if got < 64*100 {
				t.Errorf("delivered only %d frames: the rings did not wrap 100 times", got)
			}
			if ts.TXPackets+ts.TXDropped != uint64(sent) || ts.TXErrors != 0 {
				t.Errorf("sender counted %d sent + %d dropped, %d errors; want %d, 0 errors", ts.TXPackets, ts.TXDropped, ts.TXErrors, sent)
			}
		})
	}
}

// TestRingOversizeFrame sends frames longer than a receive slot or block
// between small ones: a frame ring delivers them whole (the kernel queues
// them on the socket), a block ring and a frame ring with a smaller
// Options.MaxFrameSize count them in RXTruncated (lower_rx_truncated); in
// every case the frames after them arrive intact. Planted bug: the block
// ring not comparing tp_snaplen with tp_len: the clamped frames delivered
// short (20 corrupt) and RXTruncated 0.
func TestRingOversizeFrame(t *testing.T) {
	for _, tc := range []struct {
		name      string
		recv      afpacket.Options
		truncated bool
	}{
		{"frame ring, copied whole", afpacket.Options{Mode: afpacket.ModeRing, MTU: 1500}, false},
		{"frame ring, MaxFrameSize", afpacket.Options{Mode: afpacket.ModeRing, MTU: 1500, MaxFrameSize: 4000}, true},
		{"block ring", afpacket.Options{Mode: afpacket.ModeRing, RXRing: afpacket.RXRingBlock, RingBlockSize: 8 << 10, RingBlocks: 8}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTopo(t)
			tp.a.MustExec("ip", "link", "set", tp.va, "mtu", "9000")
			tp.b.MustExec("ip", "link", "set", tp.vb, "mtu", "9000")
			tx, rx, rec := pair(t, tp, afpacket.Options{Mode: afpacket.ModeMMsg}, tc.recv)
			var frames [][]byte
			const big = 9014
			for i := 0; i < 40; i++ {
				size := 200
				if i%2 == 1 {
					size = big
				}
				frames = append(frames, seqFrame(rx.LinkAddress(), tx.LinkAddress(), uint32(i), size))
			}
			sent := 0
			for _, f := range frames {
				// One at a time, paced, so no receive queue overflows.
				sent += sendFrames(t, tx, [][]byte{f})
				time.Sleep(2 * time.Millisecond)
			}
			rs, _ := waitAccounted(t, rec, tx, rx, sent)
			got, bad, reorder, _ := rec.snapshot()
			if bad != 0 || reorder != 0 {
				t.Errorf("got %d corrupt and %d reordered frames, want 0", bad, reorder)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			for i := 0; i < len(frames); i += 2 {
				if rec.seen[uint32(i)] != 200 {
					t.Errorf("small frame %d after an oversize one: not delivered intact", i)
				}
			}
			if tc.truncated {
				if rs.RXTruncated != 20 || rec.sizes[big] != 0 {
					t.Errorf("got RXTruncated %d and %d oversize frames delivered, want 20 and 0", rs.RXTruncated, rec.sizes[big])
				}
			} else if rec.sizes[big] != 20 || rs.RXTruncated != 0 {
				t.Errorf("got %d oversize frames delivered whole and RXTruncated %d, want 20 and 0", rec.sizes[big], rs.RXTruncated)
			}
			t.Logf("delivered %d, stats %+v", got, rs)
		})
	}
}

// TestRingBusyDownUpClose keeps both rings of an endpoint busy (a peer
// floods it, four goroutines write through it), takes the interface down
// and up twice, checks frames flow again after each up, then closes the
// endpoint while it is still busy: Close and Wait must return, writers
// must get errors rather than faults, and no goroutine may be left. Run
// it with -race. Planted bug it caught: a receive goroutine that keeps
// polling after its socket is closed (Wait never returned).
func TestRingBusyDownUpClose(t *testing.T) {
	tp := newTopo(t)
	before := runtime.NumGoroutine()
	peer, err := openIn(t, tp.a, afpacket.Options{Interface: tp.va, Mode: afpacket.ModeRing})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close() // Wait comes below, with a deadline
	peerRec := newRecorder()
	peer.Attach(peerRec)
	ep, err := openIn(t, tp.b, afpacket.Options{Interface: tp.vb, Mode: afpacket.ModeRing, Queues: 2})
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	ep.Attach(rec)

	var stop atomic.Bool
	var wg sync.WaitGroup
	writer := func(from, to *afpacket.Endpoint, seq uint32) {
		defer wg.Done()
		f := seqFrame(to.LinkAddress(), from.LinkAddress(), seq, 1000)
		for !stop.Load() {
			var l stack.PacketBufferList
			for i := 0; i < 32; i++ {
				l.PushBack(stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(f)}))
			}
			_, err := from.WritePackets(l)
			l.DecRef()
			if _, closed := err.(*tcpip.ErrClosedForSend); closed {
				return
			}
		}
	}
	wg.Add(5)
	go writer(peer, ep, 0)
	for i := 0; i < 4; i++ {
		go writer(ep, peer, 0)
	}
	waitGrow := func(what string, r *recorder) {
		t.Helper()
		start, _, _, _ := r.snapshot()
		deadline := time.Now().Add(20 * time.Second)
		for {
			if got, _, _, _ := r.snapshot(); got > start+1000 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no frames within 20 s; stats %+v", what, ep.Stats())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitGrow("start", rec)
	for i := 0; i < 2; i++ {
		tp.b.MustExec("ip", "link", "set", tp.vb, "down")
		time.Sleep(100 * time.Millisecond)
		tp.b.MustExec("ip", "link", "set", tp.vb, "up")
		waitGrow(fmt.Sprintf("receive after up #%d", i+1), rec)
		waitGrow(fmt.Sprintf("send after up #%d", i+1), peerRec)
	}
	closed := make(chan struct{})
	go func() {
		ep.Close()
		ep.Wait()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		var dump strings.Builder
		pprof.Lookup("goroutine").WriteTo(&dump, 1)
		t.Fatalf("Close and Wait did not return within 20 s while the rings were busy; goroutines:\n%s", dump.String())
	}
	stop.Store(true)
	wg.Wait()
	st := ep.Stats()
	t.Logf("after close: %+v", st)
	if _, bad, _, _ := rec.snapshot(); bad != 0 {
		t.Errorf("got %d corrupt frames", bad)
	}
	peer.Close()
	waited := make(chan struct{})
	go func() { peer.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(20 * time.Second):
		t.Fatal("the peer's Wait did not return within 20 s of Close")
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+2 {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// l3Frame is an Ethernet frame to dst carrying the network data l3 of the
// given ethertype.
func l3Frame(dst, src tcpip.LinkAddress, ethertype uint16, l3 []byte) []byte {
	b := make([]byte, 14, 14+len(l3))
	copy(b, dst)
	copy(b[6:], src)
	binary.BigEndian.PutUint16(b[12:], ethertype)
	return append(b, l3...)
}

// ipv4Packet is an IPv4 header (IHL 5, or 6 with an option word) and 8
// bytes of transport header (the ports first).
func ipv4Packet(src, dst [4]byte, proto byte, sport, dport uint16, frag uint16, ihl int) []byte {
	b := make([]byte, ihl*4+8)
	b[0] = 0x40 | byte(ihl)
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	binary.BigEndian.PutUint16(b[6:], frag)
	b[8], b[9] = 64, proto
	copy(b[12:], src[:])
	copy(b[16:], dst[:])
	binary.BigEndian.PutUint16(b[ihl*4:], sport)
	binary.BigEndian.PutUint16(b[ihl*4+2:], dport)
	return b
}

// ipv6Packet is an IPv6 header and 8 bytes of transport header.
func ipv6Packet(src, dst byte, next byte, sport, dport uint16) []byte {
	b := make([]byte, 48)
	b[0] = 0x60
	binary.BigEndian.PutUint16(b[4:], 8)
	b[6], b[7] = next, 64
	b[8], b[23] = 0xfd, src
	b[24], b[39] = 0xfd, dst
	binary.BigEndian.PutUint16(b[40:], sport)
	binary.BigEndian.PutUint16(b[42:], dport)
	return b
}

// TestFanoutFlowHash sends flows of many kinds (IPv4 TCP and UDP, with an
// IP option, fragments, IPv6, MPLS over IPv4 and IPv6, a label stack of
// two, ARP) into an endpoint with two queues and checks that each flow's
// frames all reach the queue FlowHash names: the kernel runs our fanout
// program as the reference computes it, and both queues get flows.
// Planted bug: the IPv4 part reading the ports at a fixed offset of 20
// (ignoring IHL): the flow with an IP option went to the other queue.
func TestFanoutFlowHash(t *testing.T) {
	tp := newTopo(t)
	tx, rx, _ := pair(t, tp, afpacket.Options{Mode: afpacket.ModeMMsg}, afpacket.Options{Mode: afpacket.ModeRing, Queues: 2})
	type flow struct {
		name      string
		ethertype uint16
		l3        []byte
	}
	a, b := [4]byte{10, 1, 2, 3}, [4]byte{10, 9, 8, 7}
	mpls := func(label uint32, bottom bool, inner []byte) []byte {
		e := make([]byte, 4)
		v := label<<12 | 64
		if bottom {
			v |= 1 << 8
		}
		binary.BigEndian.PutUint32(e, v)
		return append(e, inner...)
	}
	var flows []flow
	for p := uint16(0); p < 4; p++ {
		flows = append(flows,
			flow{fmt.Sprintf("ipv4 tcp %d", p), 0x0800, ipv4Packet(a, b, 6, 40000+p, 80, 0x4000, 5)},
			flow{fmt.Sprintf("ipv4 udp option %d", p), 0x0800, ipv4Packet(a, b, 17, 50000+p*7, 53, 0, 6)},
			flow{fmt.Sprintf("ipv6 tcp %d", p), 0x86dd, ipv6Packet(1, 2, 6, 40000+p*3, 443)},
			flow{fmt.Sprintf("mpls ipv4 udp %d", p), 0x8847, mpls(100, true, ipv4Packet(a, b, 17, 1000+p, 2000, 0, 5))},
			flow{fmt.Sprintf("mpls ipv6 udp %d", p), 0x8847, mpls(100, true, ipv6Packet(3, 4, 17, 1000+p*5, 2000))},
			flow{fmt.Sprintf("mpls two labels %d", p), 0x8847, mpls(100+uint32(p), false, mpls(200, true, ipv4Packet(a, b, 17, 1, 2, 0, 5)))},
		)
	}
	flows = append(flows,
		flow{"ipv4 fragment", 0x0800, ipv4Packet(a, b, 17, 7, 8, 0x2000, 5)},
		flow{"arp", 0x0806, make([]byte, 28)},
	)
	used := map[int]bool{}
	for _, f := range flows {
		want := int(afpacket.FlowHash(f.ethertype, f.l3) % 2)
		used[want] = true
		before := rx.QueueRXPackets()
		const n = 20
		frames := make([][]byte, n)
		for i := range frames {
			frames[i] = l3Frame(rx.LinkAddress(), tx.LinkAddress(), f.ethertype, f.l3)
		}
		sendFrames(t, tx, frames)
		deadline := time.Now().Add(10 * time.Second)
		var got []uint64
		for {
			got = rx.QueueRXPackets()
			if got[0]+got[1]-before[0]-before[1] >= n || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if d := got[want] - before[want]; d != n || got[1-want] != before[1-want] {
			t.Errorf("%s: queue %d (FlowHash) got %d of %d frames, the other queue %d", f.name, want, d, n, got[1-want]-before[1-want])
		}
	}
	if len(used) != 2 {
		t.Errorf("the flows all hash to one queue: the test spreads nothing")
	}
}

// TestReceiveCapacity checks what one receive queue holds in each mode:
// a frame ring's slots times the MTU (here fewer than its socket buffer
// holds), a block ring's blocks, and in mmsg mode or with a small socket
// buffer, the buffer asked for (the kernel reports twice the request:
// socket(7), SO_RCVBUF). Planted bug: counting the slots' size (2 KiB)
// instead of the MTU gave 131072 for the first case.
func TestReceiveCapacity(t *testing.T) {
	tp := newTopo(t)
	for _, tc := range []struct {
		name string
		opts afpacket.Options
		want int
	}{
		{"frame ring", afpacket.Options{Mode: afpacket.ModeRing, RXRingFrames: 64}, 64 * 1500},
		{"frame ring, small buffer", afpacket.Options{Mode: afpacket.ModeRing, RXRingFrames: 2048, ReceiveBufferSize: 1 << 20}, 1 << 20},
		{"block ring", afpacket.Options{Mode: afpacket.ModeRing, RXRing: afpacket.RXRingBlock, RingBlockSize: 64 << 10, RingBlocks: 4}, 4 * 64 << 10},
		{"mmsg", afpacket.Options{Mode: afpacket.ModeMMsg, ReceiveBufferSize: 2 << 20}, 2 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Interface = tp.va
			ep, err := openIn(t, tp.a, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer ep.Close()
			if got := ep.ReceiveCapacity(); got != tc.want {
				t.Errorf("ReceiveCapacity() = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestRXRingFramesHold fills a receive frame ring of N slots from the
// veth peer while nobody reads it (the reader starts at Attach), then
// attaches a reader: exactly the ring's slots come out, and the kernel
// counted the rest as dropped (PACKET_STATISTICS tp_drops, Stats.RXDrops),
// so the ring holds what Options.RXRingFrames asked for, rounded up to
// whole 64 KiB blocks of 2 KiB slots. Planted bug: New ignoring
// Options.RXRingFrames (always DefaultRXRingFrames) delivered all 1,524
// frames and dropped none in each case.
func TestRXRingFramesHold(t *testing.T) {
	tp := newTopo(t)
	tp.a.MustExec("sysctl", "-qw", "net.ipv6.conf."+tp.va+".disable_ipv6=1")
	tp.b.MustExec("sysctl", "-qw", "net.ipv6.conf."+tp.vb+".disable_ipv6=1")
	tx, err := openIn(t, tp.a, afpacket.Options{Interface: tp.va, Mode: afpacket.ModeMMsg})
	if err != nil {
		t.Fatalf("sender: %v", err)
	}
	t.Cleanup(func() { tx.Close(); tx.Wait() })
	const sent = 1524
	frames := make([][]byte, sent)
	for i := range frames {
		frames[i] = seqFrame("\xff\xff\xff\xff\xff\xff", "\x02\x00\x00\x00\x00\x01", uint32(i), 64+i%64)
	}
	for _, tc := range []struct{ ask, want int }{{64, 64}, {100, 128}, {1000, 1024}} {
		t.Run(fmt.Sprint(tc.ask), func(t *testing.T) {
			rx, err := openIn(t, tp.b, afpacket.Options{Interface: tp.vb, Mode: afpacket.ModeRing, RXRingFrames: tc.ask})
			if err != nil {
				t.Fatalf("receiver: %v", err)
			}
			defer func() { rx.Close(); rx.Wait() }()
			if got := rx.RXRingFrames(); got != tc.want {
				t.Errorf("RXRingFrames() = %d, want %d", got, tc.want)
			}
			// Small batches with pauses: the veth peer's backlog
			// (netdev_max_backlog) must not be what drops.
			for i := 0; i < sent; i += 32 {
				if n := sendFrames(t, tx, frames[i:min(i+32, sent)]); n != min(32, sent-i) {
					t.Fatalf("sender took %d of %d frames", n, min(32, sent-i))
				}
				time.Sleep(time.Millisecond)
			}
			wantDrops := uint64(sent - tc.want)
			deadline := time.Now().Add(10 * time.Second)
			for rx.Stats().RXDrops < wantDrops && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			rec := newRecorder()
			rx.Attach(rec)
			got := 0
			for got, _, _, _ = rec.snapshot(); got < tc.want && time.Now().Before(deadline); got, _, _, _ = rec.snapshot() {
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond) // anything beyond the slots would show now
			got, bad, _, _ := rec.snapshot()
			drops := rx.Stats().RXDrops // cumulative
			if got != tc.want || bad != 0 || drops != wantDrops {
				t.Errorf("ring of %d slots (asked %d): delivered %d intact, %d bad, %d dropped of %d sent; want %d delivered, %d dropped",
					tc.want, tc.ask, got, bad, drops, sent, tc.want, wantDrops)
			}
		})
	}
}

package afpacket_test

import (
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/link/afpacket"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// TestBusyPoll receives on two ring endpoints with Options.BusyPoll (one
// busy group) while two mmsg senders send them numbered frames in turn,
// a few at a time with short gaps, so that most frames land while a
// goroutine is spinning and the spinner and each queue's own goroutine
// race for the rings. Every frame must be delivered once, intact and in
// order on its link, busy polls must have delivered some of them, and
// once the senders stop the spinning must stop (an idle node stays idle).
// Planted bugs it caught: tryDeliver never delivering (busy_poll_hits 0);
// the spin loop ignoring its deadline (BusyPollTime still growing when
// idle); the owner goroutine reading its ring without rxMu (frames
// delivered twice or out of order: the reorder count).
func TestBusyPoll(t *testing.T) {
	const perLink = 600
	var txs, rxs [2]*afpacket.Endpoint
	var recs [2]*recorder
	for i := range txs {
		tp := newTopo(t)
		txs[i], rxs[i], recs[i] = pair(t, tp, afpacket.Options{Mode: afpacket.ModeMMsg},
			afpacket.Options{Mode: afpacket.ModeRing, BusyPoll: time.Millisecond})
	}
	frames := [2][][]byte{}
	for i := range txs {
		for seq := 0; seq < perLink; seq++ {
			frames[i] = append(frames[i], seqFrame(rxs[i].LinkAddress(), txs[i].LinkAddress(), uint32(seq), 60+seq%1400))
		}
	}
	for seq := 0; seq < perLink; seq++ {
		for i := range txs {
			if n, err := writeOne(txs[i], frames[i][seq]); n != 1 || err != nil {
				t.Fatalf("link %d frame %d: wrote %d: %v", i, seq, n, err)
			}
		}
		if seq%4 == 3 {
			time.Sleep(100 * time.Microsecond) // a gap a spinner bridges
		}
	}
	var hits, polls uint64
	for i := range txs {
		rs, ts := waitAccounted(t, recs[i], txs[i], rxs[i], perLink)
		got, bad, reorder, _ := recs[i].snapshot()
		recs[i].mu.Lock()
		distinct := len(recs[i].seen)
		recs[i].mu.Unlock()
		if bad != 0 || reorder != 0 || distinct != got {
			t.Errorf("link %d: %d frames delivered (%d distinct), %d corrupt, %d out of order", i, got, distinct, bad, reorder)
		}
		if uint64(got)+rs.RXDrops+ts.TXDropped != perLink {
			t.Errorf("link %d: delivered %d + receive drops %d + send drops %d != sent %d", i, got, rs.RXDrops, ts.TXDropped, perLink)
		}
		hits += rs.BusyPollHits
		polls += rs.BusyPolls
	}
	if polls == 0 || hits == 0 {
		t.Errorf("busy polls %d delivered %d batches; want both > 0", polls, hits)
	}
	t.Logf("busy polls %d, batches they delivered %d", polls, hits)

	// Idle: after the last frame a spin lasts BusyPoll (1 ms); 200 ms
	// later nothing spins any more.
	spun := func() time.Duration { return rxs[0].Stats().BusyPollTime + rxs[1].Stats().BusyPollTime }
	time.Sleep(200 * time.Millisecond)
	before := spun()
	time.Sleep(300 * time.Millisecond)
	if after := spun(); after != before {
		t.Errorf("busy-poll time grew from %v to %v with no traffic: still spinning", before, after)
	}
}

// writeOne sends one frame through ep.
func writeOne(ep *afpacket.Endpoint, f []byte) (int, tcpip.Error) {
	var l stack.PacketBufferList
	l.PushBack(stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(f)}))
	defer l.DecRef()
	return ep.WritePackets(l)
}

// TestBusyPollAdaptive receives on a ring endpoint with BusyPoll and
// BusyPollAdaptive: frames 20 ms apart (a trickle, further apart than
// BusyPoll) must never start a spin, and frames 100 us apart (each
// followed within BusyPoll by the next) must start spins that deliver
// some of them; every frame is delivered once, in order. Sleeps only
// lengthen the gaps, so the first half holds on any machine; the second
// needs one gap in 300 shorter than 5 ms. Planted bugs it caught: the
// adaptive option ignored (a spin after each trickled frame: 20 busy
// polls and 5 after the burst, want 0); expectsSoon always false (no
// busy poll in the burst).
func TestBusyPollAdaptive(t *testing.T) {
	const busy = 5 * time.Millisecond
	tp := newTopo(t)
	tx, rx, rec := pair(t, tp, afpacket.Options{Mode: afpacket.ModeMMsg},
		afpacket.Options{Mode: afpacket.ModeRing, BusyPoll: busy, BusyPollAdaptive: true})
	seq := 0
	send := func(n int, gap time.Duration) {
		t.Helper()
		for i := 0; i < n; i++ {
			f := seqFrame(rx.LinkAddress(), tx.LinkAddress(), uint32(seq), 60)
			if n, err := writeOne(tx, f); n != 1 || err != nil {
				t.Fatalf("frame %d: wrote %d: %v", seq, n, err)
			}
			seq++
			time.Sleep(gap)
		}
	}
	// A quiet spell first: whatever came before (nothing) is long past.
	send(20, 20*time.Millisecond)
	waitAccounted(t, rec, tx, rx, seq)
	if s := rx.Stats(); s.BusyPolls != 0 {
		t.Errorf("frames %v apart (more than BusyPoll %v) started %d busy polls; want 0", 20*time.Millisecond, busy, s.BusyPolls)
	}
	send(300, 100*time.Microsecond)
	rs, ts := waitAccounted(t, rec, tx, rx, seq)
	if rs.BusyPolls == 0 || rs.BusyPollHits == 0 {
		t.Errorf("frames %v apart: %d busy polls delivered %d batches; want both > 0", 100*time.Microsecond, rs.BusyPolls, rs.BusyPollHits)
	}
	got, bad, reorder, _ := rec.snapshot()
	if bad != 0 || reorder != 0 || uint64(got)+rs.RXDrops+ts.TXDropped != uint64(seq) {
		t.Errorf("%d of %d frames delivered (%d receive drops, %d send drops), %d corrupt, %d out of order", got, seq, rs.RXDrops, ts.TXDropped, bad, reorder)
	}
	// Quiet again: a spin ends BusyPoll after the burst; the next trickle
	// (its first frame follows a long gap) starts none.
	time.Sleep(50 * time.Millisecond)
	polls := rx.Stats().BusyPolls
	send(5, 20*time.Millisecond)
	waitAccounted(t, rec, tx, rx, seq)
	if s := rx.Stats(); s.BusyPolls != polls {
		t.Errorf("a trickle after a quiet spell started %d busy polls; want 0", s.BusyPolls-polls)
	}
}

package afpacket

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// TestTXRingWithdraw checks the transmit ring's withdrawal of pending
// slots against what the kernel reads of them (the TPACKET_V2 header's
// tp_len: a slot of length 0 is skipped, PACKET_LOSS) and what reap counts
// once the kernel has taken them: withdraw(false), a device refusing one
// frame (ENOBUFS), takes the oldest pending frame alone; withdraw(true),
// a failed send (ENETDOWN), takes every one left; a withdrawn frame is
// never counted as sent. The ring wraps, so the walk from head crosses
// the end. Planted bug: the all flag inverted in withdraw (the refused
// frame withdraws the whole ring, a failed send only one).
func TestTXRingWithdraw(t *testing.T) {
	l := layoutRing(txDataOff+1500, 4)
	r := &txRing{mem: make([]byte, l.mapped()), frameSize: l.frameSize, frameNr: l.frameNr, layout: l, lens: make([]uint32, l.frameNr)}
	// The kernel takes every pending slot: it marks them available.
	take := func() (frames, bytes uint64) {
		for i := range r.frameNr {
			if r.status(i) == unix.TP_STATUS_SEND_REQUEST {
				u32at(r.slot(i), f2StatusOff).Store(unix.TP_STATUS_AVAILABLE)
			}
		}
		return r.reap()
	}
	tpLen := func(i int) uint32 { return binary.NativeEndian.Uint32(r.slot(i)[f2LenOff:]) }
	// Start near the end, so that the pending slots wrap.
	for range r.frameNr - 2 {
		r.commit(100)
	}
	if f, _ := take(); f != uint64(r.frameNr-2) {
		t.Fatalf("setup: reaped %d frames, want %d", f, r.frameNr-2)
	}
	sizes := []int{60, 61, 62, 63, 64}
	first := r.next
	for _, n := range sizes {
		r.commit(n)
	}
	slot := func(k int) int { return (first + k) % r.frameNr }

	if n := r.withdraw(false); n != 1 {
		t.Fatalf("withdraw(false) withdrew %d frames, want 1 (the oldest pending)", n)
	}
	if got := tpLen(slot(0)); got != 0 {
		t.Errorf("the withdrawn slot's tp_len is %d, want 0 (the kernel skips it)", got)
	}
	for k := 1; k < len(sizes); k++ {
		if got, want := tpLen(slot(k)), uint32(virtioNetHdrLen+sizes[k]); got != want {
			t.Errorf("pending slot %d: tp_len %d, want %d (left to send)", k, got, want)
		}
	}
	// A second refusal takes the next frame, not the one already gone.
	if n := r.withdraw(false); n != 1 || tpLen(slot(1)) != 0 || tpLen(slot(2)) == 0 {
		t.Fatalf("second withdraw(false): withdrew %d, tp_len %d and %d; want 1, 0 and the frame's", n, tpLen(slot(1)), tpLen(slot(2)))
	}
	if n := r.withdraw(true); n != len(sizes)-2 {
		t.Fatalf("withdraw(true) withdrew %d frames, want %d (all those left)", n, len(sizes)-2)
	}
	for k := range sizes {
		if got := tpLen(slot(k)); got != 0 {
			t.Errorf("after withdraw(true), slot %d's tp_len is %d, want 0", k, got)
		}
	}
	if n := r.withdraw(true); n != 0 {
		t.Errorf("withdraw(true) with nothing left withdrew %d", n)
	}
	if f, b := take(); f != 0 || b != 0 || r.pending != 0 {
		t.Errorf("reaped %d frames (%d bytes), %d pending; want none sent: all were withdrawn", f, b, r.pending)
	}

	// Withdrawn and sent frames mixed: only the sent ones count.
	for _, n := range sizes {
		r.commit(n)
	}
	r.withdraw(false)
	if f, b := take(); f != uint64(len(sizes)-1) || b != uint64(61+62+63+64) {
		t.Errorf("reaped %d frames, %d bytes; want %d, %d", f, b, len(sizes)-1, 61+62+63+64)
	}
}

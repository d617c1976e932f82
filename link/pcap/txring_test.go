package pcap_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/internal/testkit/pcaptest"
	"github.com/mplsnode/mplsnode/internal/testkit/tshark"
	"github.com/mplsnode/mplsnode/link/lowerlink"
	"github.com/mplsnode/mplsnode/link/pcap"
	"github.com/mplsnode/mplsnode/mplstest"
)

// TestTXRingPassesThrough puts the recorder between a writer and a lower
// link with a transmit ring: the frames written into the ring's slots
// reach the lower link unchanged and tshark reads them in the capture, so
// recording a link keeps its slot path. Over a lower link without a ring,
// TXBegin says so and the writer falls back to WritePackets.
func TestTXRingPassesThrough(t *testing.T) {
	file, w := pcaptest.File(t, "ring.pcap", pcap.Options{})
	ring := mplstest.NewRingSink(1500, macA, 1518)
	ring.Record = true
	var ep lowerlink.TXRing = pcap.New(ring, w)

	frames := [][]byte{labelledFrame(100), labelledFrame(1400)}
	q, ok := ep.TXBegin(7)
	if !ok {
		t.Fatal("TXBegin through the recorder found no ring")
	}
	for _, fr := range frames {
		slot, err := ep.TXSlot(q, len(fr))
		if err != nil || slot == nil {
			t.Fatalf("TXSlot(%d) = %v, %v", len(fr), slot != nil, err)
		}
		copy(slot, fr)
		ep.TXCommit(q, len(fr))
	}
	if failed, err := ep.TXEnd(q); failed != 0 || err != nil {
		t.Fatalf("TXEnd = %d, %v", failed, err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if len(ring.Frames) != len(frames) || ring.Batches != 1 {
		t.Fatalf("ring got %d frames in %d batches, want %d in 1", len(ring.Frames), ring.Batches, len(frames))
	}
	for i := range frames {
		if !bytes.Equal(ring.Frames[i], frames[i]) {
			t.Fatalf("ring frame %d changed on the way", i)
		}
	}
	got := joinRows(tshark.Fields(t, file, "frame.len", "mpls.label", "tcp.len"))
	want := "158;100;100 1458;100;1400"
	if strings.Join(got, " ") != want {
		t.Fatalf("tshark read %q, want %q", strings.Join(got, " "), want)
	}

	plain := pcap.New(mplstest.NewSink(1500, macA), w)
	if _, ok := plain.TXBegin(7); ok {
		t.Fatal("TXBegin over a lower link without a ring said ok")
	}
}

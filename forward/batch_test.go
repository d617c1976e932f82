package forward_test

import (
	"sync/atomic"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// batchLink is a channel endpoint that, like link/afpacket, ends its
// receive batches with EndBatch, and counts the WritePackets calls made
// on it.
type batchLink struct {
	*channel.Endpoint
	up     gstack.NetworkDispatcher
	writes atomic.Int32
}

func (l *batchLink) Attach(d gstack.NetworkDispatcher) {
	l.up = d
	l.Endpoint.Attach(d)
}

func (l *batchLink) WritePackets(pkts gstack.PacketBufferList) (int, tcpip.Error) {
	l.writes.Add(1)
	return l.Endpoint.WritePackets(pkts)
}

// endBatch ends a receive batch as link/afpacket does after a recvmmsg.
func (l *batchLink) endBatch(t testing.TB) {
	be, ok := l.up.(interface{ EndBatch() })
	if !ok {
		t.Fatalf("the link's dispatcher %T has no EndBatch", l.up)
	}
	be.EndBatch()
}

// TestLabelSwitchBatches delivers a batch of labelled frames on a link that
// ends its batches: the switch holds the frames it builds and writes them
// to the egress link in one call at the end of the batch. A link that never
// ends a batch gets each frame written at once (TestLabelSwitch).
func TestLabelSwitchBatches(t *testing.T) {
	in := &batchLink{Endpoint: channel.New(256, 1500, macIn)}
	out := &batchLink{Endpoint: channel.New(256, 1500, macOut)}
	n := startPlane(t, lsrV4, in, out)
	defer func() {
		in.Drain()
		out.Drain()
	}()
	n.neighbor(t, "out0", hop2, macNext)

	frame := labelled([]uint32{100}, 64, ipv4UDP(t, 64, 200))
	// The first batch: the endpoint learns that the link ends batches
	// only at its end, so these frames go out one by one.
	inject(in.Endpoint, frame)
	in.endBatch(t)
	if got := out.NumQueued(); got != 1 {
		t.Fatalf("first frame: %d on out0, want 1", got)
	}
	out.Drain()
	out.writes.Store(0)

	const batch = 20
	for range batch {
		inject(in.Endpoint, frame)
	}
	if got := out.NumQueued(); got != 0 {
		t.Errorf("%d frames written before the batch ended; want them held", got)
	}
	in.endBatch(t)
	if got, w := out.NumQueued(), out.writes.Load(); got != batch || w != 1 {
		t.Errorf("after the batch: %d frames in %d writes; want %d in 1", got, w, batch)
	}
	if st := n.sw.Stats(); st.Forwarded != batch+1 || st.Swapped != batch+1 {
		t.Errorf("forwarded %d swapped %d; want %d each", st.Forwarded, st.Swapped, batch+1)
	}

	// A batch larger than one sendmmsg is written in full chunks as it
	// fills; nothing stays held after its end.
	out.Drain()
	out.writes.Store(0)
	for range 150 {
		inject(in.Endpoint, frame)
	}
	in.endBatch(t)
	if got, w := out.NumQueued(), out.writes.Load(); got != 150 || w != 3 {
		t.Errorf("150 frames: %d on out0 in %d writes; want 150 in 3 (64+64+22)", got, w)
	}
}

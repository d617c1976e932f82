package lowerlink_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/link/lowerlink"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// link is a lower link with one receive goroutine that runs until
// closeFiles closes stop.
type link struct {
	lowerlink.Lifecycle
	stop           chan struct{}
	starts         atomic.Int32
	closes         atomic.Int32
	closedStarted  atomic.Bool
	receiverExited atomic.Bool
}

func newLink() *link {
	l := &link{stop: make(chan struct{})}
	l.Init(func() {
		l.starts.Add(1)
		l.Go(func() {
			<-l.stop
			l.receiverExited.Store(true)
		})
	}, func(started bool) {
		l.closes.Add(1)
		l.closedStarted.Store(started)
		close(l.stop)
	})
	return l
}

type dispatcher struct{ batches atomic.Int32 }

func (*dispatcher) DeliverNetworkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}
func (*dispatcher) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer)    {}

type batchDispatcher struct{ dispatcher }

func (d *batchDispatcher) EndBatch() { d.batches.Add(1) }

func TestLifecycleStartsOnceAndCloses(t *testing.T) {
	l := newLink()
	if l.IsAttached() {
		t.Fatal("attached before Attach")
	}
	l.Attach(nil)
	if l.starts.Load() != 0 {
		t.Fatal("a nil dispatcher started the receivers")
	}
	d := &dispatcher{}
	l.Attach(d)
	l.Attach(d)
	if got := l.starts.Load(); got != 1 {
		t.Fatalf("receivers started %d times, want 1", got)
	}
	if !l.IsAttached() || l.Dispatcher() != d {
		t.Fatal("dispatcher not kept")
	}
	onClose := 0
	l.SetOnCloseAction(func() {
		onClose++
		l.Close() // gVisor's action closes the endpoint again
	})
	done := make(chan struct{})
	go func() {
		l.Close()
		l.Close()
		l.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close or Wait did not return within 10 s")
	}
	if onClose != 1 || l.closes.Load() != 1 {
		t.Fatalf("on-close action ran %d times, closeFiles %d; want 1 and 1", onClose, l.closes.Load())
	}
	if !l.closedStarted.Load() || !l.receiverExited.Load() || !l.Closed() {
		t.Fatalf("closeFiles saw started=%v, receiver exited=%v, Closed=%v; want all true",
			l.closedStarted.Load(), l.receiverExited.Load(), l.Closed())
	}
}

func TestLifecycleClosedFirstNeverStarts(t *testing.T) {
	l := newLink()
	l.Close()
	l.Attach(&dispatcher{})
	if l.starts.Load() != 0 {
		t.Fatal("Attach after Close started the receivers")
	}
	if l.closedStarted.Load() {
		t.Fatal("closeFiles was told receivers had started")
	}
	l.Wait()
}

func TestEndBatchOnlyWhereWanted(t *testing.T) {
	lowerlink.EndBatch(&dispatcher{}) // no EndBatch method: nothing to call
	lowerlink.EndBatch(nil)
	b := &batchDispatcher{}
	lowerlink.EndBatch(b)
	if b.batches.Load() != 1 {
		t.Fatalf("EndBatch reached the dispatcher %d times, want 1", b.batches.Load())
	}
}

// TestSlicesAndCopyPacket builds a packet of three views (link header,
// network header, payload) and checks that Slices skips into it exactly
// and CopyPacket copies every byte once, in order.
func TestSlicesAndCopyPacket(t *testing.T) {
	payload := []byte("0123456789")
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{ReserveHeaderBytes: 20, Payload: buffer.MakeWithData(payload)})
	defer pkt.DecRef()
	copy(pkt.NetworkHeader().Push(4), "NNNN")
	copy(pkt.LinkHeader().Push(6), "LLLLLL")
	want := "LLLLLLNNNN0123456789"
	dst := make([]byte, pkt.Size())
	if n := lowerlink.CopyPacket(dst, pkt); n != len(want) || string(dst) != want {
		t.Fatalf("CopyPacket = %d %q, want %d %q", n, dst[:n], len(want), want)
	}
	for skip := 0; skip <= len(want); skip++ {
		var got []byte
		for b := range lowerlink.Slices(pkt, skip) {
			if len(b) == 0 {
				t.Fatalf("skip %d: an empty slice", skip)
			}
			got = append(got, b...)
		}
		if string(got) != want[skip:] {
			t.Fatalf("Slices(skip %d) = %q, want %q", skip, got, want[skip:])
		}
	}
}

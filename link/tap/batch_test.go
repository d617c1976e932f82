package tap_test

import (
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/mplsnode/mplsnode/link/tap"
)

// probeEtherType marks the test's frames (IEEE 802 local experimental), so
// frames the namespaces' kernels send (IPv6 router solicitations and the
// like) are told apart.
const probeEtherType = 0x88b5

// batchRecorder is a NetworkDispatcher with EndBatch that records the
// sequence number of every probe frame delivered and where the batches end.
type batchRecorder struct {
	mu        sync.Mutex
	seen      map[uint32]int // sequence number -> times delivered
	pending   int            // probe frames delivered since the last EndBatch
	endBatch  int            // EndBatch calls that ended a batch holding a probe frame
	maxBatch  int            // most probe frames in one batch
	emptyEnds int            // EndBatch calls with no frame at all since the last one
	sinceEnd  int            // any frames delivered since the last EndBatch
}

func (r *batchRecorder) DeliverNetworkPacket(_ tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	b := pkt.Data().AsRange().ToSlice()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sinceEnd++
	if len(b) < 18 || binary.BigEndian.Uint16(b[12:14]) != probeEtherType {
		return
	}
	r.seen[binary.BigEndian.Uint32(b[14:18])]++
	r.pending++
}

func (*batchRecorder) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

func (r *batchRecorder) EndBatch() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sinceEnd == 0 {
		r.emptyEnds++
	}
	r.sinceEnd = 0
	if r.pending > 0 {
		r.endBatch++
		r.maxBatch = max(r.maxBatch, r.pending)
	}
	r.pending = 0
}

// TestEveryFrameOnceAndBatchesEnd sends numbered frames from the far
// namespace's packet socket (the kernel, not our code, puts them on the
// wire: veth, bridge, TAP) in bursts, and checks that the endpoint delivers
// each exactly once, ends every batch with EndBatch (no probe frame left
// pending once the device is idle, no EndBatch without a frame before it)
// and reads more than one frame per batch under a burst. Planted bugs:
// rxLoop not calling endBatch when the device is drained (frames stay
// pending: fails); deliver run twice per read callback (every frame twice:
// fails); endBatch called after every delivered frame (the
// "more than one frame per batch" check fails). Each was planted and
// watched to fail: the first after its 20 s deadline (frames pending),
// the second with every frame seen twice, the third with 4000 batches of one.
func TestEveryFrameOnceAndBatchesEnd(t *testing.T) {
	tp := newTapTopo(t, tap.Options{})
	rec := &batchRecorder{seen: map[uint32]int{}}
	tp.ep.Attach(rec)

	const bursts, perBurst = 20, 200
	var sendErr error
	if err := tp.b.Run(func() error {
		ifi, err := net.InterfaceByName(tp.vb)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		sa := &unix.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6, Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
		frame := make([]byte, 200)
		copy(frame[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
		copy(frame[6:12], ifi.HardwareAddr)
		binary.BigEndian.PutUint16(frame[12:14], probeEtherType)
		seq := uint32(0)
		for range bursts {
			for range perBurst {
				binary.BigEndian.PutUint32(frame[14:18], seq)
				seq++
				if err := unix.Sendto(fd, frame, 0, sa); err != nil {
					sendErr = err
					return nil
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		return nil
	}); err != nil || sendErr != nil {
		t.Fatalf("sending probe frames: %v %v", err, sendErr)
	}

	const total = bursts * perBurst
	deadline := time.Now().Add(20 * time.Second)
	for {
		rec.mu.Lock()
		n, pending := len(rec.seen), rec.pending
		rec.mu.Unlock()
		if n == total && pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s: %d of %d probe frames delivered, %d pending without EndBatch; tap stats %+v", n, total, pending, tp.ep.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for seq, times := range rec.seen {
		if times != 1 || seq >= total {
			t.Errorf("probe frame %d delivered %d times, want once (and seq < %d)", seq, times, total)
		}
	}
	if rec.emptyEnds != 0 {
		t.Errorf("EndBatch called %d times with no frame delivered since the previous one", rec.emptyEnds)
	}
	if rec.maxBatch < 2 {
		t.Errorf("largest batch %d probe frames over %d batches, want > 1 under bursts of %d", rec.maxBatch, rec.endBatch, perBurst)
	}
	t.Logf("%d probe frames in %d batches (largest %d); tap stats %+v", total, rec.endBatch, rec.maxBatch, tp.ep.Stats())
}

package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
)

// TestLoopbackAddress gives node B a host address on lo (10.20.20.20/32,
// its router ID and the tail of an LSP) and checks that it is B's on every
// link: node A reaches it through label 100, which B pops to itself
// (`-f mpls route add 100 dev lo`), and the Linux kernel in a third
// namespace reaches it as plain IP on B's other link. Both transfers arrive
// whole (SHA-256) at B's listener on the loopback address.
func TestLoopbackAddress(t *testing.T) {
	netns.SkipUnlessRoot(t)
	nsA, nsB, nsK := netns.New(t, "la"), netns.New(t, "lb"), netns.New(t, "lk")
	va, vb := netns.VethPair(t, nsA, nsB)
	vb2, vk := netns.VethPair(t, nsB, nsK)
	nsK.MustExec("ip", "addr", "add", "172.16.31.1/24", "dev", vk)
	nsK.MustExec("ip", "route", "add", "10.20.20.20/32", "via", "172.16.31.2")

	a := startNode(t, nsA, "a.conf", fmt.Sprintf(`link add %[1]s type afpacket
addr add 172.16.30.1/24 dev %[1]s
route add 10.20.20.20/32 encap mpls 100 via inet 172.16.30.2
`, va))
	b := startNode(t, nsB, "b.conf", fmt.Sprintf(`link add %[1]s type afpacket
link add %[2]s type afpacket
addr add 172.16.30.2/24 dev %[1]s
addr add 172.16.31.2/24 dev %[2]s
addr add 10.20.20.20/32 dev lo
-f mpls route add 100 dev lo
`, vb, vb2))

	sums := stackSink(t, b, "10.20.20.20:5001", 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const size = 8 << 20

	// A -> B over the LSP: label 100 popped at B, delivered to lo's address.
	c, err := a.Stack().DialContext(ctx, "tcp", "10.20.20.20:5001")
	if err != nil {
		t.Fatalf("A dial 10.20.20.20 over label 100: %v", err)
	}
	want := send(t, c, size, nil)
	if got := recvSum(t, sums); got != want {
		t.Error("A -> B over label 100: SHA-256 differs")
	}
	if hits := b.Stats().Links[vb].ILMHits; hits < size/1500 {
		t.Errorf("B's ILM hits on %s: %d; want at least %d (the data came labelled)", vb, hits, size/1500)
	}

	// The kernel -> B as plain IP on B's other link.
	kc := kernelDial(t, nsK, "10.20.20.20:5001", 10*time.Second)
	want = send(t, kc, size, nil)
	if got := recvSum(t, sums); got != want {
		t.Error("kernel -> B over plain IP: SHA-256 differs")
	}
}

// recvSum waits for the listener's next SHA-256.
func recvSum(t *testing.T, sums <-chan [32]byte) [32]byte {
	t.Helper()
	select {
	case s := <-sums:
		return s
	case <-time.After(30 * time.Second):
		t.Fatal("no connection finished at B")
	}
	return [32]byte{}
}

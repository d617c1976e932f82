package node_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// TestSeedXDP is the seed topology with every node link on AF_XDP (link
// type xdp): 256 MiB from ns0 over label 100 through the LSR to the kernel
// in ns2, then 256 MiB back from the kernel to ns0 (plain IP, forwarded by
// the LSR), each SHA-256 checked. tshark in ns2 decodes the popped frames
// (IP TTL 63 after the uniform-model pop, no label left, IP and TCP
// checksums good). A capture beside an XDP link sees nothing it receives
// (XDP runs first) nor what AF_XDP sends (it bypasses the taps), so the
// labelled hop is judged by the LSR's counters (ILM hits on label 100).
// Planted bug: the XDP program redirecting only queue 1 (ctx->rx_queue_index
// + 1): every frame passes to the kernel, which holds no address: the dial
// fails.
func TestSeedXDP(t *testing.T) {
	s := newSeedOf(t, "xdp", "", nil)
	for _, c := range []struct{ ns, dev string }{{s.ns0.Name(), s.v01}, {s.ns1.Name(), s.v10}, {s.ns1.Name(), s.v12}} {
		ns := s.ns0
		if c.ns == s.ns1.Name() {
			ns = s.ns1
		}
		if out := ns.MustExec("ip", "link", "show", c.dev); !strings.Contains(out, "prog/xdp") {
			t.Errorf("ip link show %s: %q; want an XDP program", c.dev, out)
		}
	}
	addr, result := kernelSink(t, s.ns2, "10.10.10.10:0")
	popped := startCapture(t, s.ns2, s.v21, "tcp and dst host 10.10.10.10 and greater 1000", 20)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := s.n0.Stack().DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v; stats ns0 %+v ns1 %+v", addr, err, s.n0.Stats(), s.n1.Stats())
	}
	sum := send(t, c, transferSize, nil)
	r := <-result
	if r.err != nil || r.n != transferSize || r.sum != sum {
		t.Fatalf("ns0->ns2: got %d bytes, sha256 %x, err %v; want %d bytes, sha256 %x", r.n, r.sum, r.err, transferSize, sum)
	}
	el := time.Since(start)
	t.Logf("ns0->ns2: %d MiB in %v (%.0f Mbit/s)", transferSize>>20, el, float64(transferSize)*8/el.Seconds()/1e6)
	if hits := s.n1.Stats().Links[s.v10].ILMHits; hits < transferSize/1500 {
		t.Errorf("LSR ILM hits on %s: %d, want at least %d (every data segment labelled)", s.v10, hits, transferSize/1500)
	}
	for i, row := range popped.fields("ip.ttl", "mpls.label", "ip.checksum.status", "tcp.checksum.status") {
		if want := "63,,1,1"; strings.Join(row, ",") != want {
			t.Errorf("frame %d on %s: got ip.ttl,mpls.label,ip.checksum.status,tcp.checksum.status %v, want %s", i, s.v21, row, want)
		}
	}

	// Back: the kernel in ns2 sends to ns0's stack through the LSR.
	ln, err := s.n0.Stack().Listen("tcp", "172.16.20.20:5001")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sums := make(chan [32]byte, 1)
	go acceptSums(ln, sums)
	var kc net.Conn
	if err := s.ns2.Run(func() (err error) {
		kc, err = net.DialTimeout("tcp", "172.16.20.20:5001", 10*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	kc.SetDeadline(time.Now().Add(3 * time.Minute))
	want := send(t, kc, transferSize, nil)
	select {
	case got := <-sums:
		if got != want {
			t.Error("ns2->ns0: SHA-256 differs")
		}
	case <-ctx.Done():
		t.Fatalf("ns2->ns0: the transfer did not finish; ns1 %+v", s.n1.Stats())
	}
}

package node_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/internal/testkit/tshark"
	"github.com/mplsnode/mplsnode/node"
)

// checkLinkModes fails the test unless every link of n runs mode with
// queues sockets.
func checkLinkModes(t *testing.T, n *node.Node, mode string, queues int) {
	t.Helper()
	for _, l := range n.Report().Links {
		if l.LinkMode != mode || l.Queues != queues {
			t.Fatalf("link %s runs mode %q with %d queues, want %q with %d", l.Name, l.LinkMode, l.Queues, mode, queues)
		}
	}
}

// TestSeedRingBothWays carries the seed transfer (256 MiB) through the seed
// topology with every link of both nodes in ring mode, from our host to
// the kernel (labelled by ns0, popped by the LSR) and back from the kernel
// to our host (plain IP forwarded by the LSR), checking SHA-256 each way
// and letting tshark decode frames from each ring with checksum checks.
// Planted bug it caught: the frame ring ignoring the kernel's checksum
// flags (TP_STATUS_CSUMNOTREADY): the kernel's SYN-ACK, with its partial
// checksum, was dropped and the dial timed out.
func TestSeedRingBothWays(t *testing.T) {
	s := newSeedLinks(t, "mode ring", nil)
	checkLinkModes(t, s.n0, "ring", 1)
	checkLinkModes(t, s.n1, "ring", 1)

	// ns0 -> ns2: frames from ns0's transmit ring, labelled, on v10.
	labelled := startCapture(t, s.ns1, s.v10, "mpls and greater 1000", 20)
	addr, result := kernelSink(t, s.ns2, "10.10.10.10:0")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := s.n0.Stack().DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	_ = c.SetDeadline(time.Now().Add(3 * time.Minute))
	start := time.Now()
	sum := send(t, c, transferSize, nil)
	var r sinkResult
	select {
	case r = <-result:
	case <-ctx.Done():
		t.Fatalf("ns0->ns2: the sink got nothing within the deadline; LSR %+v", s.n1.Report().Links)
	}
	if r.err != nil || r.n != transferSize || r.sum != sum {
		t.Fatalf("ns0->ns2: got %d bytes, sha256 %x, err %v; want %d bytes, sha256 %x", r.n, r.sum, r.err, transferSize, sum)
	}
	t.Logf("ns0->ns2: %d MiB in %v", transferSize>>20, time.Since(start))
	for i, row := range labelled.fields("mpls.label", "mpls.bottom", "ip.checksum.status", "tcp.checksum.status") {
		if want := "100,1,1,1"; strings.Join(row, ",") != want {
			t.Errorf("frame %d on %s: got label,S,ip csum,tcp csum %v, want %s (1 = good)", i, s.v10, row, want)
		}
	}

	// ns2 -> ns0: the kernel sends, the LSR forwards plain IP from its
	// receive ring on v12 to its transmit ring on v10.
	back := startCapture(t, s.ns1, s.v10, "tcp and src host 172.16.21.22 and greater 1000", 20)
	ln, err := s.n0.Stack().Listen("tcp", "172.16.20.20:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := sumAccepted(ln, time.Now().Add(3*time.Minute))
	kc := kernelDial(t, s.ns2, ln.Addr().String(), 10*time.Second)
	_ = kc.SetDeadline(time.Now().Add(3 * time.Minute))
	start = time.Now()
	sum = send(t, kc, transferSize, nil)
	var br sinkResult
	select {
	case br = <-got:
	case <-time.After(3 * time.Minute):
		t.Fatalf("ns2->ns0: nothing within the deadline; ns0 %+v", s.n0.Report().Links)
	}
	if br.err != nil || br.n != transferSize || br.sum != sum {
		t.Fatalf("ns2->ns0: got %d bytes, sha256 %x, err %v; want %d bytes, sha256 %x", br.n, br.sum, br.err, transferSize, sum)
	}
	t.Logf("ns2->ns0: %d MiB in %v", transferSize>>20, time.Since(start))
	for i, row := range back.fields("ip.ttl", "ip.checksum.status", "tcp.checksum.status", "ip.len") {
		// Forwarded once by the LSR: TTL 64 - 1. A frame longer than the
		// link MTU is a GSO frame the forwarding plane coalesced (forward/
		// gro.go): it leaves behind a virtio-net header with the TCP
		// checksum partial, for the receiver's kernel to finish, so only
		// the IP header checksum is checked on it.
		want := "63,1,1"
		if n, _ := strconv.Atoi(row[3]); n > 1500 {
			row[2] = "partial"
			want = "63,1,partial"
		}
		if got := strings.Join(row[:3], ","); got != want {
			t.Errorf("frame %d on %s: got ttl,ip csum,tcp csum %v (ip.len %s), want %s", i, s.v10, row[:3], row[3], want)
		}
	}
	for _, n := range []*node.Node{s.n0, s.n1} {
		for _, l := range n.Report().Links {
			if l.RXBlocks == 0 {
				t.Errorf("link %s read no receive batch from its ring", l.Name)
			}
			for _, k := range node.LowerDropReasons {
				if k != "lower_rx_overflow" && l.Drops[k] != 0 {
					t.Errorf("link %s: %s = %d", l.Name, k, l.Drops[k])
				}
			}
			t.Logf("%s: mode %s rx %d tx %d batches %d ring full %d drops %v", l.Name, l.LinkMode, l.RXFrames, l.TXFrames, l.RXBlocks, l.TXRingFull, nonZero(l.Drops))
		}
	}
}

// TestFanoutKeepsFlowsInOrder has the kernel (ns2) send four TCP flows to
// our host (ns0) through the LSR, whose links each have two fanout queues
// (ring mode), and compares the order of every flow's segments as they
// reach the LSR and as they leave it (tshark captures in ns1): the LSR
// must not reorder, since the fanout group's flow hash (afpacket.FlowHash)
// keeps a flow on one queue and each queue's goroutine forwards in order. A reorder is a segment whose
// sequence number is below its predecessor's; the LSR may pass on those
// of its input (retransmissions), never add any. (The kernel's own PACKET_FANOUT_HASH, which the group used first, let one
// reorder through under load: a local TCP sender's skb->hash changes after a
// timeout and moved the flow to the other queue mid-stream.) Planted bug:
// PACKET_FANOUT_LB (round robin): hundreds of reorders added.
func TestFanoutKeepsFlowsInOrder(t *testing.T) {
	words := "queues 2 mode ring"
	if w := os.Getenv("FANOUTLINK"); w != "" {
		words = w
	}
	s := newSeedLinks(t, words, nil)
	const flows, size = 4, 16 << 20
	lsrIn := startCaptureSnap(t, s.ns1, s.v12, "tcp and src host 172.16.21.22 and greater 200", 96)
	lsrOut := startCaptureSnap(t, s.ns1, s.v10, "tcp and src host 172.16.21.22 and greater 200", 96)

	ln, err := s.n0.Stack().Listen("tcp", "172.16.20.20:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 2*flows)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < flows; i++ {
			c, err := ln.Accept()
			if err != nil {
				errs <- err
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
				if n, err := io.Copy(io.Discard, c); err != nil || n != size {
					errs <- fmt.Errorf("sink got %d bytes, err %v; want %d", n, err, size)
				}
			}()
		}
	}()
	for i := 0; i < flows; i++ {
		c := kernelDial(t, s.ns2, ln.Addr().String(), 10*time.Second)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
			buf := make([]byte, 64<<10)
			for sent := 0; sent < size; sent += len(buf) {
				if _, err := c.Write(buf); err != nil {
					errs <- fmt.Errorf("write after %d bytes: %v", sent, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	in := reorders(lsrIn.stop(t, "tcp.srcport", "tcp.seq"))
	out := reorders(lsrOut.stop(t, "tcp.srcport", "tcp.seq"))
	if len(out) != flows {
		t.Errorf("tshark saw %d flows leave the LSR, want %d", len(out), flows)
	}
	for port, n := range out {
		if n > in[port] {
			t.Errorf("flow from port %s: %d reorders leaving the LSR, %d arriving: the LSR reordered", port, n, in[port])
		}
	}
	var batches []string
	for _, l := range s.n1.Report().Links {
		batches = append(batches, fmt.Sprintf("%s %s/%d batches %d", l.Name, l.LinkMode, l.Queues, l.RXBlocks))
	}
	t.Logf("reorders per flow: in %v, out %v; LSR %v", in, out, batches)
}

// reorders counts, per source port, the segments whose sequence number is
// below that of the flow's previous segment.
func reorders(rows [][]string) map[string]int {
	last := map[string]uint64{}
	n := map[string]int{}
	for _, r := range rows {
		seq, err := strconv.ParseUint(r[1], 10, 32)
		if err != nil {
			continue
		}
		if prev, ok := last[r[0]]; ok && seq < prev {
			n[r[0]]++
		} else if !ok {
			n[r[0]] += 0
		}
		last[r[0]] = seq
	}
	return n
}

// openCapture is a tshark capture that runs until stop.
type openCapture struct {
	*capture
}

// startCaptureSnap starts tshark in ns on dev with a capture filter, keeping
// snap bytes of each frame, until stop.
func startCaptureSnap(t *testing.T, ns *netns.NS, dev, filter string, snap int) *openCapture {
	t.Helper()
	return &openCapture{startTshark(t, ns, dev, "-s", strconv.Itoa(snap), "-B", "64", "-f", filter)}
}

// stop ends the capture and returns the given fields of each frame.
func (c *openCapture) stop(t *testing.T, fields ...string) [][]string {
	t.Helper()
	// Let dumpcap catch up: on a loaded machine it lags behind the traffic,
	// and what it has not read when SIGINT comes is lost. It flushes the
	// file as it reads, so wait (at most 60 s) for the file to stop growing
	// for a second.
	var last int64 = -1
	stable := time.Now()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		fi, err := os.Stat(c.file)
		if err != nil {
			continue
		}
		if fi.Size() != last {
			last, stable = fi.Size(), time.Now()
		} else if time.Since(stable) >= time.Second {
			break
		}
	}
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		<-done
		t.Fatalf("tshark did not stop: %s", c.out.String())
	}
	return tshark.Fields(t, c.file, fields...)
}

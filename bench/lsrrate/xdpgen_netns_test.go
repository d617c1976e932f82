package lsrrate

import (
	"errors"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// kernelPath builds the topology with the kernel forwarder, the XDP
// generator and the XDP sink (label 0: IPv4 UDP to dstIP); everything is
// removed at the end of the test.
func kernelPath(t *testing.T) (*topology, *xdpGenerator, *xdpSink) {
	t.Helper()
	skipUnlessRoot(t)
	if _, err := exec.LookPath("ethtool"); err != nil {
		t.Skip("needs ethtool in PATH")
	}
	topo := testTopology(t)
	if _, err := startKernel(topo); err != nil {
		t.Fatal(err)
	}
	if out, err := topo.lsr.exec("ethtool", "-K", topo.lsrIn, "gro", "on"); err != nil {
		t.Fatalf("ethtool: %v: %s", err, out)
	}
	g, err := openXDPGenerator(topo.gen.path(), topo.genDev)
	if err != nil {
		if errors.Is(err, errLiveFramesRefused) {
			t.Skipf("the kernel does not run the XDP generator: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { g.close() })
	sock, err := openCounter(topo.sink.path(), topo.sinkDev, ipv4UDPFilter(dstIP))
	if err != nil {
		t.Fatal(err)
	}
	s, err := openXDPSink(topo.sink.path(), topo.sinkDev, 0, dstIP, sock)
	if err != nil {
		sock.close()
		t.Fatal(err)
	}
	t.Cleanup(func() { s.close() })
	return topo, g, s
}

// testTopology builds the topology for tb and removes it when tb ends.
func testTopology(tb testing.TB) *topology {
	tb.Helper()
	topo, err := newTopology()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := topo.close(); err != nil {
			tb.Error(err)
		}
	})
	return topo
}

// warmUpSink sends the first frame of spec, which resolves the kernel's
// neighbour, and waits until the sink has counted it.
func warmUpSink(t *testing.T, g *xdpGenerator, s *xdpSink, spec frameSpec) {
	t.Helper()
	if err := g.setFrames(spec); err != nil {
		t.Fatal(err)
	}
	if err := g.send(1); err != nil {
		t.Fatal(err)
	}
	if got := waitCount(t, s, 1); got != 1 {
		t.Fatalf("%d B: warm-up: sink counted %d frames, want 1", spec.size, got)
	}
}

// waitCount takes from s until it has counted want frames or the deadline
// passes, then once more after a pause (so that extra frames would be
// seen), and returns the total.
func waitCount(t *testing.T, s *xdpSink, want uint64) uint64 {
	t.Helper()
	var got uint64
	deadline := time.Now().Add(20 * time.Second)
	for got < want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		n, err := s.take()
		if err != nil {
			t.Fatal(err)
		}
		got += n
	}
	time.Sleep(200 * time.Millisecond)
	n, err := s.take()
	if err != nil {
		t.Fatal(err)
	}
	return got + n
}

// TestXDPGeneratorExactCount sends N frames with the XDP generator through
// the kernel forwarder and checks that the XDP sink counts exactly N (the
// generator counts with its program's per-CPU counter, the sink with its
// own program), and that the frames carry many UDP source ports with a
// good UDP checksum (tshark decodes the samples). Planted bugs that fail
// it: a generator sending one repetition more per call (sink counts 2 at
// the warm-up), a sink counting every frame (it eats the ARP the kernel
// forwarder needs), a program that leaves the port alone (1 source port),
// one that skips the checksum update (tshark: bad checksum in the 64-byte
// samples).
func TestXDPGeneratorExactCount(t *testing.T) {
	topo, g, s := kernelPath(t)
	for _, size := range []int{64, 1500} {
		spec := testSpec(0, size)
		spec.srcPort = srcPort
		warmUpSink(t, g, s, spec)
		if err := s.drain(); err != nil {
			t.Fatal(err)
		}
		if err := s.arm(numSamples * 4); err != nil {
			t.Fatal(err)
		}
		dev0, err := topo.deviceStats()
		if err != nil {
			t.Fatal(err)
		}
		const n = 20000
		if err := g.send(n); err != nil {
			t.Fatal(err)
		}
		got := waitCount(t, s, n)
		dev1, err := topo.deviceStats()
		if err != nil {
			t.Fatal(err)
		}
		if refused := dev1.gen.txDropped - dev0.gen.txDropped; refused != 0 {
			t.Logf("%d B: the veth refused %d frames", size, refused)
			if got+refused != n {
				t.Errorf("%d B: sink counted %d + veth refused %d, want %d sent", size, got, refused, n)
			}
		} else if got != n {
			t.Errorf("%d B: sink counted %d frames, want exactly %d sent", size, got, n)
		}
		samples, err := s.samples(numSamples * 4)
		if err != nil {
			t.Fatal(err)
		}
		if len(samples) < numSamples {
			t.Fatalf("%d B: %d samples, want at least %d", size, len(samples), numSamples)
		}
		rows := tsharkRows(t, samples, "udp.srcport", "udp.dstport", "ip.ttl", "ip.dst", "udp.checksum.status")
		ports := map[string]bool{}
		for _, r := range rows {
			f := strings.Split(r, "\t")
			// Samples are cut to sampleLen bytes: tshark verifies the
			// UDP checksum of the short frames only (2: unverified).
			wantCheck := "1"
			if size > sampleLen {
				wantCheck = "2"
			}
			if len(f) != 5 || f[1] != "9" || f[2] != "63" || f[3] != dstIP.String() || f[4] != wantCheck {
				t.Errorf("%d B: sample %q, want udp.dstport 9, ip.ttl 63, ip.dst %s, udp.checksum.status 1 (good)", size, r, dstIP)
				continue
			}
			ports[f[0]] = true
		}
		if len(ports) < numSamples/2 {
			t.Errorf("%d B: samples carry %d UDP source ports (%v), want many flows", size, len(ports), ports)
		}
	}
}

// TestXDPGeneratorPaced runs the XDP generator at 2000 frames/s for half a
// second and checks that it sent no more than the pace allows (the
// program's PACE_SLACK of catch-up included) and that the sink counted
// what it sent. Only the upper bound is asserted: a loaded machine makes
// the generator slower, never faster. Planting a program that ignores
// gen_pace sends hundreds of thousands of frames and fails it.
func TestXDPGeneratorPaced(t *testing.T) {
	_, g, s := kernelPath(t)
	spec := testSpec(0, 64)
	spec.srcPort = srcPort
	warmUpSink(t, g, s, spec)
	const rate = 2000
	var stop atomic.Bool
	st, err := g.run(500*time.Millisecond, rate, &stop)
	if err != nil {
		t.Fatal(err)
	}
	allowed := uint64(rate*st.elapsed.Seconds()) + 64 + 1
	t.Logf("sent %d in %v (at most %d allowed)", st.sent, st.elapsed, allowed)
	if st.sent == 0 || st.sent > allowed {
		t.Errorf("paced at %d/s: sent %d frames in %v, want 1..%d", rate, st.sent, st.elapsed, allowed)
	}
	if got := waitCount(t, s, st.sent); got != st.sent {
		t.Errorf("sink counted %d frames, want the %d sent", got, st.sent)
	}
}

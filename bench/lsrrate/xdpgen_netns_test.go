package lsrrate

import (
	"errors"
	"os/exec"
	"strings"
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
	topo, err := newTopology()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := topo.close(); err != nil {
			t.Error(err)
		}
	})
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
// generator's count comes from its program's per-CPU counter, the sink's
// from its own program: an off-by-a-slice generator, planted by sending
// min(n, xdpSlice) + 1 per call, or a sink counting the ARP traffic too,
// planted by dropping the want_dst test, fails it), and that the frames
// carry many UDP source ports with good checksums (tshark decodes the
// samples; planting a generator that leaves the port alone fails it, and
// one that skips the checksum update fails udp.checksum.status).
func TestXDPGeneratorExactCount(t *testing.T) {
	topo, g, s := kernelPath(t)
	for _, size := range []int{64, 1500} {
		spec := testSpec(0, size)
		spec.srcPort = srcPort
		if err := g.setFrames(spec); err != nil {
			t.Fatal(err)
		}
		// The first frame resolves the kernel's neighbour; it is counted
		// once it arrives.
		if err := g.send(1); err != nil {
			t.Fatal(err)
		}
		if got := waitCount(t, s, 1); got != 1 {
			t.Fatalf("%d B: warm-up: sink counted %d frames, want 1", size, got)
		}
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
		rows := tsharkRows(t, samples, "udp.srcport", "udp.dstport", "ip.ttl", "ip.dst")
		ports := map[string]bool{}
		for _, r := range rows {
			f := strings.Split(r, "\t")
			if len(f) != 4 || f[1] != "9" || f[2] != "63" || f[3] != dstIP.String() {
				t.Errorf("%d B: sample %q, want udp.dstport 9, ip.ttl 63, ip.dst %s", size, r, dstIP)
				continue
			}
			ports[f[0]] = true
		}
		if len(ports) < numSamples/2 {
			t.Errorf("%d B: samples carry %d UDP source ports (%v), want many flows", size, len(ports), ports)
		}
	}
}

package node_test

import (
	"context"
	"net"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/link/mplsendpoint"
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
	sums := stackSink(t, s.n0, "172.16.20.20:5001", 1)
	kc := kernelDial(t, s.ns2, "172.16.20.20:5001", 10*time.Second)
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

// TestSeedXDPPartialFormForwarded sends, with python3-scapy from the
// kernel's namespace ns2, a TCP SYN to ns0's stack whose checksum field
// holds the pseudo-header sum (what Linux leaves in a CHECKSUM_PARTIAL
// packet) while its payload makes it wrong, then a good SYN, both through
// the LSR's AF_XDP links (link/xdp/testdata/partial_form.py). The LSR
// forwards the crafted one with its checksum as it came (wrong), so ns0
// counts it as bad_checksum and never answers it; the good SYN draws a
// SYN-ACK back into ns2. Planted bug: link/xdp flagging frames of the
// partial form RXChecksumValidated (its old rule): the LSR finishes the
// "partial" checksum, ns0 takes the crafted SYN and answers it.
func TestSeedXDPPartialFormForwarded(t *testing.T) {
	if err := exec.Command(scapyPython, "-c", "import scapy.all").Run(); err != nil {
		t.Skipf("needs python3-scapy (Debian package; scripts/deps.sh installs it) to craft frames: %v", err)
	}
	s := newSeedOf(t, "xdp", "", nil)
	ln, err := s.n0.Stack().Listen("tcp", "172.16.20.20:5021")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var lsrMAC net.HardwareAddr
	if err := s.ns1.Run(func() error {
		ifc, err := net.InterfaceByName(s.v12)
		if err == nil {
			lsrMAC = ifc.HardwareAddr
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", s.ns2.Name(), scapyPython, "../link/xdp/testdata/partial_form.py",
		"--iface", s.v21, "--dst-mac", lsrMAC.String(), "--src", "172.16.21.22", "--dst", "172.16.20.20", "--dport", "5021",
		"--sniff", "--timeout", "60").CombinedOutput()
	if err != nil {
		t.Fatalf("partial_form.py: %v: %s", err, out)
	}
	var synacks []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "synack" {
			synacks = append(synacks, f[1])
		}
	}
	bad := s.n0.Stats().Links[s.v01].Drops[mplsendpoint.DropBadChecksum]
	if !slices.Contains(synacks, "40002") {
		t.Fatalf("no SYN-ACK to the good SYN: script said %s; ns0 %+v ns1 %+v", out, s.n0.Stats(), s.n1.Stats())
	}
	if slices.Contains(synacks, "40001") {
		t.Errorf("ns0 answered the crafted SYN (its wrong checksum in the partial form was fixed on the way): SYN-ACKs to %v", synacks)
	}
	if bad != 1 {
		t.Errorf("ns0 bad_checksum drops on %s = %d, want 1 (the crafted SYN, forwarded by the LSR with its checksum unchanged)", s.v01, bad)
	}
}

package node_test

import (
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/pcaptest"
	"github.com/mplsnode/mplsnode/internal/testkit/tshark"
	"github.com/mplsnode/mplsnode/link/pcap"
	"github.com/mplsnode/mplsnode/node"
)

// TestSeedPcap captures the LSR's ingress link (virt10 in the seed) while
// 8 MiB cross it, then has tshark read the file: every frame the link's
// counters saw is there, the labelled ones carry label 100 with S=1 and
// TTL 64 from ns0, and the plain ones are the return path to ns0. Frames
// of the other link (virt12) are not in it. The LSR, a forwarding node
// with no `set forward` line, runs the XDP program (its default, auto:
// ns2's end of virt12 runs NAPI) on virt12 alone: the recorded link runs
// without it, so no frame it forwards escapes the capture.
func TestSeedPcap(t *testing.T) {
	file, w := pcaptest.File(t, "ns1.pcap", pcap.Options{})
	s := newSeedWith(t, func(s *seed) (node.Options, node.Options) {
		// ns2's end runs NAPI, so virt12 takes redirected frames and the
		// default runs the program there.
		s.ns2.MustExec("ethtool", "-K", s.v21, "gro", "on")
		return node.Options{}, node.Options{Capture: w, CaptureLinks: []string{s.v10}}
	})
	if x := s.n1.Report().XDP; x == nil || len(x.Links) != 1 || x.Links[0] != s.v12 || x.Skipped[s.v10] == "" {
		t.Fatalf("XDP plane %+v: want the default (auto) on %s alone, %s skipped for --pcap", x, s.v12, s.v10)
	}
	addr, result := kernelSink(t, s.ns2, "10.10.10.10:0")
	c := dialFrom(t, s.n0, addr, time.Minute)
	const size = 8 << 20
	sum := send(t, c, size, nil)
	if r := <-result; r.err != nil || r.n != size || r.sum != sum {
		t.Fatalf("transfer: %d bytes, err %v, sha256 equal %v", r.n, r.err, r.sum == sum)
	}
	// Closing the node stops the link; the Writer then holds every frame.
	if err := s.n1.Close(); err != nil {
		t.Fatal(err)
	}
	st := s.n1.Stats().Links[s.v10]
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	rows := tshark.Fields(t, file, "eth.type", "mpls.label", "mpls.bottom", "mpls.ttl", "ip.dst", "arp.opcode")
	var labelled, toNS0, arp, ipv6 int
	for i, r := range rows {
		switch {
		case r[0] == "0x8847":
			labelled++
			if r[1] != "100" || r[2] != "1" || r[3] != "64" {
				t.Errorf("frame %d: label,S,TTL %s,%s,%s; want 100,1,64", i+1, r[1], r[2], r[3])
			}
		case r[0] == "0x0800" && r[4] == "172.16.20.20":
			toNS0++
		case r[0] == "0x0806":
			arp++
		case r[0] == "0x86dd":
			// The kernel in ns0 still runs IPv6 on its veth (link-local
			// router solicitations, MLD reports): received, recorded.
			ipv6++
		default:
			t.Errorf("frame %d: %v is not a frame of %s", i+1, r, s.v10)
		}
	}
	if got, want := uint64(len(rows)), st.RXFrames+st.TXFrames; got != want || got != w.Frames() {
		t.Errorf("pcap holds %d frames (writer counted %d); the link counted %d rx + %d tx = %d", got, w.Frames(), st.RXFrames, st.TXFrames, want)
	}
	if uint64(labelled) != st.ILMHits || labelled < size/1500 {
		t.Errorf("%d labelled frames in the pcap, %d ILM hits on %s; want equal and at least %d", labelled, st.ILMHits, s.v10, size/1500)
	}
	if toNS0 == 0 {
		t.Error("no return-path frame to 172.16.20.20 in the pcap")
	}
	t.Logf("pcap of %s: %d frames: %d labelled, %d IPv4 to ns0, %d ARP, %d IPv6", s.v10, len(rows), labelled, toNS0, arp, ipv6)
}

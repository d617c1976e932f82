package mplsendpoint_test

import (
	"bytes"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/internal/testkit/arpmsg"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/mplstest"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
)

var writeSeeds = flag.Bool("write-seeds", false, "rewrite testdata/fuzz/FuzzIngress from ingressSeeds")

// ILM labels of the fuzz endpoint, one per action.
const (
	fuzzLabelLocal    = 100 // ILMPopLocal, payload by version nibble
	fuzzLabelSwap     = 200 // ILMSwap to 201
	fuzzLabelPopFwd   = 300 // ILMPopForward
	fuzzLabelContinue = 400 // ILMPopContinue
	fuzzLabelLocalV6  = 500 // ILMPopLocal bound to IPv6
)

// ingressSeeds are real frames for FuzzIngress, named as their corpus files.
func ingressSeeds() map[string][]byte {
	syn := mplstest.TCP{
		Src: netip.AddrPortFrom(addrB4, 40000), Dst: netip.AddrPortFrom(addrA4, 80),
		Seq: 1000, Flags: header.TCPFlagSyn, DF: true, ID: 1,
		Options: []byte{2, 4, 0x05, 0xa8}, // MSS 1448
	}
	data := mplstest.TCP{
		Src: netip.AddrPortFrom(addrB6, 40000), Dst: netip.AddrPortFrom(addrA6, 80),
		Seq: 1001, Ack: 1, Flags: header.TCPFlagAck | header.TCPFlagPsh, Payload: bytes.Repeat([]byte("x"), 100),
	}
	v4data := data
	v4data.Src, v4data.Dst = syn.Src, syn.Dst
	arpReq := arpmsg.Request(macB, addrB4, addrA4)
	bcast := tcpip.LinkAddress(header.EthernetBroadcastAddress)
	udp4 := mplstest.IPv4UDP(netip.AddrPortFrom(addrB4, 1000), netip.AddrPortFrom(addrA4, 2000), false, []byte("hello"))
	lab := func(payload []byte, es ...mpls.Entry) []byte {
		return mplstest.Frame{Dst: macA, Src: macB, Labels: es, Payload: payload}.Bytes()
	}
	var deep []mpls.Entry
	for range mpls.DefaultMaxDepth + 1 {
		deep = append(deep, mpls.Entry{Label: fuzzLabelLocal, TTL: 64})
	}
	labelledSYN := lab(mplstest.IPv4TCP(syn), mplstest.Stack(64, fuzzLabelLocal)...)
	return map[string][]byte{
		"labelled-syn":             labelledSYN,
		"labelled-data-v6-null":    lab(mplstest.IPv6TCP(data), mplstest.Stack(64, fuzzLabelLocal, mpls.LabelIPv6ExplicitNull)...),
		"labelled-data-v6-bound":   lab(mplstest.IPv6TCP(data), mplstest.Stack(64, fuzzLabelLocalV6)...),
		"labelled-data-v4-cont":    lab(mplstest.IPv4TCP(v4data), mplstest.Stack(64, fuzzLabelContinue, fuzzLabelLocal)...),
		"swap":                     lab(mplstest.IPv4TCP(v4data), mplstest.Stack(64, fuzzLabelSwap)...),
		"pop-forward":              lab(udp4, mplstest.Stack(64, fuzzLabelPopFwd)...),
		"null-over-swap":           lab(udp4, mplstest.Stack(64, mpls.LabelIPv4ExplicitNull, fuzzLabelSwap)...),
		"arp-request":              mplstest.Frame{Dst: bcast, Src: macB, EtherType: uint16(header.ARPProtocolNumber), Payload: arpReq}.Bytes(),
		"ipv6-plain":               mplstest.Frame{Dst: macA, Src: macB, Payload: mplstest.IPv6TCP(data)}.Bytes(),
		"ipv4-udp-plain":           mplstest.Frame{Dst: macA, Src: macB, Payload: udp4}.Bytes(),
		"truncated-stack":          labelledSYN[:header.EthernetMinimumSize+2],
		"no-bos":                   lab(nil, mpls.Entry{Label: fuzzLabelLocal, TTL: 64}, mpls.Entry{Label: fuzzLabelSwap, TTL: 64}),
		"too-deep":                 lab(udp4, deep...),
		"ttl-zero":                 lab(udp4, mplstest.Stack(0, fuzzLabelLocal)...),
		"reserved-label":           lab(udp4, mplstest.Stack(64, mpls.LabelRouterAlert)...),
		"no-ilm-entry":             lab(udp4, mplstest.Stack(64, 999)...),
		"unknown-payload":          lab(make([]byte, 40), mplstest.Stack(64, fuzzLabelLocal)...),
		"mpls-multicast":           mplstest.Frame{Dst: macA, Src: macB, EtherType: 0x8848, Labels: mplstest.Stack(64, fuzzLabelLocal), Payload: udp4}.Bytes(),
		"other-mac":                mplstest.Frame{Dst: tcpip.LinkAddress("\x02\x00\x00\x00\x00\x99"), Src: macB, Payload: udp4}.Bytes(),
		"runt":                     labelledSYN[:10],
		"ipv4-truncated-in-labels": lab(mplstest.IPv4TCP(syn)[:30], mplstest.Stack(64, fuzzLabelLocal)...),
	}
}

// fuzzEndpoint is an mplsendpoint attached to a real gVisor stack (IPv4,
// IPv6, ARP, TCP, UDP, ICMP) over a Sink, with an ILM holding one entry per
// action and a recording Forwarder.
type fuzzEndpoint struct {
	lower *mplstest.Sink
	ep    *mplsendpoint.Endpoint
	fwd   *mplstest.Forwarder
}

func newFuzzEndpoint(tb testing.TB) *fuzzEndpoint {
	tb.Helper()
	ilm, err := mpls.NewILM([]mpls.ILMEntry{
		{Label: fuzzLabelLocal, Action: mpls.ILMPopLocal},
		{Label: fuzzLabelLocalV6, Action: mpls.ILMPopLocal, Payload: mpls.PayloadIPv6},
		{Label: fuzzLabelContinue, Action: mpls.ILMPopContinue},
		{Label: fuzzLabelSwap, Action: mpls.ILMSwap, OutLabels: []mpls.Label{201}, NextHop: addrB4},
		{Label: fuzzLabelPopFwd, Action: mpls.ILMPopForward, NextHop: addrB4},
	})
	if err != nil {
		tb.Fatal(err)
	}
	tables := &mpls.Tables{}
	tables.SetILM(ilm)
	f := &fuzzEndpoint{lower: mplstest.NewSink(1500, macA), fwd: &mplstest.Forwarder{}}
	f.ep, err = mplsendpoint.New(f.lower, mplsendpoint.Options{Tables: tables, Forwarder: f.fwd, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	st, connected := newHostStack(tb, f.ep, addrA4, addrA6, tcp.NewProtocol, udp.NewProtocol, icmp.NewProtocol4, icmp.NewProtocol6)
	st.SetRouteTable(connected)
	return f
}

// ingressOutcomes sums the counters one received frame must move by
// exactly one: delivered, forwarded, held (a fragment waiting for its
// datagram: the gauge RXFragmentsHeld, which falls by the held fragments
// delivered or dropped with the datagram's last), or one receive-side
// drop reason.
func ingressOutcomes(s mplsendpoint.Stats) uint64 {
	n := s.RXDelivered + s.RXForwarded + s.RXFragmentsHeld
	for _, r := range mplsendpoint.DropReasons() {
		if !egressDrop(r) {
			n += s.Drop(r)
		}
	}
	return n
}

// egressDrop reports whether r is counted on the transmit path only.
func egressDrop(r mplsendpoint.DropReason) bool {
	switch r {
	case mplsendpoint.DropMTUExceeded, mplsendpoint.DropGSOUnsupported, mplsendpoint.DropLowerWriteError:
		return true
	}
	return false
}

// receive injects frame through the lower link and checks that exactly one
// outcome counter moved and that a forwarded frame reached the Forwarder
// intact.
func (f *fuzzEndpoint) receive(t *testing.T, frame []byte) {
	before := f.ep.Stats()
	calls := f.fwd.Len()
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
	f.lower.InjectInbound(0, pkt)
	pkt.DecRef()
	after := f.ep.Stats()
	if got := after.RXFrames - before.RXFrames; got != 1 {
		t.Errorf("got RXFrames moved by %d, want 1", got)
	}
	if got := ingressOutcomes(after) - ingressOutcomes(before); got != 1 {
		t.Errorf("got delivered+forwarded+drops moved by %d for %x, want 1 (before %+v, after %+v)", got, frame, before, after)
	}
	fwd := after.RXForwarded - before.RXForwarded
	if got := uint64(f.fwd.Len() - calls); got != fwd {
		t.Errorf("got %d Forward calls, want %d (RXForwarded delta)", got, fwd)
	}
	if fwd == 1 {
		c := f.fwd.Calls()[calls]
		if !bytes.Equal(c.Frame, frame) {
			t.Errorf("got forwarded frame %x, want %x", c.Frame, frame)
		}
		if c.Entry.Action != mpls.ILMSwap && c.Entry.Action != mpls.ILMPopForward {
			t.Errorf("got Forward with ILM action %v, want swap or pop-forward", c.Entry.Action)
		}
	}
	if f.fwd.Len() > 1024 {
		f.fwd.Reset() // bound memory over a long fuzz run
	}
}

// FuzzIngress feeds whole Ethernet frames to the endpoint's receive path:
// it must never panic or leak a PacketBuffer (TestMain's leak check), and
// every frame must be delivered, forwarded or counted in exactly one drop
// counter.
func FuzzIngress(f *testing.F) {
	for _, b := range ingressSeeds() {
		f.Add(b)
	}
	fe := newFuzzEndpoint(f)
	f.Fuzz(func(t *testing.T, frame []byte) {
		fe.receive(t, frame)
	})
}

// TestIngressSeedOutcomes checks that each seed frame has the outcome it was
// written for, so the corpus covers every branch it claims to.
func TestIngressSeedOutcomes(t *testing.T) {
	want := map[string]string{
		"labelled-syn":             "delivered",
		"labelled-data-v6-null":    "delivered",
		"labelled-data-v6-bound":   "delivered",
		"labelled-data-v4-cont":    "delivered",
		"swap":                     "forwarded",
		"pop-forward":              "forwarded",
		"null-over-swap":           "forwarded",
		"arp-request":              "delivered",
		"ipv6-plain":               "delivered",
		"ipv4-udp-plain":           "delivered",
		"truncated-stack":          "truncated_label_stack",
		"no-bos":                   "no_bottom_of_stack",
		"too-deep":                 "label_stack_too_deep",
		"ttl-zero":                 "ttl_expired",
		"reserved-label":           "reserved_label",
		"no-ilm-entry":             "no_ilm_entry",
		"unknown-payload":          "unknown_payload",
		"mpls-multicast":           "unsupported_ethertype",
		"other-mac":                "not_for_us",
		"runt":                     "truncated_frame",
		"ipv4-truncated-in-labels": "bad_checksum", // total length beyond the frame: checksums cannot be verified
	}
	fe := newFuzzEndpoint(t)
	seeds := ingressSeeds()
	if len(seeds) != len(want) {
		t.Fatalf("got %d seeds, want %d with an expected outcome", len(seeds), len(want))
	}
	for name, frame := range seeds {
		t.Run(name, func(t *testing.T) {
			before := fe.ep.Stats()
			fe.receive(t, frame)
			after := fe.ep.Stats()
			got := "none"
			switch {
			case after.RXDelivered > before.RXDelivered:
				got = "delivered"
			case after.RXForwarded > before.RXForwarded:
				got = "forwarded"
			default:
				for _, r := range mplsendpoint.DropReasons() {
					if after.Drop(r) > before.Drop(r) {
						got = r.String()
					}
				}
			}
			if got != want[name] {
				t.Errorf("got outcome %s, want %s", got, want[name])
			}
		})
	}
}

// goldenIngressSeeds returns the golden Ethernet frames
// (testdata/golden/labelled-*.txt, which the endpoint wrote from macA to
// macB) as the peer's frames arriving back: source and destination MAC
// swapped. They are named golden-<file>-<n>.
func goldenIngressSeeds(t *testing.T) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "labelled-*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden frames: %v", err)
	}
	seeds := map[string][]byte{}
	for _, file := range files {
		frames, err := readHexDump(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range frames {
			b := bytes.Clone(f)
			copy(b[0:6], f[6:12])
			copy(b[6:12], f[0:6])
			seeds[fmt.Sprintf("golden-%s-%d", strings.TrimSuffix(filepath.Base(file), ".txt"), i)] = b
		}
	}
	return seeds
}

// TestIngressSeedCorpus checks that testdata/fuzz/FuzzIngress holds exactly
// the frames ingressSeeds builds and the golden frames
// (goldenIngressSeeds); rewrite with -write-seeds. The scapy-* seeds there
// are node/testdata/hostile.py's, written by its --corpus mode.
func TestIngressSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzIngress")
	all := ingressSeeds()
	for name, b := range goldenIngressSeeds(t) {
		all[name] = b
	}
	for name, b := range all {
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(b)))
		path := filepath.Join(dir, name)
		if *writeSeeds {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -write-seeds)", err)
		}
		if string(got) != want {
			t.Errorf("got %s differing from ingressSeeds()[%q], want equal (run with -write-seeds)", path, name)
		}
	}
}

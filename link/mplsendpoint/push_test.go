package mplsendpoint_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/internal/testkit/tshark"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/mplstest"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Destinations of the push tests: both behind the two-label stack 100/200.
var (
	pushDst4 = netip.MustParseAddr("10.0.0.3")
	pushDst6 = netip.MustParseAddr("fd00::3")
)

// pushLabels is the stack pushed towards pushDst4 and pushDst6: two labels,
// so that a test sees every entry of a stack get the TTL, not only the top.
var pushLabels = []mpls.Label{100, 200}

// pushEndpoint returns an endpoint over a recording Sink of link MTU
// linkMTU whose FIB pushes pushLabels towards pushDst4 and pushDst6, with
// opts (Tables is set here).
func pushEndpoint(t *testing.T, linkMTU uint32, opts mplsendpoint.Options) (*mplsendpoint.Endpoint, *mplstest.Sink) {
	t.Helper()
	opts.Tables = routeTables(t, hostRoutes(pushLabels, netip.Addr{}, pushDst4, pushDst6))
	sink := mplstest.NewSink(linkMTU, macA)
	sink.Record = true
	ep, err := mplsendpoint.New(sink, opts)
	if err != nil {
		t.Fatal(err)
	}
	ep.Attach(newRecorder())
	return ep, sink
}

// pushSegment is the TCP segment the push tests send: from A to dst with
// the given IP TTL (hop limit) and payload.
func pushSegment(v6 bool, ttl uint8, payload []byte) []byte {
	src, dst := addrA4, pushDst4
	if v6 {
		src, dst = addrA6, pushDst6
	}
	seg := mplstest.TCP{
		Src: netip.AddrPortFrom(src, 40000), Dst: netip.AddrPortFrom(dst, 80),
		Seq: 1001, Ack: 5001, Flags: header.TCPFlagAck | header.TCPFlagPsh, Window: 502, ID: 9, DF: true,
		Options: tsOption, TTL: ttl, Payload: payload,
	}
	if v6 {
		return mplstest.IPv6TCP(seg)
	}
	return mplstest.IPv4TCP(seg)
}

// tsOption is a TCP timestamp option with its two NOPs (12 bytes), as every
// data segment of gVisor's TCP carries.
var tsOption = []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}

// hostGSO returns the GSO options gVisor's TCP sets on a host-GSO packet
// with the given MSS.
func hostGSO(v6 bool, mss uint16) stack.GSO {
	if v6 {
		return stack.GSO{Type: stack.GSOTCPv6, NeedsCsum: true, CsumOffset: 16, MSS: mss, L3HdrLen: header.IPv6MinimumSize}
	}
	return stack.GSO{Type: stack.GSOTCPv4, NeedsCsum: true, CsumOffset: 16, MSS: mss, L3HdrLen: header.IPv4MinimumSize}
}

// TestPushTTLModel checks the TTL of pushed labels on the wire under each
// TTL model (RFC 3443): uniform copies the IP TTL into every label; pipe
// writes PipeTTL (255 when unset, mpls.DefaultPipeTTL as Linux's
// net.mpls.ip_ttl_propagate=0) whatever the IP TTL, and in both models the
// IP header leaves as TCP built it (TTL and checksum). A host-GSO packet's
// segments carry the same labels as a single packet. The bytes are checked
// at their offsets and decoded by tshark, an independent dissector.
//
// Checked by planting the bug: with AddHeader's
// ent.LabelTTL(e.ttlModel, ...) changed to ent.LabelTTL(mpls.TTLUniform,
// ...) (the push forced to uniform) every pipe case fails with label TTL =
// the IP TTL.
func TestPushTTLModel(t *testing.T) {
	cases := []struct {
		model   mpls.TTLModel
		pipeTTL uint8 // Options.PipeTTL
		ipTTL   uint8
		want    uint8 // TTL of every pushed label
	}{
		{mpls.TTLUniform, 0, 64, 64},
		{mpls.TTLUniform, 200, 17, 17}, // PipeTTL is ignored in the uniform model
		{mpls.TTLPipe, 0, 64, mpls.DefaultPipeTTL},
		{mpls.TTLPipe, 0, 1, mpls.DefaultPipeTTL},
		{mpls.TTLPipe, 200, 17, 200},
	}
	for _, v6 := range []bool{false, true} {
		for _, gso := range []bool{false, true} {
			for _, c := range cases {
				name := fmt.Sprintf("v6=%v/gso=%v/%v/pipettl=%d/ipttl=%d", v6, gso, c.model, c.pipeTTL, c.ipTTL)
				t.Run(name, func(t *testing.T) {
					ep, sink := pushEndpoint(t, 1500, mplsendpoint.Options{TTLModel: c.model, PipeTTL: c.pipeTTL})
					payload, g, wantFrames := []byte("0123456789abcdefghijklmn"), stack.GSO{}, 1
					if gso {
						g, wantFrames = hostGSO(v6, 12), 2 // two segments of 12 bytes
					}
					writeTCP(ep, pushSegment(v6, c.ipTTL, payload), g)
					frames := sink.Frames()
					if len(frames) != wantFrames {
						t.Fatalf("got %d frames, want %d; stats %+v", len(frames), wantFrames, ep.Stats())
					}
					ipOff := header.EthernetMinimumSize + len(pushLabels)*mpls.EntryLen
					for i, f := range frames {
						for j := range pushLabels {
							if got := f[header.EthernetMinimumSize+j*mpls.EntryLen+3]; got != c.want {
								t.Errorf("frame %d label %d: got TTL %d, want %d", i, j, got, c.want)
							}
						}
						if got := ipTTLAt(f[ipOff:], v6); got != c.ipTTL {
							t.Errorf("frame %d: got IP TTL %d, want %d (untouched)", i, got, c.ipTTL)
						}
					}
					ipField := "ip.ttl"
					if v6 {
						ipField = "ipv6.hlim"
					}
					want := fmt.Sprintf("100,200\t0,1\t%d,%d\t%d\t1", c.want, c.want, c.ipTTL)
					if v6 {
						want = fmt.Sprintf("100,200\t0,1\t%d,%d\t%d\t", c.want, c.want, c.ipTTL)
					}
					wants := make([]string, wantFrames)
					for i := range wants {
						wants[i] = want
					}
					checkWithTshark(t, linkTypeEthernet, frames, []string{"mpls.label", "mpls.bottom", "mpls.ttl", ipField, "ip.checksum.status"}, wants)
				})
			}
		}
	}
}

// ipTTLAt returns the TTL (hop limit) of the IP header at the start of ip.
func ipTTLAt(ip []byte, v6 bool) uint8 {
	if v6 {
		return header.IPv6(ip).HopLimit()
	}
	return header.IPv4(ip).TTL()
}

// TestGSOSegmentsFitLabelledLink sends host-GSO packets whose MSS was
// chosen for an unlabelled route (link MTU - IP - TCP headers: what TCP
// holds when the FTN gained the labelled route after it chose its MSS, or
// any caller that hands a larger MSS) towards a two-label route. The
// endpoint must cut them to the MSS that fits with the label bytes: every
// frame's L2 payload at most the link MTU, the segment count and sizes
// those of MSS = link MTU - 8 (labels) - IP - TCP, the payload whole and in
// order (tshark's tcp.len and tcp.seq_raw), checksums good.
//
// Checked by planting the bug: with writeGSO's fit computed without the
// label bytes (fit := linkMTU - l3Len - len(th)) the segments are 8 bytes
// too big (frames of 1522 bytes on a 1500-byte link) and one fewer: the
// test fails on the frame size, the count and the sizes.
func TestGSOSegmentsFitLabelledLink(t *testing.T) {
	const linkMTU = 1500
	labelBytes := len(pushLabels) * mpls.EntryLen
	for _, v6 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v6=%v", v6), func(t *testing.T) {
			l3 := header.IPv4MinimumSize
			if v6 {
				l3 = header.IPv6MinimumSize
			}
			l4 := header.TCPMinimumSize + len(tsOption)
			unlabelledMSS := linkMTU - l3 - l4
			wantMSS := unlabelledMSS - labelBytes
			// Four unlabelled segments' worth: five labelled ones, the
			// last short.
			payload := payloadBytes(4 * unlabelledMSS)
			ep, sink := pushEndpoint(t, linkMTU, mplsendpoint.Options{})
			writeTCP(ep, pushSegment(v6, 64, payload), hostGSO(v6, uint16(unlabelledMSS)))
			frames := sink.Frames()
			var wantLens []string
			for off := 0; off < len(payload); off += wantMSS {
				wantLens = append(wantLens, fmt.Sprint(min(wantMSS, len(payload)-off)))
			}
			var gotLens []string
			for i, f := range frames {
				if l2 := len(f) - header.EthernetMinimumSize; l2 > linkMTU {
					t.Errorf("frame %d: L2 payload %d bytes > link MTU %d", i, l2, linkMTU)
				}
				gotLens = append(gotLens, fmt.Sprint(len(f)-header.EthernetMinimumSize-labelBytes-l3-l4))
			}
			if strings.Join(gotLens, ",") != strings.Join(wantLens, ",") {
				t.Fatalf("got %d segments of %v payload bytes, want %d of %v (MSS %d = %d - %d label bytes - %d - %d)",
					len(gotLens), gotLens, len(wantLens), wantLens, wantMSS, linkMTU, labelBytes, l3, l4)
			}
			if s := ep.Stats(); s.GSOPackets != 1 {
				t.Errorf("got GSOPackets = %d, want 1 (stats %+v)", s.GSOPackets, s)
			}
			if !tshark.Installed() {
				t.Log("tshark not installed: segments not decoded independently")
				return
			}
			var want []string
			for i, l := range wantLens {
				want = append(want, fmt.Sprintf("100,200\t%d\t%s\t1", 1001+i*wantMSS, l))
			}
			checkWithTshark(t, linkTypeEthernet, frames, []string{"mpls.label", "tcp.seq_raw", "tcp.len", "tcp.checksum.status"}, want)
		})
	}
}

// payloadBytes returns n bytes of a repeating, position-dependent pattern.
func payloadBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

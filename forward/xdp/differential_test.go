package xdp

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/forward"
	"github.com/mplsnode/mplsnode/forward/verdict"
	"github.com/mplsnode/mplsnode/mpls"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
)

// The differential target holds the XDP program to the reference
// decision (package verdict, which the userspace plane decides through):
// the program and the reference see the same frames and the same tables
// (the ILM and FIB below, loaded into both), and for every frame the
// program either does exactly what the reference says (the same bytes out,
// to the same next hop, counted under the same action) or passes the frame
// up untouched. It never drops a frame.

// diffMTU is the egress link's MTU: small, so that MTU rules are reached
// by short fuzzed frames.
const diffMTU = 96

var (
	diffVia4 = netip.MustParseAddr("10.0.0.254")
	diffVia6 = netip.MustParseAddr("2001:db8::fe")
	diffOwn  = netip.MustParseAddr("10.0.0.9")
)

// diffILM is the label table of both planes: XDP entries and the
// reference's ILM entries, alike but for how each names the next hop (a
// MAC for the program, an address on a link for the reference).
func diffILM() ([]Entry, []mpls.ILMEntry) {
	type e struct {
		label   mpls.Label
		action  mpls.ILMAction
		out     []mpls.Label
		payload mpls.Payload
	}
	es := []e{
		{100, mpls.ILMSwap, []mpls.Label{200}, mpls.PayloadNone},
		{101, mpls.ILMSwap, []mpls.Label{300, 400, 500, 600}, mpls.PayloadNone},
		{102, mpls.ILMSwap, []mpls.Label{300, 400}, mpls.PayloadNone},
		{103, mpls.ILMPopForward, nil, mpls.PayloadNone},
		{104, mpls.ILMSwap, []mpls.Label{16, 17, 18, 19, 20}, mpls.PayloadNone}, // deeper than the program carries
		{105, mpls.ILMPopForward, nil, mpls.PayloadIPv6},
		{106, mpls.ILMPopForward, nil, mpls.PayloadIPv4},
	}
	var x []Entry
	var ref []mpls.ILMEntry
	for _, v := range es {
		x = append(x, Entry{Label: v.label, Action: v.action, OutLabels: v.out, Payload: v.payload, Egress: loIndex, NextHopMAC: nhMAC})
		ref = append(ref, mpls.ILMEntry{Label: v.label, Action: v.action, OutLabels: v.out, Payload: v.payload,
			NextHop: diffVia4, Device: "lo"})
	}
	// A local label: the reference gives it to the stack; the program has
	// no entry for it (the node mirrors forwarding entries only).
	ref = append(ref, mpls.ILMEntry{Label: 110, Action: mpls.ILMPopLocal})
	return x, ref
}

// diffRoutes are the FIB of both planes. The program's routes carry the
// pushed labels' TTL in the pipe model, as the node's mirror sets it.
func diffRoutes(model mpls.TTLModel) ([]Route, []forward.Route) {
	var labelTTL uint8
	if model == mpls.TTLPipe {
		labelTTL = mpls.PushTTL(model, 0, 0)
	}
	type r struct {
		pfx    string
		labels []mpls.Label
		mtu    uint32
	}
	rs := []r{
		{"10.0.0.0/8", nil, 0},
		{"10.0.1.0/24", []mpls.Label{300, 400}, 0},
		{"10.0.2.0/24", nil, 60}, // a route MTU below the link's
		{"2001:db8::/32", []mpls.Label{500}, 0},
		{"2001:db9::/32", nil, 0},
	}
	x := append(SpecialRoutes(), Route{Prefix: netip.PrefixFrom(diffOwn, 32), Kind: RouteLocal})
	var ref []forward.Route
	for _, v := range rs {
		p := netip.MustParsePrefix(v.pfx)
		x = append(x, Route{Prefix: p, Kind: RouteForward, Labels: v.labels, LabelTTL: labelTTL, MTU: v.mtu, Egress: loIndex, NextHopMAC: nhMAC})
		via := diffVia4
		if p.Addr().Is6() {
			via = diffVia6
		}
		ref = append(ref, forward.Route{Prefix: p, Device: "lo", Via: via, Labels: v.labels, MTU: v.mtu})
	}
	return x, ref
}

// diffNode is the reference's view of the node: one link, lo, and one
// address.
type diffNode struct{}

func (diffNode) LinkMTU(dev string) (uint32, bool) { return diffMTU, dev == "lo" }
func (diffNode) IsLocal(a netip.Addr) bool         { return a == diffOwn }

// diffPlanes is one TTL model's program and reference tables.
type diffPlanes struct {
	prog *Program
	ref  verdict.Tables
}

func newDiffPlanes(t testing.TB, model mpls.TTLModel) *diffPlanes {
	t.Helper()
	p := loadOnLo(t, model, diffMTU, true)
	xe, re := diffILM()
	if err := p.Sync(xe); err != nil {
		t.Fatal(err)
	}
	xr, rr := diffRoutes(model)
	if _, err := p.SyncFIB(xr); err != nil {
		t.Fatal(err)
	}
	ilm, err := mpls.NewILM(re)
	if err != nil {
		t.Fatal(err)
	}
	return &diffPlanes{prog: p, ref: verdict.Tables{Model: model, ILM: ilm, Router: forward.NewTable(rr), Node: diffNode{}}}
}

// didReasons are the program's counters for each thing the reference
// says was done to a forwarded frame.
var didReasons = map[verdict.Did][]Reason{
	verdict.Swapped:        {Swapped},
	verdict.PoppedLabelled: {PoppedLabelled},
	verdict.PoppedIP:       {PoppedIP},
	verdict.IPForwarded:    {IPForwarded},
	verdict.Pushed:         {IPForwarded, IPPushed},
}

// check runs frame through the program and the reference and fails on any
// outcome but the two allowed: the reference's frame out, or the frame
// passed up untouched. It returns the program's action.
func (d *diffPlanes) check(t *testing.T, frame []byte) uint32 {
	t.Helper()
	before, err := d.prog.Counters()
	if err != nil {
		t.Fatal(err)
	}
	ret, out := run(t, d.prog, frame)
	after, err := d.prog.Counters()
	if err != nil {
		t.Fatal(err)
	}
	var moved []Reason
	for r := range after {
		if after[r] != before[r] {
			moved = append(moved, Reason(r))
		}
	}
	var v verdict.Verdict
	d.ref.Decide(binary.BigEndian.Uint16(frame[12:]), frame[14:], len(frame)-14, &v)
	say := func() string {
		return "reference " + describe(&v) + "; program counted " + reasonList(moved) + "\n in " + hex.EncodeToString(frame) +
			"\nout " + hex.EncodeToString(out)
	}
	switch ret {
	case xdpPass:
		if !bytes.Equal(out, frame) {
			t.Fatalf("passed up a changed frame: %s", say())
		}
		if len(moved) != 1 || moved[0].Redirected() {
			t.Fatalf("passed up under counters %v: %s", moved, say())
		}
		return ret
	case xdpRedirect:
	default:
		t.Fatalf("action %d: %s", ret, say())
	}
	if !bytes.Equal(frame[:6], ourMAC) {
		t.Fatalf("carried a frame for another MAC: %s", say())
	}
	if v.Action != verdict.Forward || v.FragmentMTU != 0 {
		t.Fatalf("carried a frame the reference does not send as is: %s", say())
	}
	want := v.Apply(frame, [6]byte(nhMAC), [6]byte(ourMAC), nil)
	if !bytes.Equal(out, want) {
		t.Fatalf("carried other bytes than the reference's\nwant %x\n%s", want, say())
	}
	if v.Device != "lo" || (v.Via != diffVia4 && v.Via != diffVia6) {
		t.Fatalf("reference next hop %s on %q, program sent to %s: %s", v.Via, v.Device, nhMAC, say())
	}
	if w := didReasons[v.Did]; !sameReasons(moved, w) {
		t.Fatalf("program counted %v, the reference did %v (counters %v): %s", moved, v.Did, w, say())
	}
	return ret
}

func sameReasons(a, b []Reason) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func reasonList(rs []Reason) string {
	var s []string
	for _, r := range rs {
		s = append(s, r.String())
	}
	return "[" + strings.Join(s, " ") + "]"
}

func describe(v *verdict.Verdict) string {
	s := v.Action.String()
	if v.Action == verdict.Drop {
		s += " " + v.Reason.String()
	}
	if v.ICMP != verdict.NoICMP {
		s += " icmp " + v.ICMP.String()
	}
	if v.FragmentMTU != 0 {
		s += " fragment"
	}
	return s
}

// diffSeeds are the frames the target starts from: the hostile frames
// crafted against a live node (malformed stacks, label 3, bad IP headers,
// the TTL models on pop, explicit nulls at TTL 1), a frame for every drop
// reason of the reference, and the good cases of each action.
func diffSeeds(t testing.TB) [][]byte {
	udp4 := func(ttl uint8, src, dst [4]byte, n int) []byte {
		ip := make([]byte, 28+n)
		ip[0], ip[8], ip[9] = 0x45, ttl, 17
		binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
		copy(ip[12:], src[:])
		copy(ip[16:], dst[:])
		binary.BigEndian.PutUint16(ip[10:], ^checksum.Checksum(ip[:20], 0))
		binary.BigEndian.PutUint16(ip[20:], 1000)
		binary.BigEndian.PutUint16(ip[22:], 9)
		binary.BigEndian.PutUint16(ip[24:], uint16(8+n))
		return ip
	}
	src, dst := [4]byte{172, 16, 20, 41}, [4]byte{10, 10, 10, 10}
	u := udp4(64, src, dst, 8)
	l := func(label mpls.Label, s bool, ttl uint8) mpls.Entry { return mpls.Entry{Label: label, S: s, TTL: ttl} }
	lab := func(p []byte, es ...mpls.Entry) []byte { return frame(ourMAC, es, p) }
	mod := func(b []byte, f func([]byte)) []byte { c := append([]byte{}, b...); f(c); return c }
	udp6 := func(hop uint8, plen uint16, total int) []byte {
		ip := make([]byte, total)
		ip[0], ip[6], ip[7] = 0x60, 17, hop
		binary.BigEndian.PutUint16(ip[4:], plen)
		copy(ip[8:], netip.MustParseAddr("2001:db8:1::1").AsSlice())
		copy(ip[24:], netip.MustParseAddr("2001:db9::2").AsSlice())
		return ip
	}
	var seeds [][]byte
	// No bottom of stack (11 entries and 2 bytes), and 17 deep.
	seeds = append(seeds, append(append([]byte{}, ourMAC...), append([]byte{2, 0, 0, 0, 0, 3, 0x88, 0x47},
		mustHex(t, strings.Repeat("00064040", 11)+"0000")...)...))
	seeds = append(seeds, append(append(append([]byte{}, ourMAC...), append([]byte{2, 0, 0, 0, 0, 3, 0x88, 0x47},
		mustHex(t, strings.Repeat("00064040", 16)+"00064140")...)...), u...))
	// Label 3 under a swapped label, and in the middle.
	seeds = append(seeds, lab(u, l(100, false, 64), l(3, true, 64)))
	seeds = append(seeds, lab(u, l(100, false, 64), l(3, false, 64), l(103, true, 64)))
	// Popped IPv4 with a wrong header checksum; plain transit too.
	bad := mod(u, func(b []byte) { b[10], b[11] = 0x12, 0x34 })
	seeds = append(seeds, lab(bad, l(103, true, 64)), ipFrame(ourMAC, bad))
	// Popped IP whose length fields contradict the packet.
	for _, tot := range []uint16{10, 19, 200} {
		b := mod(u, func(b []byte) {
			binary.BigEndian.PutUint16(b[2:], tot)
			b[10], b[11] = 0, 0
			binary.BigEndian.PutUint16(b[10:], ^checksum.Checksum(b[:20], 0))
		})
		seeds = append(seeds, lab(b, l(103, true, 64)))
	}
	seeds = append(seeds, lab(udp6(64, 500, 25)[:25], l(105, true, 64)))
	seeds = append(seeds, lab(udp6(64, 0, 63), l(105, true, 64)))
	seeds = append(seeds, lab(append(append([]byte{}, u...), 0, 0, 0, 0), l(103, true, 64))) // padding
	// Inner TTL 0 and 1 under a pop (the pipe model expires them).
	seeds = append(seeds, lab(udp4(0, src, dst, 8), l(103, true, 64)), lab(udp4(1, src, dst, 8), l(103, true, 64)))
	seeds = append(seeds, lab(u, l(103, false, 64), l(200, true, 1)))
	// Explicit null with label TTL 1.
	seeds = append(seeds, lab(u, l(0, true, 1)), lab(u, l(0, false, 1), l(103, true, 64)))
	// The drop reasons and actions of the reference.
	seeds = append(seeds,
		lab(u, l(100, true, 64)),                                      // swap
		lab(u, l(101, true, 64)),                                      // swap and push to 4
		lab(u, l(104, true, 64)),                                      // swap to 5: not carried
		lab(u, l(102, false, 9), l(200, true, 9)),                     // swap above a label
		lab(u, l(103, false, 9), l(200, true, 9)),                     // pop to a label
		lab(u, l(103, true, 1)),                                       // ttl_expired
		lab(u, l(103, true, 0)),                                       // ttl 0
		lab(u, l(999, true, 64)),                                      // no_ilm_entry
		lab(u, l(1, true, 64)),                                        // reserved (router alert)
		lab(u, l(103, false, 64), l(1, true, 64)),                     // reserved under a pop
		lab(u, l(103, false, 64), l(7, false, 64), l(8000, true, 64)), // ELI and EL under a pop
		lab(u, l(110, true, 64)),                                      // local
		lab([]byte{0x50, 1, 2}, l(103, true, 64)),                     // unknown payload
		lab(udp6(9, 8, 48), l(105, true, 64)),                         // bound IPv6
		lab(u, l(106, true, 64)),                                      // bound IPv4
		lab(udp4(64, src, dst, 80), l(100, true, 64)),                 // mtu_exceeded on swap
		lab(mod(udp4(64, src, dst, 80), func(b []byte) {
			b[6] = 0x40
			b[10], b[11] = 0, 0
			binary.BigEndian.PutUint16(b[10:], ^checksum.Checksum(b[:20], 0))
		}), l(103, true, 64)),
		frame(peerMAC, []mpls.Entry{l(100, true, 64)}, u), // not for us
	)
	for _, d := range [][4]byte{{10, 0, 0, 2}, {10, 0, 1, 5}, {10, 0, 2, 7}, {10, 0, 0, 9}, {224, 0, 0, 1}, {192, 0, 2, 1}, {127, 0, 0, 1}} {
		seeds = append(seeds, ipFrame(ourMAC, udp4(64, src, d, 8)))
	}
	for _, s := range [][4]byte{{169, 254, 1, 1}, {10, 0, 0, 9}, {0, 0, 0, 0}, {224, 0, 0, 0}, {223, 255, 255, 255}} {
		seeds = append(seeds, ipFrame(ourMAC, udp4(64, s, [4]byte{10, 0, 0, 2}, 8)))
	}
	seeds = append(seeds, ipFrame(ourMAC, udp4(1, src, [4]byte{10, 0, 0, 2}, 8)), ipFrame(ourMAC, udp4(64, src, [4]byte{10, 0, 2, 7}, 40)),
		ipFrame(ourMAC, udp6(64, 8, 48)), ipFrame(ourMAC, udp6(1, 8, 48)))
	return seeds
}

// TestDifferentialSeeds runs every seed through both planes in both TTL
// models, and shows that the seeds the program carried are carried.
func TestDifferentialSeeds(t *testing.T) {
	for _, m := range []mpls.TTLModel{mpls.TTLUniform, mpls.TTLPipe} {
		d := newDiffPlanes(t, m)
		t.Cleanup(func() { d.prog.Close() })
		carried := 0
		for i, f := range diffSeeds(t) {
			t.Run(fmt.Sprintf("%v/%d", m, i), func(t *testing.T) {
				if d.check(t, f) == xdpRedirect {
					carried++
				}
			})
		}
		if carried < 8 {
			t.Fatalf("%v: the program carried %d seeds; the differential compares nothing", m, carried)
		}
		t.Logf("%v: %d seeds, %d carried", m, len(diffSeeds(t)), carried)
	}
}

// FuzzDifferential is the differential target (make fuzz, CI): fuzzed
// frames, in both TTL models, through the program and the reference.
func FuzzDifferential(f *testing.F) {
	for _, s := range diffSeeds(f) {
		f.Add(s, false)
		f.Add(s, true)
	}
	var planes [2]*diffPlanes
	f.Fuzz(func(t *testing.T, in []byte, pipe bool) {
		if len(in) < 14 {
			return // the kernel's test run wants an Ethernet header
		}
		model, i := fuzzTTLModel(pipe)
		if planes[i] == nil {
			planes[i] = newDiffPlanes(t, model)
		}
		planes[i].check(t, in)
	})
}

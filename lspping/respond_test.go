package lspping_test

import (
	"net/netip"
	"testing"

	"github.com/mplsnode/mplsnode/lspping"
	"github.com/mplsnode/mplsnode/mpls"
)

// node is a responder's tables: label 100 swaps to 200 towards
// 172.16.21.22, 101 pops towards it, 102 is multipath over two hops, 300
// is popped here; the node owns 172.16.20.21 and 10.10.10.10.
type node struct {
	ilm *mpls.ILM
}

func newNode(t testing.TB) node {
	t.Helper()
	ilm, err := mpls.NewILM([]mpls.ILMEntry{
		{Label: 100, Action: mpls.ILMSwap, OutLabels: []mpls.Label{200}, NextHop: netip.MustParseAddr("172.16.21.22"), Device: "b1"},
		{Label: 101, Action: mpls.ILMPopForward, NextHop: netip.MustParseAddr("172.16.21.22"), Device: "b1"},
		{Label: 102, Action: mpls.ILMMultipath, NextHops: []mpls.NextHop{
			{Via: netip.MustParseAddr("172.16.21.22"), Device: "b1", Labels: []mpls.Label{200}},
			{Via: netip.MustParseAddr("172.16.22.22"), Device: "b2", Labels: []mpls.Label{201}},
		}},
		{Label: 300, Action: mpls.ILMPopLocal},
	})
	if err != nil {
		t.Fatal(err)
	}
	return node{ilm: ilm}
}

func (n node) top(l mpls.Label) mpls.Entry { return mpls.Entry{Label: l, TTL: 1, S: true} }

func (n node) ILM() *mpls.ILM                         { return n.ilm }
func (n node) FIB() *mpls.FIB                         { return nil }
func (n node) Seed() uint32                           { return 7 }
func (n node) LinkMTU(string) uint32                  { return 1500 }
func (n node) LinkAddr(string, netip.Addr) netip.Addr { return netip.MustParseAddr("172.16.20.21") }
func (n node) IsLocal(a netip.Addr) bool {
	return a == netip.MustParseAddr("172.16.20.21") || a == netip.MustParseAddr("10.10.10.10")
}
func (n node) Egress(p netip.Prefix) bool { return p.Contains(netip.MustParseAddr("10.10.10.10")) }

func req(fec lspping.FEC, ds *lspping.DDMap) *lspping.Message {
	m := &lspping.Message{Version: 1, Type: lspping.Request, ReplyMode: lspping.ReplyUDP, Handle: 5, Seq: 9, Sent: 1234,
		HasFECStack: true, FECs: []lspping.FEC{fec}}
	if ds != nil {
		m.DDMaps = []lspping.DDMap{*ds}
	}
	return m
}

// TestRespond: the return code, subcode and DDMAPs of each way a request
// arrives, as RFC 8029 §3.1 and §4.4 give them. Checked by planting the
// bug (l02): without the DDMAP's label check, "mismatched label" answers 8.
func TestRespond(t *testing.T) {
	n := newNode(t)
	ldp := func(p string) lspping.FEC { f, _ := lspping.PrefixFEC("ldp", netip.MustParsePrefix(p)); return f }
	top := func(l mpls.Label) []mpls.Entry { return []mpls.Entry{{Label: l, TTL: 1, S: true}} }
	allRouters := lspping.NewDDMap(1500, lspping.AllRouters4, nil)
	named := lspping.NewDDMap(1500, netip.MustParseAddr("172.16.20.21"), []lspping.DSLabel{{Entry: mpls.Entry{Label: 100, S: true}}})
	other := lspping.NewDDMap(1500, netip.MustParseAddr("172.16.99.1"), nil)
	wrongLabel := lspping.NewDDMap(1500, netip.MustParseAddr("172.16.20.21"), []lspping.DSLabel{{Entry: mpls.Entry{Label: 555, S: true}}})
	cases := []struct {
		name   string
		msg    []byte
		where  lspping.Where
		labels []mpls.Entry
		code   lspping.ReturnCode
		sub    uint8
		ds     string // the DDMAPs: downstream and labels
	}{
		{"egress", req(ldp("10.10.10.10/32"), nil).Marshal(), lspping.AtEgress, top(300), lspping.CodeEgress, 1, ""},
		{"egress PHP", req(ldp("10.10.10.10/32"), nil).Marshal(), lspping.AtEgress, nil, lspping.CodeEgress, 1, ""},
		{"egress nil FEC", req(lspping.FEC{Type: lspping.FECNil, Label: 300}, nil).Marshal(), lspping.AtEgress, top(300), lspping.CodeEgress, 1, ""},
		{"not the egress", req(ldp("10.9.9.9/32"), nil).Marshal(), lspping.AtEgress, top(300), lspping.CodeNoMapping, 1, ""},
		{"no label entry", req(ldp("10.10.10.10/32"), nil).Marshal(), lspping.NoLabelEntry, top(999), lspping.CodeNoLabelEntry, 1, ""},
		{"switched", req(ldp("10.10.10.10/32"), &allRouters).Marshal(), lspping.TTLExpired, top(100), lspping.CodeLabelSwitched, 1, "172.16.21.22 [200/S];"},
		{"switched, named", req(ldp("10.10.10.10/32"), &named).Marshal(), lspping.TTLExpired, top(100), lspping.CodeLabelSwitched, 1, "172.16.21.22 [200/S];"},
		{"switched, no DDMAP asked", req(ldp("10.10.10.10/32"), nil).Marshal(), lspping.TTLExpired, top(100), lspping.CodeLabelSwitched, 1, ""},
		{"popped", req(ldp("10.10.10.10/32"), &allRouters).Marshal(), lspping.TTLExpired, top(101), lspping.CodeLabelSwitched, 1, "172.16.21.22 [3 (implicit-null)/S];"},
		{"multipath", req(ldp("10.10.10.10/32"), &allRouters).Marshal(), lspping.TTLExpired, top(102), lspping.CodeLabelSwitched, 1, "172.16.21.22 [200/S];172.16.22.22 [201/S];"},
		{"mismatched router", req(ldp("10.10.10.10/32"), &other).Marshal(), lspping.TTLExpired, top(100), lspping.CodeDownstreamMismatch, 0, ""},
		{"mismatched label", req(ldp("10.10.10.10/32"), &wrongLabel).Marshal(), lspping.TTLExpired, top(100), lspping.CodeDownstreamMismatch, 0, ""},
		{"malformed", append(req(ldp("10.10.10.10/32"), nil).Marshal(), 0, 1), lspping.AtEgress, top(300), lspping.CodeMalformed, 0, ""},
		{"no FEC stack", (&lspping.Message{Version: 1, Type: lspping.Request, ReplyMode: lspping.ReplyUDP, Handle: 5, Seq: 9, Sent: 1234}).Marshal(), lspping.AtEgress, top(300), lspping.CodeMalformed, 0, ""},
		{"unknown TLV", append(req(ldp("10.10.10.10/32"), nil).Marshal(), 0, 99, 0, 0), lspping.AtEgress, top(300), lspping.CodeTLVNotUnderstood, 0, ""},
		{"unknown FEC", req(lspping.FEC{Type: 99, Raw: []byte{1, 2, 3, 4}}, nil).Marshal(), lspping.AtEgress, top(300), lspping.CodeTLVNotUnderstood, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep, why := lspping.Respond(c.msg, &lspping.Arrival{Where: c.where, Labels: c.labels, Link: "b0", Received: 99}, n)
			if rep == nil {
				t.Fatalf("no reply: %v", why)
			}
			if rep.Code != c.code || rep.Subcode != c.sub {
				t.Errorf("got code %d/%d (%s), want %d/%d (%s)", rep.Code, rep.Subcode, rep.Code.Describe(rep.Subcode), c.code, c.sub, c.code.Describe(c.sub))
			}
			if rep.Type != lspping.Reply || rep.Handle != 5 || rep.Seq != 9 || rep.Sent != 1234 || rep.Received != 99 {
				t.Errorf("reply header %+v: want type reply, handle 5, seq 9, sent 1234, received 99", rep)
			}
			var ds string
			for _, d := range rep.DDMaps {
				ds += d.Downstream.String() + " ["
				for _, l := range d.Labels {
					ds += l.Entry.Label.String()
					if l.Entry.S {
						ds += "/S"
					}
				}
				ds += "];"
			}
			if ds != c.ds {
				t.Errorf("DDMAPs %q, want %q", ds, c.ds)
			}
			if c.code == lspping.CodeTLVNotUnderstood && len(rep.Errored) != 1 {
				t.Errorf("Errored TLVs %+v, want the one not understood", rep.Errored)
			}
			if _, err := lspping.Decode(rep.Marshal()); err != nil {
				t.Errorf("the reply does not decode: %v", err)
			}
		})
	}
}

func TestRespondNoReply(t *testing.T) {
	n := newNode(t)
	f, _ := lspping.PrefixFEC("ldp", netip.MustParsePrefix("10.10.10.10/32"))
	mode := func(m lspping.ReplyMode) []byte { r := req(f, nil); r.ReplyMode = m; return r.Marshal() }
	tonly := req(f, nil)
	tonly.Flags = lspping.FlagTTLExpiredOnly
	reply := req(f, nil)
	reply.Type = lspping.Reply
	for name, c := range map[string]struct {
		msg  []byte
		want lspping.NoReplyReason
	}{
		"short":  {make([]byte, 31), lspping.DropTruncated},
		"reply":  {reply.Marshal(), lspping.DropNotRequest},
		"mode 1": {mode(lspping.NoReply), lspping.DropNoReplyMode},
		"mode 4": {mode(lspping.ReplyControlChannel), lspping.DropReplyModeUnsupported},
		"T flag": {tonly.Marshal(), lspping.DropNotExpired},
	} {
		rep, why := lspping.Respond(c.msg, &lspping.Arrival{Where: lspping.AtEgress}, n)
		if rep != nil || why != c.want {
			t.Errorf("%s: reply %v, reason %v, want none for %v", name, rep != nil, why, c.want)
		}
	}
}

// TestRespondMultipath: the multipath information of each DDMAP names
// the 127/8 destinations the label switch's hash sends to its hop, and
// every one asked for goes to exactly one.
// Checked by planting the bug (l01): with the hop match inverted, the
// destinations listed are the other hop's.
func TestRespondMultipath(t *testing.T) {
	n := newNode(t)
	f, _ := lspping.PrefixFEC("ldp", netip.MustParsePrefix("10.10.10.10/32"))
	ds := lspping.NewDDMap(1500, lspping.AllRouters4, nil)
	base := netip.MustParseAddr("127.0.0.0")
	mp := lspping.Bitmask(base, 32, func(int) bool { return true })
	ds.Multipath = &mp
	labels := []mpls.Entry{{Label: 102, TTL: 1, S: true}}
	ip := lspping.BuildIP(&lspping.Packet{Src: src, Dst: dst127, SrcPort: 40000, DstPort: lspping.Port, TTL: 1, Payload: req(f, &ds).Marshal()})
	rep, _ := lspping.Respond(req(f, &ds).Marshal(), &lspping.Arrival{Where: lspping.TTLExpired, Labels: labels, IP: ip}, n)
	if rep == nil || len(rep.DDMaps) != 2 {
		t.Fatalf("want 2 DDMAPs, got %+v", rep)
	}
	ilm := n.ILM()
	e, _ := ilm.Lookup(102)
	seen := map[netip.Addr]int{}
	for i, d := range rep.DDMaps {
		addrs, ok := d.Multipath.Addresses(false)
		if !ok || len(addrs) == 0 {
			t.Fatalf("DDMAP %d: multipath %+v names no destination", i, d.Multipath)
		}
		for _, a := range addrs {
			seen[a]++
			probe := append([]byte{}, ip...)
			copy(probe[16:20], a.AsSlice())
			h := e.Group().Select(mpls.LabelStackHash(n.Seed(), labels, probe))
			if h.Via != d.Downstream {
				t.Errorf("%v is listed for %v, the switch sends it to %v", a, d.Downstream, h.Via)
			}
		}
	}
	if len(seen) != 32 {
		t.Errorf("%d of the 32 destinations listed, want all", len(seen))
	}
}

// TestRespondMultipathBounded: a request's multipath information of any
// length is answered for its first 256 destinations only.
func TestRespondMultipathBounded(t *testing.T) {
	n := newNode(t)
	f, _ := lspping.PrefixFEC("ldp", netip.MustParsePrefix("10.10.10.10/32"))
	ds := lspping.NewDDMap(1500, lspping.AllRouters4, nil)
	mp := lspping.Bitmask(netip.MustParseAddr("127.0.0.0"), 8*60000, func(int) bool { return true })
	ds.Multipath = &mp
	labels := []mpls.Entry{{Label: 102, TTL: 1, S: true}}
	ip := lspping.BuildIP(&lspping.Packet{Src: src, Dst: dst127, SrcPort: 40000, DstPort: lspping.Port, TTL: 1})
	rep, _ := lspping.Respond(req(f, &ds).Marshal(), &lspping.Arrival{Where: lspping.TTLExpired, Labels: labels, IP: ip}, n)
	if rep == nil || len(rep.DDMaps) != 2 {
		t.Fatalf("want 2 DDMAPs, got %+v", rep)
	}
	total := 0
	for _, d := range rep.DDMaps {
		a, _ := d.Multipath.Addresses(false)
		total += len(a)
	}
	if total != 256 {
		t.Errorf("%d destinations answered for, want the first 256", total)
	}
}

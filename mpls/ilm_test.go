package mpls_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/mplsnode/mplsnode/mpls"
)

var nh = netip.MustParseAddr("172.16.21.22")

func TestILMLookup(t *testing.T) {
	ilm, err := mpls.NewILM([]mpls.ILMEntry{
		{Label: 100, Action: mpls.ILMSwap, OutLabels: []mpls.Label{200, 300}, NextHop: nh, Device: "veth1"},
		{Label: 101, Action: mpls.ILMPopForward, NextHop: netip.MustParseAddr("::ffff:10.0.0.1")},
		{Label: 102, Action: mpls.ILMPopContinue},
		{Label: 103, Action: mpls.ILMPopLocal, Payload: mpls.PayloadIPv6},
		{Label: mpls.LabelIPv4ExplicitNull, Action: mpls.ILMPopLocal},
		{Label: mpls.LabelIPv6ExplicitNull, Action: mpls.ILMPopLocal, Payload: mpls.PayloadIPv6},
		{Label: 16, Action: mpls.ILMPopLocal},
		{Label: 65535, Action: mpls.ILMPopLocal},
		{Label: 65536, Action: mpls.ILMPopLocal},
		{Label: mpls.MaxLabel, Action: mpls.ILMSwap, OutLabels: []mpls.Label{mpls.LabelIPv4ExplicitNull}, NextHop: nh},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		label  mpls.Label
		found  bool
		action mpls.ILMAction
	}{
		{100, true, mpls.ILMSwap}, {101, true, mpls.ILMPopForward}, {102, true, mpls.ILMPopContinue},
		{103, true, mpls.ILMPopLocal}, {0, true, mpls.ILMPopLocal}, {2, true, mpls.ILMPopLocal},
		{16, true, mpls.ILMPopLocal}, {65535, true, mpls.ILMPopLocal}, {65536, true, mpls.ILMPopLocal},
		{mpls.MaxLabel, true, mpls.ILMSwap},
		{1, false, 0}, {3, false, 0}, {17, false, 0}, {104, false, 0}, {65537, false, 0},
		{mpls.MaxLabel - 1, false, 0}, {mpls.MaxLabel + 1, false, 0}, {1 << 31, false, 0},
	} {
		e, ok := ilm.Lookup(tt.label)
		if ok != tt.found {
			t.Errorf("Lookup(%d) found = %v, want %v", uint32(tt.label), ok, tt.found)
			continue
		}
		if ok && (e.Label != tt.label || e.Action != tt.action) {
			t.Errorf("Lookup(%d) = label %d %v, want %v", uint32(tt.label), uint32(e.Label), e.Action, tt.action)
		}
	}
	e, _ := ilm.Lookup(100)
	if len(e.OutLabels) != 2 || e.OutLabels[0] != 200 || e.NextHop != nh || e.Device != "veth1" {
		t.Errorf("Lookup(100) = %+v, want swap to 200/300 via %v dev veth1", e, nh)
	}
	e, _ = ilm.Lookup(101)
	if want := netip.MustParseAddr("10.0.0.1"); e.NextHop != want {
		t.Errorf("Lookup(101).NextHop = %v, want %v (unmapped)", e.NextHop, want)
	}
	if ilm.Len() != 10 || len(ilm.Entries()) != 10 {
		t.Errorf("Len = %d, len(Entries) = %d, want 10", ilm.Len(), len(ilm.Entries()))
	}
	var nilILM *mpls.ILM
	if _, ok := nilILM.Lookup(100); ok || nilILM.Len() != 0 {
		t.Error("nil ILM: Lookup matched or Len != 0, want an empty table")
	}
	if allocs := testing.AllocsPerRun(100, func() {
		ilm.Lookup(100)
		ilm.Lookup(65536)
		ilm.Lookup(7)
	}); allocs != 0 {
		t.Errorf("ILM.Lookup allocs = %v, want 0", allocs)
	}
}

func TestNewILMErrors(t *testing.T) {
	for _, tt := range []struct {
		name     string
		entry    mpls.ILMEntry
		sentinel error
		msg      string
	}{
		{
			name: "router alert", entry: mpls.ILMEntry{Label: 1, Action: mpls.ILMPopLocal}, sentinel: mpls.ErrReservedLabel,
			msg: "mpls: ILM entry 1 (label 1 (router-alert)): mpls: reserved label 1 (router-alert) at stack offset 0: labels 0-15 are never allocated to routes; only the explicit nulls 0 and 2 may have ILM entries",
		},
		{
			name: "implicit null", entry: mpls.ILMEntry{Label: 3, Action: mpls.ILMPopLocal}, sentinel: mpls.ErrReservedLabel,
			msg: "mpls: ILM entry 1 (label 3 (implicit-null)): mpls: reserved label 3 (implicit-null) at stack offset 0: labels 0-15 are never allocated to routes; only the explicit nulls 0 and 2 may have ILM entries",
		},
		{
			name: "label 15", entry: mpls.ILMEntry{Label: 15, Action: mpls.ILMPopLocal}, sentinel: mpls.ErrReservedLabel,
			msg: "mpls: ILM entry 1 (label 15): mpls: reserved label 15 at stack offset 0: labels 0-15 are never allocated to routes; only the explicit nulls 0 and 2 may have ILM entries",
		},
		{
			name: "over 20 bits", entry: mpls.ILMEntry{Label: 1 << 20, Action: mpls.ILMPopLocal}, sentinel: mpls.ErrLabelRange,
			msg: "mpls: ILM entry 1 (label 1048576): mpls: label 1048576 at stack offset 0 does not fit in 20 bits (max 1048575)",
		},
		{
			name: "swap explicit null", entry: mpls.ILMEntry{Label: 0, Action: mpls.ILMSwap, OutLabels: []mpls.Label{20}, NextHop: nh}, sentinel: mpls.ErrReservedLabel,
			msg: "mpls: ILM entry 1 (label 0 (ipv4-explicit-null)): mpls: reserved label 0 (ipv4-explicit-null) at stack offset 0: an explicit null label can only be popped",
		},
		{
			name: "swap to implicit null", entry: mpls.ILMEntry{Label: 20, Action: mpls.ILMSwap, OutLabels: []mpls.Label{30, 3}, NextHop: nh}, sentinel: mpls.ErrReservedLabel,
			msg: "mpls: ILM entry 1 (label 20): mpls: reserved label 3 (implicit-null) at stack offset 4: implicit null is signalled, never pushed: leave the label out (penultimate hop popping)",
		},
		{
			name: "swap to big label", entry: mpls.ILMEntry{Label: 20, Action: mpls.ILMSwap, OutLabels: []mpls.Label{1 << 21}, NextHop: nh}, sentinel: mpls.ErrLabelRange,
			msg: "mpls: ILM entry 1 (label 20): mpls: label 2097152 at stack offset 0 does not fit in 20 bits (max 1048575)",
		},
		{
			name: "swap to too many", entry: mpls.ILMEntry{Label: 20, Action: mpls.ILMSwap, OutLabels: make([]mpls.Label, 17), NextHop: nh}, sentinel: mpls.ErrTooDeep,
			msg: "mpls: ILM entry 1 (label 20): mpls: label stack deeper than 16 entries: entry 17 at offset 64",
		},
		{
			name: "swap to nothing", entry: mpls.ILMEntry{Label: 20, Action: mpls.ILMSwap, NextHop: nh},
			msg: "mpls: ILM entry 1 (label 20): swap needs OutLabels (to pop, use pop-forward, pop-continue or pop-local)",
		},
		{
			name: "swap without next hop", entry: mpls.ILMEntry{Label: 20, Action: mpls.ILMSwap, OutLabels: []mpls.Label{30}},
			msg: "mpls: ILM entry 1 (label 20): swap needs a NextHop",
		},
		{
			name: "pop-forward without next hop", entry: mpls.ILMEntry{Label: 20, Action: mpls.ILMPopForward},
			msg: "mpls: ILM entry 1 (label 20): pop-forward needs a NextHop",
		},
		{
			name: "pop with out labels", entry: mpls.ILMEntry{Label: 20, Action: mpls.ILMPopLocal, OutLabels: []mpls.Label{30}},
			msg: "mpls: ILM entry 1 (label 20): pop-local takes no OutLabels (use swap to replace the label)",
		},
		{
			name: "binding contradicts explicit null", entry: mpls.ILMEntry{Label: 2, Action: mpls.ILMPopLocal, Payload: mpls.PayloadIPv4},
			msg: "mpls: ILM entry 1 (label 2 (ipv6-explicit-null)): payload binding ipv4 contradicts the explicit null label",
		},
		{
			name: "multipath without hops", entry: mpls.ILMEntry{Label: 20, Action: mpls.ILMMultipath},
			msg: "mpls: ILM entry 1 (label 20): multipath needs NextHops",
		},
		{
			name: "multipath too many hops", entry: mpls.ILMEntry{Label: 20, Action: mpls.ILMMultipath, NextHops: manyHops(mpls.MaxNextHops + 1)},
			msg: "mpls: ILM entry 1 (label 20): 65 next hops; at most 64",
		},
		{
			name: "multipath hop without via", entry: mpls.ILMEntry{Label: 20, Action: mpls.ILMMultipath, NextHops: []mpls.NextHop{{Via: nh}, {Labels: []mpls.Label{30}}}},
			msg: "mpls: ILM entry 1 (label 20): next hop 2: no Via (a label route's hop needs a neighbour)",
		},
		{
			name: "multipath heavy hop", entry: mpls.ILMEntry{Label: 20, Action: mpls.ILMMultipath, NextHops: []mpls.NextHop{{Via: nh, Weight: 257}, {Via: nh}}},
			msg: "mpls: ILM entry 1 (label 20): next hop 1: weight 257; at most 256",
		},
		{
			name: "multipath hop swaps to implicit null", entry: mpls.ILMEntry{Label: 20, Action: mpls.ILMMultipath, NextHops: []mpls.NextHop{{Via: nh, Labels: []mpls.Label{3}}}}, sentinel: mpls.ErrReservedLabel,
			msg: "mpls: ILM entry 1 (label 20): mpls: reserved label 3 (implicit-null) at stack offset 0: implicit null is signalled, never pushed: leave the label out (penultimate hop popping)",
		},
		{
			name: "multipath hop too deep", entry: mpls.ILMEntry{Label: 20, Action: mpls.ILMMultipath, NextHops: []mpls.NextHop{{Via: nh, Labels: make([]mpls.Label, 17)}}}, sentinel: mpls.ErrTooDeep,
			msg: "mpls: ILM entry 1 (label 20): mpls: label stack deeper than 16 entries: entry 17 at offset 64",
		},
		{
			name: "multipath swaps explicit null", entry: mpls.ILMEntry{Label: 0, Action: mpls.ILMMultipath, NextHops: []mpls.NextHop{{Via: nh}, {Via: nh, Labels: []mpls.Label{30}}}}, sentinel: mpls.ErrReservedLabel,
			msg: "mpls: ILM entry 1 (label 0 (ipv4-explicit-null)): mpls: reserved label 0 (ipv4-explicit-null) at stack offset 0: an explicit null label can only be popped",
		},
		{
			name: "multipath with entry next hop", entry: mpls.ILMEntry{Label: 20, Action: mpls.ILMMultipath, NextHop: nh, NextHops: []mpls.NextHop{{Via: nh}}},
			msg: "mpls: ILM entry 1 (label 20): multipath takes its OutLabels, NextHop and Device per hop (NextHops), not on the entry",
		},
		{
			name: "swap with hops", entry: mpls.ILMEntry{Label: 20, Action: mpls.ILMSwap, OutLabels: []mpls.Label{30}, NextHop: nh, NextHops: []mpls.NextHop{{Via: nh}}},
			msg: "mpls: ILM entry 1 (label 20): swap takes no NextHops (several hops are multipath)",
		},
		{
			name: "invalid action", entry: mpls.ILMEntry{Label: 20, Action: 9},
			msg: "mpls: ILM entry 1 (label 20): invalid action ilmaction(9)",
		},
		{
			name: "invalid payload", entry: mpls.ILMEntry{Label: 20, Action: mpls.ILMPopLocal, Payload: 7},
			msg: "mpls: ILM entry 1 (label 20): invalid payload binding payload(7)",
		},
		{
			name: "duplicate", entry: mpls.ILMEntry{Label: 100, Action: mpls.ILMPopLocal},
			msg: "mpls: ILM entry 1 (label 100): duplicate of entry 0",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			entries := []mpls.ILMEntry{{Label: 100, Action: mpls.ILMPopLocal}, tt.entry}
			_, err := mpls.NewILM(entries)
			if err == nil {
				t.Fatal("NewILM err = nil, want an error")
			}
			var te *mpls.TableError
			if !errors.As(err, &te) || te.Table != "ILM" || te.Index != 1 {
				t.Errorf("err = %#v, want *TableError{Table: ILM, Index: 1}", err)
			}
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Errorf("errors.Is(err, %v) = false, want true", tt.sentinel)
			}
			if got := err.Error(); got != tt.msg {
				t.Errorf("err.Error() =\n%q, want\n%q", got, tt.msg)
			}
		})
	}
	// A duplicate among high (map-stored) labels is caught too.
	_, err := mpls.NewILM([]mpls.ILMEntry{{Label: 300000, Action: mpls.ILMPopLocal}, {Label: 300000, Action: mpls.ILMPopLocal}})
	if err == nil {
		t.Error("NewILM with duplicate label 300000: err = nil, want duplicate")
	}
}

func manyHops(n int) []mpls.NextHop {
	hops := make([]mpls.NextHop, n)
	for i := range hops {
		hops[i] = mpls.NextHop{Via: nh, Labels: []mpls.Label{mpls.Label(100 + i)}}
	}
	return hops
}

// TestILMMultipath checks that a multipath entry keeps copies of its hops,
// unmapped, and that its Group spreads hashes by the hops' weights.
func TestILMMultipath(t *testing.T) {
	hops := []mpls.NextHop{
		{Via: netip.MustParseAddr("::ffff:172.16.21.22"), Device: "virt12", Labels: []mpls.Label{200}},
		{Via: netip.MustParseAddr("172.16.31.22"), Device: "virt13", Weight: 3},
	}
	ilm, err := mpls.NewILM([]mpls.ILMEntry{
		{Label: 100, Action: mpls.ILMMultipath, NextHops: hops},
		{Label: 101, Action: mpls.ILMMultipath, NextHops: manyHops(mpls.MaxNextHops)},
		{Label: 0, Action: mpls.ILMMultipath, NextHops: []mpls.NextHop{{Via: nh}, {Via: nh, Device: "x"}}},
		{Label: 102, Action: mpls.ILMSwap, OutLabels: []mpls.Label{30}, NextHop: nh},
	})
	if err != nil {
		t.Fatal(err)
	}
	hops[0].Labels[0] = 999
	e, _ := ilm.Lookup(100)
	g := e.Group()
	if g == nil || len(g.Hops) != 2 || g.Hops[0].Labels[0] != 200 || g.Hops[0].Via != nh || &e.NextHops[0] != &g.Hops[0] {
		t.Fatalf("Lookup(100) = %+v group %+v, want the hops copied and unmapped", e, g)
	}
	if e, _ := ilm.Lookup(102); e.Group() != nil {
		t.Errorf("swap entry has a group %+v", e.Group())
	}
	var n [2]int
	for i := range 4096 {
		h := g.Select(uint32(i) << 20)
		n[h.Device[len(h.Device)-1]-'2']++
	}
	if n[0] != 1024 || n[1] != 3072 {
		t.Errorf("evenly spread hashes picked the hops %v times, want 1024 and 3072 (weights 1:3)", n)
	}
	if ilm.Entries()[0].Group() != g {
		t.Error("Entries()[0] lost its group")
	}
}

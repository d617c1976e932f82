package mpls_test

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/mpls"
)

func ftnRoute(prefix string, labels ...mpls.Label) mpls.FTNEntry {
	return mpls.FTNEntry{Prefix: netip.MustParsePrefix(prefix), Labels: labels}
}

func TestFTNLookup(t *testing.T) {
	ftn, err := mpls.NewFTN([]mpls.FTNEntry{
		ftnRoute("0.0.0.0/0", 16),
		ftnRoute("10.0.0.0/8", 100),
		ftnRoute("10.1.0.0/16", 101),
		ftnRoute("10.1.2.0/24", 102),
		ftnRoute("10.1.2.3/32", 103),
		ftnRoute("10.1.2.128/25", 104),
		ftnRoute("10.255.255.255/32", 105),
		ftnRoute("255.255.255.255/32", 106),
		ftnRoute("2001:db8::/32", 200),
		ftnRoute("2001:db8:1::/48", 201),
		ftnRoute("2001:db8:1::1/128", 202),
		ftnRoute("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128", 203),
		ftnRoute("8000::/1", 204),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		dst  string
		want mpls.Label // 0: no match
	}{
		{"1.2.3.4", 16}, // default route
		{"0.0.0.0", 16},
		{"9.255.255.255", 16},
		{"10.0.0.0", 100},
		{"10.0.255.255", 100},
		{"10.1.0.0", 101},
		{"10.1.1.255", 101},
		{"10.1.2.0", 102},
		{"10.1.2.2", 102},
		{"10.1.2.3", 103},
		{"10.1.2.4", 102},
		{"10.1.2.127", 102},
		{"10.1.2.128", 104},
		{"10.1.2.255", 104},
		{"10.1.3.0", 101},
		{"10.2.0.0", 100},
		{"10.255.255.254", 100},
		{"10.255.255.255", 105},
		{"11.0.0.0", 16},
		{"255.255.255.254", 16},
		{"255.255.255.255", 106},
		{"::ffff:10.1.2.3", 103}, // IPv4-mapped is looked up as IPv4
		{"::ffff:11.0.0.1", 16},
		{"2001:db8::1", 200},
		{"2001:db8:1::", 201},
		{"2001:db8:1::1", 202},
		{"2001:db8:1::2", 201},
		{"2001:db8:1:ffff:ffff:ffff:ffff:ffff", 201},
		{"2001:db8:2::", 200},
		{"2001:db9::", 0}, // no IPv6 default route
		{"::", 0},
		{"::1", 0},
		{"fe80::1%eth0", 204}, // zone ignored; fe80:: is in 8000::/1
		{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe", 204},
		{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 203},
	} {
		e, ok := ftn.Lookup(netip.MustParseAddr(tt.dst))
		switch {
		case tt.want == 0 && ok:
			t.Errorf("Lookup(%s) = %v (labels %v), want no match", tt.dst, e.Prefix, e.Labels)
		case tt.want != 0 && !ok:
			t.Errorf("Lookup(%s) = no match, want label %d", tt.dst, tt.want)
		case ok && e.Labels[0] != tt.want:
			t.Errorf("Lookup(%s) = %v label %d, want label %d", tt.dst, e.Prefix, e.Labels[0], tt.want)
		}
	}
	if _, ok := ftn.Lookup(netip.Addr{}); ok {
		t.Error("Lookup(zero Addr) = match, want none")
	}
	var nilFTN *mpls.FTN
	if _, ok := nilFTN.Lookup(netip.MustParseAddr("10.0.0.1")); ok || nilFTN.Len() != 0 {
		t.Error("nil FTN: Lookup matched or Len != 0, want an empty table")
	}
	if got := ftn.Len(); got != 13 {
		t.Errorf("Len = %d, want 13", got)
	}
}

func TestFTNIPv6DefaultRoute(t *testing.T) {
	ftn, err := mpls.NewFTN([]mpls.FTNEntry{ftnRoute("::/0", 60), ftnRoute("10.0.0.0/8", 40)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		dst  string
		want mpls.Label
	}{
		{"::", 60}, {"2001:db8::1", 60}, {"ffff::", 60},
		{"10.0.0.1", 40},
		{"::ffff:10.0.0.1", 40}, // mapped: IPv4 table
		{"11.0.0.1", 0},         // no IPv4 default: the IPv6 one does not cover IPv4
		{"::ffff:11.0.0.1", 0},
	} {
		e, ok := ftn.Lookup(netip.MustParseAddr(tt.dst))
		var got mpls.Label
		if ok {
			got = e.Labels[0]
		}
		if got != tt.want {
			t.Errorf("Lookup(%s) = label %d, want %d (0 = none)", tt.dst, got, tt.want)
		}
	}
}

// naiveLPM is the oracle: scan every entry, keep the longest match.
func naiveLPM(entries []mpls.FTNEntry, dst netip.Addr) (int, bool) {
	dst = dst.Unmap()
	best, bits := -1, -1
	for i, e := range entries {
		if e.Prefix.Contains(dst) && e.Prefix.Bits() > bits {
			best, bits = i, e.Prefix.Bits()
		}
	}
	return best, best >= 0
}

// TestFTNRandomAgainstNaive compares the interval-based LPM with a linear
// scan over random, heavily overlapping prefix sets.
func TestFTNRandomAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	randAddr := func(v6 bool) netip.Addr {
		if v6 {
			var b [16]byte
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			// Concentrate in one /16 so prefixes overlap.
			b[0], b[1] = 0x20, 0x01
			return netip.AddrFrom16(b)
		}
		return netip.AddrFrom4([4]byte{10, byte(rng.IntN(4)), byte(rng.Uint32()), byte(rng.Uint32())})
	}
	for round := range 20 {
		seen := map[netip.Prefix]bool{}
		var entries []mpls.FTNEntry
		for len(entries) < 200 {
			v6 := rng.IntN(2) == 0
			var p netip.Prefix
			if v6 {
				p = netip.PrefixFrom(randAddr(true), rng.IntN(129)).Masked()
			} else {
				p = netip.PrefixFrom(randAddr(false), rng.IntN(33)).Masked()
			}
			if seen[p] {
				continue
			}
			seen[p] = true
			entries = append(entries, mpls.FTNEntry{Prefix: p, Labels: []mpls.Label{mpls.Label(16 + len(entries))}})
		}
		ftn, err := mpls.NewFTN(entries)
		if err != nil {
			t.Fatal(err)
		}
		probe := func(dst netip.Addr) {
			want, wantOK := naiveLPM(entries, dst)
			e, ok := ftn.Lookup(dst)
			if ok != wantOK || ok && e.Prefix != entries[want].Prefix {
				var got, exp netip.Prefix
				if ok {
					got = e.Prefix
				}
				if wantOK {
					exp = entries[want].Prefix
				}
				t.Fatalf("round %d: Lookup(%s) = %v (%v), want %v (%v)", round, dst, got, ok, exp, wantOK)
			}
		}
		for range 2000 {
			probe(randAddr(rng.IntN(2) == 0))
		}
		// Probe each prefix's first and last address and their neighbours.
		for _, e := range entries {
			first := e.Prefix.Addr()
			last := lastAddr(e.Prefix)
			for _, a := range []netip.Addr{first, first.Prev(), last, last.Next()} {
				if a.IsValid() {
					probe(a)
				}
			}
		}
	}
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func TestFTNCopiesInput(t *testing.T) {
	in := []mpls.FTNEntry{ftnRoute("10.0.0.0/8", 100, 200)}
	in[0].NextHop = netip.MustParseAddr("::ffff:172.16.20.21")
	ftn, err := mpls.NewFTN(in)
	if err != nil {
		t.Fatal(err)
	}
	in[0].Labels[0] = 999
	in[0].Prefix = netip.MustParsePrefix("11.0.0.0/8")
	e, ok := ftn.Lookup(netip.MustParseAddr("10.0.0.1"))
	if !ok || e.Labels[0] != 100 {
		t.Fatalf("after changing the input, Lookup = %+v, %v; want labels 100/200", e, ok)
	}
	if want := netip.MustParseAddr("172.16.20.21"); e.NextHop != want {
		t.Errorf("NextHop = %v, want %v (unmapped)", e.NextHop, want)
	}
	if got := e.LabelOverhead(); got != 8 {
		t.Errorf("LabelOverhead = %d, want 8", got)
	}
	if got := ftn.Entries(); len(got) != 1 || got[0].Prefix.String() != "10.0.0.0/8" {
		t.Errorf("Entries = %+v, want the one 10.0.0.0/8 entry", got)
	}
}

func TestNewFTNErrors(t *testing.T) {
	good := ftnRoute("10.0.0.0/8", 100)
	seventeen := make([]mpls.Label, 17)
	for i := range seventeen {
		seventeen[i] = 100
	}
	for _, tt := range []struct {
		name     string
		entries  []mpls.FTNEntry
		sentinel error // nil: no sentinel, just a description
		msg      string
	}{
		{
			name: "implicit null", entries: []mpls.FTNEntry{good, ftnRoute("10.1.0.0/16", 100, mpls.LabelImplicitNull)},
			sentinel: mpls.ErrReservedLabel,
			msg:      "mpls: FTN entry 1 (10.1.0.0/16): mpls: reserved label 3 (implicit-null) at stack offset 4: implicit null is signalled, never pushed: leave the label out (penultimate hop popping)",
		},
		{
			name: "label over 20 bits", entries: []mpls.FTNEntry{ftnRoute("10.0.0.0/8", 1<<20)},
			sentinel: mpls.ErrLabelRange,
			msg:      "mpls: FTN entry 0 (10.0.0.0/8): mpls: label 1048576 at stack offset 0 does not fit in 20 bits (max 1048575)",
		},
		{
			name: "too many labels", entries: []mpls.FTNEntry{ftnRoute("10.0.0.0/8", seventeen...)},
			sentinel: mpls.ErrTooDeep,
			msg:      "mpls: FTN entry 0 (10.0.0.0/8): mpls: label stack deeper than 16 entries: entry 17 at offset 64",
		},
		{
			name: "no labels", entries: []mpls.FTNEntry{ftnRoute("10.0.0.0/8")},
			msg: "mpls: FTN entry 0 (10.0.0.0/8): no labels: an FTN entry pushes at least one label",
		},
		{
			name: "host bits", entries: []mpls.FTNEntry{ftnRoute("10.0.0.1/8", 100)},
			msg: "mpls: FTN entry 0 (10.0.0.1/8): prefix has host bits set: did you mean 10.0.0.0/8?",
		},
		{
			name: "v4-mapped", entries: []mpls.FTNEntry{ftnRoute("::ffff:10.0.0.0/104", 100)},
			msg: "mpls: FTN entry 0 (::ffff:10.0.0.0/104): IPv4-mapped prefix: write it as 10.0.0.0/8",
		},
		{
			name: "duplicate", entries: []mpls.FTNEntry{good, ftnRoute("10.1.0.0/16", 1), good},
			msg: "mpls: FTN entry 2 (10.0.0.0/8): duplicate of entry 0",
		},
		{
			name: "invalid prefix", entries: []mpls.FTNEntry{{Labels: []mpls.Label{100}}},
			msg: "mpls: FTN entry 0 (invalid Prefix): invalid prefix",
		},
		{
			name: "IPv6 MTU", entries: []mpls.FTNEntry{{Prefix: netip.MustParsePrefix("2001:db8::/32"), Labels: []mpls.Label{100}, MTU: 1279}},
			msg: "mpls: FTN entry 0 (2001:db8::/32): MTU 1279 below the IP minimum 1280",
		},
		{
			name: "IPv4 MTU", entries: []mpls.FTNEntry{{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Labels: []mpls.Label{100}, MTU: 67}},
			msg: "mpls: FTN entry 0 (10.0.0.0/8): MTU 67 below the IP minimum 68",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ftn, err := mpls.NewFTN(tt.entries)
			if err == nil {
				t.Fatalf("NewFTN = %v, nil; want an error", ftn)
			}
			var te *mpls.TableError
			if !errors.As(err, &te) || te.Table != "FTN" {
				t.Errorf("err = %#v, want *TableError{Table: FTN}", err)
			}
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Errorf("errors.Is(err, %v) = false, want true", tt.sentinel)
			}
			if got := err.Error(); got != tt.msg {
				t.Errorf("err.Error() =\n%q, want\n%q", got, tt.msg)
			}
		})
	}
	// Explicit nulls, router alert, ELI etc. may be pushed (RFC 4182).
	if _, err := mpls.NewFTN([]mpls.FTNEntry{ftnRoute("10.0.0.0/8", 100, mpls.LabelIPv4ExplicitNull)}); err != nil {
		t.Errorf("NewFTN(100/0) err = %v, want nil", err)
	}
	if _, err := mpls.NewFTN([]mpls.FTNEntry{ftnRoute("10.0.0.0/8", mpls.MaxLabel)}); err != nil {
		t.Errorf("NewFTN(label 2^20-1) err = %v, want nil", err)
	}
	if !strings.Contains(mpls.ErrReservedLabel.Error(), "reserved") {
		t.Errorf("ErrReservedLabel text %q does not say reserved", mpls.ErrReservedLabel)
	}
}

func TestFTNLookupNoAlloc(t *testing.T) {
	ftn, err := mpls.NewFTN(benchRoutes(1000))
	if err != nil {
		t.Fatal(err)
	}
	v4, v6 := netip.MustParseAddr("10.3.7.9"), netip.MustParseAddr("2001:db8:3:7::9")
	if allocs := testing.AllocsPerRun(100, func() {
		ftn.Lookup(v4)
		ftn.Lookup(v6)
	}); allocs != 0 {
		t.Errorf("FTN.Lookup allocs = %v, want 0", allocs)
	}
}

package mpls_test

import (
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/mpls"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseStack(t *testing.T) {
	for _, tt := range []struct {
		name     string
		hex      string
		maxDepth int
		want     []mpls.Entry
		wantN    int
	}{
		{
			name: "one entry",
			// 00064 1 40: label 100, S, TTL 64; then an IPv4 nibble
			hex:  "00064140 4500",
			want: []mpls.Entry{{Label: 100, S: true, TTL: 64}}, wantN: 4,
		},
		{
			name: "three entries",
			// 100 TTL 64 / 200 TC 2 TTL 63 / 300 S TTL 62; payload after
			hex: "00064040 000c843f 0012c13e 6000",
			want: []mpls.Entry{
				{Label: 100, TTL: 64}, {Label: 200, TC: 2, TTL: 63}, {Label: 300, S: true, TTL: 62},
			},
			wantN: 12,
		},
		{
			name: "S on first entry stops parsing",
			hex:  "00064140 000c8040",
			want: []mpls.Entry{{Label: 100, S: true, TTL: 64}}, wantN: 4,
		},
		{
			name:     "exactly maxDepth",
			hex:      "00064040 000c8140",
			maxDepth: 2,
			want:     []mpls.Entry{{Label: 100, TTL: 64}, {Label: 200, S: true, TTL: 64}}, wantN: 8,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := mustHex(t, tt.hex)
			got, n, err := mpls.ParseStack(b, tt.maxDepth, nil)
			if err != nil {
				t.Fatalf("ParseStack(%x) err = %v", b, err)
			}
			if n != tt.wantN {
				t.Errorf("n = %d, want %d", n, tt.wantN)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("entries = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseStack16(t *testing.T) {
	b := make([]byte, 16*4)
	for i := range 16 {
		mpls.Entry{Label: mpls.Label(1000 + i), S: i == 15, TTL: 64}.Encode(b[4*i:])
	}
	got, n, err := mpls.ParseStack(b, 0, make([]mpls.Entry, 0, 16))
	if err != nil || n != 64 || len(got) != 16 {
		t.Fatalf("ParseStack(16 entries) = %d entries, n %d, err %v; want 16, 64, nil", len(got), n, err)
	}
	for i, e := range got {
		if e.Label != mpls.Label(1000+i) {
			t.Errorf("entry %d label = %d, want %d", i, e.Label, 1000+i)
		}
	}
	// One more entry than the default limit of 16.
	b = make([]byte, 17*4)
	for i := range 17 {
		mpls.Entry{Label: 1000, S: i == 16, TTL: 64}.Encode(b[4*i:])
	}
	_, _, err = mpls.ParseStack(b, 0, nil)
	var te *mpls.TooDeepError
	if !errors.As(err, &te) || te.Max != mpls.DefaultMaxDepth || te.Offset != 64 {
		t.Errorf("ParseStack(17 entries, default max) err = %v, want *TooDeepError{Offset: 64, Max: 16}", err)
	}
}

func TestParseStackErrors(t *testing.T) {
	for _, tt := range []struct {
		name     string
		hex      string
		maxDepth int
		sentinel error
		check    func(t *testing.T, err error)
		msg      string
		entries  int
	}{
		{
			name: "empty", hex: "", sentinel: mpls.ErrTruncated,
			check: func(t *testing.T, err error) {
				var e *mpls.TruncatedError
				if !errors.As(err, &e) || e.Offset != 0 || e.Have != 0 || e.Need != 4 {
					t.Errorf("err = %#v, want *TruncatedError{Offset 0, Have 0, Need 4}", err)
				}
			},
			msg: "mpls: truncated label stack entry at offset 0: have 0 bytes, need 4",
		},
		{
			name: "truncated first entry", hex: "000641", sentinel: mpls.ErrTruncated,
			check: func(t *testing.T, err error) {
				var e *mpls.TruncatedError
				if !errors.As(err, &e) || e.Offset != 0 || e.Have != 3 {
					t.Errorf("err = %#v, want *TruncatedError{Offset 0, Have 3}", err)
				}
			},
			msg: "mpls: truncated label stack entry at offset 0: have 3 bytes, need 4",
		},
		{
			name: "truncated mid second entry", hex: "00064040 0006", sentinel: mpls.ErrTruncated,
			check: func(t *testing.T, err error) {
				var e *mpls.TruncatedError
				if !errors.As(err, &e) || e.Offset != 4 || e.Have != 2 {
					t.Errorf("err = %#v, want *TruncatedError{Offset 4, Have 2}", err)
				}
			},
			msg:     "mpls: truncated label stack entry at offset 4: have 2 bytes, need 4",
			entries: 1,
		},
		{
			name: "no bottom of stack", hex: "00064040 000c8040", sentinel: mpls.ErrNoBottomOfStack,
			check: func(t *testing.T, err error) {
				var e *mpls.NoBottomOfStackError
				if !errors.As(err, &e) || e.Offset != 8 || e.Entries != 2 {
					t.Errorf("err = %#v, want *NoBottomOfStackError{Offset 8, Entries 2}", err)
				}
			},
			msg:     "mpls: no bottom-of-stack bit: 2 entries with S=0, input ends at offset 8",
			entries: 2,
		},
		{
			name: "too deep", hex: "00064040 000c8040 0012c140", maxDepth: 2, sentinel: mpls.ErrTooDeep,
			check: func(t *testing.T, err error) {
				var e *mpls.TooDeepError
				if !errors.As(err, &e) || e.Offset != 8 || e.Max != 2 {
					t.Errorf("err = %#v, want *TooDeepError{Offset 8, Max 2}", err)
				}
			},
			msg:     "mpls: label stack deeper than 2 entries: entry 3 at offset 8",
			entries: 2,
		},
		{
			// Reaching the limit with input left but shorter than an entry
			// is reported as too deep: the limit is hit first.
			name: "too deep beats truncated", hex: "00064040 00", maxDepth: 1, sentinel: mpls.ErrTooDeep,
			check: func(t *testing.T, err error) {
				var e *mpls.TooDeepError
				if !errors.As(err, &e) || e.Offset != 4 {
					t.Errorf("err = %#v, want *TooDeepError{Offset 4}", err)
				}
			},
			msg:     "mpls: label stack deeper than 1 entries: entry 2 at offset 4",
			entries: 1,
		},
		{
			// Input ending exactly at the limit without S is missing its
			// bottom, not too deep.
			name: "no bottom at the limit", hex: "00064040", maxDepth: 1, sentinel: mpls.ErrNoBottomOfStack,
			check: func(t *testing.T, err error) {
				var e *mpls.NoBottomOfStackError
				if !errors.As(err, &e) || e.Offset != 4 || e.Entries != 1 {
					t.Errorf("err = %#v, want *NoBottomOfStackError{Offset 4, Entries 1}", err)
				}
			},
			msg:     "mpls: no bottom-of-stack bit: 1 entries with S=0, input ends at offset 4",
			entries: 1,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := mustHex(t, tt.hex)
			entries, n, err := mpls.ParseStack(b, tt.maxDepth, nil)
			if err == nil {
				t.Fatalf("ParseStack(%x) err = nil, want %v", b, tt.sentinel)
			}
			if !errors.Is(err, tt.sentinel) {
				t.Errorf("errors.Is(%v, %v) = false, want true", err, tt.sentinel)
			}
			tt.check(t, err)
			if got := err.Error(); got != tt.msg {
				t.Errorf("err.Error() = %q, want %q", got, tt.msg)
			}
			if len(entries) != tt.entries {
				t.Errorf("len(entries) = %d, want %d", len(entries), tt.entries)
			}
			if n != 4*len(entries) {
				t.Errorf("n = %d, want %d (entries read before the error)", n, 4*len(entries))
			}
		})
	}
}

func TestParseStackNoAlloc(t *testing.T) {
	b := mustHex(t, "00064040 000c843f 0012c13e 45")
	dst := make([]mpls.Entry, 0, mpls.DefaultMaxDepth)
	if allocs := testing.AllocsPerRun(100, func() {
		_, _, _ = mpls.ParseStack(b, 0, dst)
	}); allocs != 0 {
		t.Errorf("ParseStack allocs = %v, want 0", allocs)
	}
}

func TestStackPushPopPeek(t *testing.T) {
	var s mpls.Stack
	if _, ok := s.Peek(); ok {
		t.Error("Peek on empty stack: ok = true, want false")
	}
	if _, ok := s.Pop(); ok {
		t.Error("Pop on empty stack: ok = true, want false")
	}
	// Push the bottom first: 300, then 200, then 100 on top.
	for _, l := range []mpls.Label{300, 200, 100} {
		if err := s.Push(mpls.Entry{Label: l, TTL: 64, S: true}); err != nil {
			t.Fatalf("Push(%d): %v", l, err)
		}
	}
	want := mpls.Stack{{Label: 100, TTL: 64}, {Label: 200, TTL: 64}, {Label: 300, S: true, TTL: 64}}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("stack = %+v, want %+v", s, want)
	}
	b := make([]byte, s.EncodedLen())
	if n := s.Encode(b); n != 12 {
		t.Errorf("Encode n = %d, want 12", n)
	}
	parsed, _, err := mpls.ParseStack(b, 0, nil)
	if err != nil || !reflect.DeepEqual(mpls.Stack(parsed), s) {
		t.Errorf("ParseStack(Encode(s)) = %+v, %v; want %+v", parsed, err, s)
	}
	if top, ok := s.Peek(); !ok || top.Label != 100 {
		t.Errorf("Peek = %+v, %v; want label 100", top, ok)
	}
	for _, wantL := range []mpls.Label{100, 200, 300} {
		e, ok := s.Pop()
		if !ok || e.Label != wantL {
			t.Errorf("Pop = %+v, %v; want label %d", e, ok, wantL)
		}
	}
	if s.Len() != 0 {
		t.Errorf("Len after popping all = %d, want 0", s.Len())
	}
	// Capacity is kept: push/pop cycles do not allocate.
	if allocs := testing.AllocsPerRun(100, func() {
		_ = s.Push(mpls.Entry{Label: 16})
		_ = s.Push(mpls.Entry{Label: 17})
		s.Pop()
		s.Pop()
	}); allocs != 0 {
		t.Errorf("Push/Pop allocs = %v, want 0", allocs)
	}
}

func TestStackPushRejects(t *testing.T) {
	var s mpls.Stack
	err := s.Push(mpls.Entry{Label: mpls.LabelImplicitNull})
	if !errors.Is(err, mpls.ErrReservedLabel) {
		t.Errorf("Push(implicit null) err = %v, want ErrReservedLabel", err)
	}
	err = s.Push(mpls.Entry{Label: mpls.MaxLabel + 1})
	if !errors.Is(err, mpls.ErrLabelRange) {
		t.Errorf("Push(2^20) err = %v, want ErrLabelRange", err)
	}
	if s.Len() != 0 {
		t.Errorf("Len after rejected pushes = %d, want 0", s.Len())
	}
	// Explicit nulls may be pushed anywhere in the stack (RFC 4182).
	if err := s.Push(mpls.Entry{Label: mpls.LabelIPv6ExplicitNull}); err != nil {
		t.Errorf("Push(IPv6 explicit null) err = %v, want nil", err)
	}
}

package mpls_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/mplsnode/mplsnode/mpls"
)

// FuzzParseLabelStack checks that ParseStack never panics, never claims
// bytes beyond its input, reports errors with offsets inside the input, and
// that accepted entries re-encode to exactly the bytes consumed. Seeds live
// in testdata/fuzz/FuzzParseLabelStack.
func FuzzParseLabelStack(f *testing.F) {
	f.Add([]byte{0x00, 0x06, 0x41, 0x40, 0x45})
	f.Fuzz(func(t *testing.T, b []byte) {
		// Cap the capacity so any read past len(b) would also be past cap.
		in := b[:len(b):len(b)]
		orig := bytes.Clone(in)
		for _, maxDepth := range []int{0, 1, 3} {
			limit := maxDepth
			if limit == 0 {
				limit = mpls.DefaultMaxDepth
			}
			entries, n, err := mpls.ParseStack(in, maxDepth, make([]mpls.Entry, 0, 2))
			if !bytes.Equal(in, orig) {
				t.Fatal("ParseStack modified its input")
			}
			if n < 0 || n > len(in) || n != mpls.EntryLen*len(entries) {
				t.Fatalf("n = %d with %d entries and %d input bytes", n, len(entries), len(in))
			}
			if len(entries) > limit {
				t.Fatalf("%d entries, limit %d", len(entries), limit)
			}
			for i, e := range entries[:max(0, len(entries)-1)] {
				if e.S {
					t.Fatalf("entry %d of %d has S set", i, len(entries))
				}
			}
			if err != nil {
				checkParseError(t, err, len(in), n)
				continue
			}
			if len(entries) == 0 || !entries[len(entries)-1].S {
				t.Fatalf("accepted %d entries without a bottom entry", len(entries))
			}
			re := make([]byte, n)
			for i, e := range entries {
				e.Encode(re[mpls.EntryLen*i:])
			}
			if !bytes.Equal(re, in[:n]) {
				t.Fatalf("re-encoded %x, consumed %x", re, in[:n])
			}
		}
	})
}

func checkParseError(t *testing.T, err error, inLen, n int) {
	t.Helper()
	var (
		te *mpls.TruncatedError
		ne *mpls.NoBottomOfStackError
		de *mpls.TooDeepError
	)
	switch {
	case errors.As(err, &te):
		if te.Offset != n || te.Have != inLen-n || te.Have >= mpls.EntryLen || !errors.Is(err, mpls.ErrTruncated) {
			t.Fatalf("%v: offset %d have %d, input %d consumed %d", err, te.Offset, te.Have, inLen, n)
		}
	case errors.As(err, &ne):
		if ne.Offset != inLen || n != inLen || !errors.Is(err, mpls.ErrNoBottomOfStack) {
			t.Fatalf("%v: offset %d, input %d consumed %d", err, ne.Offset, inLen, n)
		}
	case errors.As(err, &de):
		if de.Offset != n || de.Offset >= inLen || !errors.Is(err, mpls.ErrTooDeep) {
			t.Fatalf("%v: offset %d, input %d consumed %d", err, de.Offset, inLen, n)
		}
	default:
		t.Fatalf("unexpected error type %T: %v", err, err)
	}
}

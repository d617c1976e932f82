package enum

import (
	"slices"
	"testing"
)

type small uint8

type signed int

var names = []string{"zero", "one", "two"}

func TestName(t *testing.T) {
	for v, want := range map[small]string{0: "zero", 2: "two", 3: "unknown", 255: "unknown"} {
		if got := Name(names, v); got != want {
			t.Errorf("Name(%d) = %q, want %q", v, got, want)
		}
	}
	if got := Name(names, signed(-1)); got != "unknown" {
		t.Errorf("Name(-1) = %q, want unknown", got)
	}
}

func TestFormat(t *testing.T) {
	for v, want := range map[signed]string{1: "one", 3: "kind(3)", -1: "kind(-1)"} {
		if got := Format(names, v, "kind"); got != want {
			t.Errorf("Format(%d) = %q, want %q", v, got, want)
		}
	}
	if got := Format(names, uint32(1<<32-1), "reason"); got != "reason(4294967295)" {
		t.Errorf("Format(max uint32) = %q", got)
	}
}

func TestAt(t *testing.T) {
	counts := []uint64{7, 8}
	if got := At(counts, small(1)); got != 8 {
		t.Errorf("At(1) = %d, want 8", got)
	}
	if got := At(counts, small(2)); got != 0 {
		t.Errorf("At(2) = %d, want 0 past the table", got)
	}
	if got := At(counts, signed(-1)); got != 0 {
		t.Errorf("At(-1) = %d, want 0", got)
	}
}

func TestRange(t *testing.T) {
	if got, want := Range(small(1), small(4)), []small{1, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("Range(1, 4) = %v, want %v", got, want)
	}
	if got := Range(small(0), small(0)); len(got) != 0 {
		t.Errorf("Range(0, 0) = %v, want none", got)
	}
	if got := Range(small(0), small(255)); len(got) != 255 || got[254] != 254 {
		t.Errorf("Range(0, 255): %d values, last %v", len(got), got[len(got)-1])
	}
}

func TestNameAllocatesNothing(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = Name(names, small(1)); _ = Format(names, small(2), "x") }); n != 0 {
		t.Errorf("Name and Format in range allocate %v times", n)
	}
}

package lsrrate

import (
	"slices"
	"strings"
	"testing"
)

// TestParseCPUList checks CPU lists in taskset(1)'s words and their
// formatting back. Planted bug: a range's upper end excluded ("0-3" gave
// 0,1,2).
func TestParseCPUList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		out  string
	}{
		{"0", []int{0}, "0"},
		{"1", []int{1}, "1"},
		{"0-3", []int{0, 1, 2, 3}, "0-3"},
		{"3,1", []int{1, 3}, "1,3"},
		{"0-1, 4, 6-7, 1", []int{0, 1, 4, 6, 7}, "0-1,4,6-7"},
		{"5-5", []int{5}, "5"},
	} {
		got, err := ParseCPUList(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseCPUList(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			continue
		}
		if s := cpuListString(got); s != tc.out {
			t.Errorf("cpuListString(%v) = %q, want %q", got, s, tc.out)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"", "is empty"},
		{"x", `"x" is not a CPU number`},
		{"-1", `"-1" is not a CPU number`},
		{"3-1", `"3-1" is not a CPU range`},
		{"0-", `"0-" is not a CPU range`},
		{"0,,1", `"" is not a CPU number`},
		{"1024", "CPU 1024: want below 1024"},
	} {
		if got, err := ParseCPUList(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseCPUList(%q) = %v, %v; want an error containing %q", tc.in, got, err, tc.want)
		}
	}
}

package planetest

import (
	"fmt"
	"slices"
	"testing"
)

// Mode is one way the forwarding plane runs.
type Mode struct {
	Name string
	XDP  bool
}

// Modes are the two modes every forwarding-plane e2e test runs in: the
// label switch in userspace, and its XDP program.
var Modes = []Mode{{"mode=userspace", false}, {"mode=xdp", true}}

// Conf is the config line of the mode (a forwarding node's default is
// auto: userspace mode says off).
func (m Mode) Conf() string {
	if m.XDP {
		return "set forward xdp on\n"
	}
	return "set forward xdp off\n"
}

// Result is what one mode put on the wire and counted.
type Result struct {
	Frames map[string][][]byte          // capture name -> frames
	Wire   map[string][]string          // capture name -> decoded frames
	Counts map[string]map[string]uint64 // node name -> counter deltas
}

// CompareModes fails t unless every mode's result (by Mode.Name) equals
// the first mode's: the same decoded frames on every capture and the
// same counter moves on every node.
func CompareModes(t *testing.T, results map[string]*Result) {
	t.Helper()
	base := results[Modes[0].Name]
	for _, m := range Modes[1:] {
		r := results[m.Name]
		if base == nil || r == nil {
			// A mode left out by -run, or one that failed (and said
			// why): nothing to compare.
			return
		}
		for name, want := range base.Wire {
			if got := r.Wire[name]; !slices.Equal(got, want) {
				t.Errorf("%s: %s: frames differ from %s:\n got  %q\n want %q", m.Name, name, Modes[0].Name, got, want)
			}
		}
		for name, want := range base.Counts {
			if got := r.Counts[name]; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: %s: counters moved by %v, %s by %v", m.Name, name, got, Modes[0].Name, want)
			}
		}
	}
}

// NewResult returns an empty result.
func NewResult() *Result {
	return &Result{Frames: map[string][][]byte{}, Wire: map[string][]string{}, Counts: map[string]map[string]uint64{}}
}

// Add adds r's captures and counters to res, each name under prefix.
func (res *Result) Add(prefix string, r *Result) {
	for k, v := range r.Frames {
		res.Frames[prefix+k] = v
	}
	for k, v := range r.Wire {
		res.Wire[prefix+k] = v
	}
	for k, v := range r.Counts {
		res.Counts[prefix+k] = v
	}
}

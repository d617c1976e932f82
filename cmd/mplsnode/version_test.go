package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestVersion builds the binary and checks that `mplsnode --version` and
// `mplsnode version` print what the Go toolchain recorded in it, read back
// with `go version -m` (the oracle): the module version and, when the
// build stamped one, the VCS revision. Planted bug: a version command that
// prints a constant fails on the revision (or on "(devel)" vs a tag).
func TestVersion(t *testing.T) {
	bin := buildBinary(t)
	meta, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	version, revision := "", "unknown"
	for _, line := range strings.Split(string(meta), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "mod":
			version = f[2]
		case len(f) >= 2 && f[0] == "build" && strings.HasPrefix(f[1], "vcs.revision="):
			revision = strings.TrimPrefix(f[1], "vcs.revision=")
		}
	}
	if version == "" {
		t.Fatalf("go version -m names no main module version:\n%s", meta)
	}
	want := "mplsnode github.com/mplsnode/mplsnode " + version + " (revision " + revision
	for _, arg := range []string{"--version", "version"} {
		out, err := exec.Command(bin, arg).Output()
		if err != nil || !strings.HasPrefix(string(out), want) {
			t.Errorf("mplsnode %s: %v, %q; want it to start with %q", arg, err, out, want)
		}
	}
}

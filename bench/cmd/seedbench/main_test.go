package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestHelpAndUsageErrors(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-h"}, &out, &errb); code != 0 {
		t.Errorf("-h: exit %d, want 0", code)
	}
	for _, want := range []string{"usage: seedbench", "-rounds", "-configs", "Needs root", "5/3 >= 5"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-h output lacks %q:\n%s", want, out.String())
		}
	}
	for _, args := range [][]string{{"-configs", "12"}, {"-rounds"}, {"stray"}} {
		errb.Reset()
		if code := run(args, &out, &errb); code != 2 {
			t.Errorf("%q: exit %d, want 2 (stderr %q)", args, code, errb.String())
		}
	}
}

// TestNeedsRoot runs the command as an unprivileged user: it must say that
// it needs root and why, and exit 2.
func TestNeedsRoot(t *testing.T) {
	var out, errb bytes.Buffer
	if os.Geteuid() != 0 {
		if code := run(nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), "needs root") {
			t.Errorf("as uid %d: exit %d, stderr %q; want 2 and a needs-root message", os.Geteuid(), code, errb.String())
		}
		return
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("as root this test drops privileges with setpriv (util-linux), which is missing")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "seedbench")
	if b, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, b)
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin, "-rounds", "1")
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 {
		t.Fatalf("unprivileged run: %v, want exit 2; stderr %q", err, errb.String())
	}
	for _, want := range []string{"needs root", "network namespaces", "AF_PACKET"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q: %q", want, errb.String())
		}
	}
}

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/netns"
)

// TestLinkMTULargerThanInterface gives a link `mtu 9000` on a veth of MTU
// 1500: check (run where the interface exists) and run both reject it at
// the mtu value with exit code 2, and run opens no link ("node started"
// never appears). Planted bug: without node.CheckInterfaces both accepted
// it (check said ok, run started forwarding with frames the veth drops).
func TestLinkMTULargerThanInterface(t *testing.T) {
	netns.SkipUnlessRoot(t)
	bin := buildBinary(t)
	a, b := netns.New(t, "mtua"), netns.New(t, "mtub")
	va, _ := netns.VethPair(t, a, b)
	conf := filepath.Join(t.TempDir(), "big.conf")
	text := fmt.Sprintf("link add %s type afpacket mtu 9000\naddr add 10.1.0.1/24 dev %s\n", va, va)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	col := len("link add "+va+" type afpacket mtu ") + 1
	want := fmt.Sprintf("%s:1:%d: link %s: mtu 9000 is larger than the interface's MTU 1500", conf, col, va)
	for _, args := range [][]string{
		{"check", "-c", conf},
		{"run", "-c", conf, "--control-socket", ""},
	} {
		// A run that accepts the file would run until killed: 20 s.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", a.Name(), bin}, args...)...)
		out, err := cmd.CombinedOutput()
		cancel()
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != exitUsage || !strings.Contains(string(out), want) {
			t.Errorf("mplsnode %s: %v\n%s\nwant exit code 2 and %q", args[0], err, out, want)
		}
		if strings.Contains(string(out), "node started") {
			t.Errorf("mplsnode %s opened its links:\n%s", args[0], out)
		}
	}
	// The same file passes where the interface does not exist (check runs
	// anywhere), and an mtu within the interface's passes everywhere.
	if out, err := exec.Command(bin, "check", "-c", conf).CombinedOutput(); err != nil {
		t.Errorf("check outside the namespace: %v: %s", err, out)
	}
	if err := os.WriteFile(conf, []byte(strings.Replace(text, "9000", "1500", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := a.Exec(bin, "check", "-c", conf); err != nil {
		t.Errorf("mtu 1500 on a 1500 veth: %v: %s", err, out)
	}
}

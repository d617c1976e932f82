package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/bench"
	"github.com/mplsnode/mplsnode/internal/testkit/netns"
)

// gvisorClientEnv makes the test binary act as configuration 3's client
// (bench.GVisorClientMain) when the bench re-executes it in ns0.
const gvisorClientEnv = "SEEDBENCH_TEST_GVISOR_CLIENT"

func TestMain(m *testing.M) {
	if os.Getenv(gvisorClientEnv) == "1" {
		os.Exit(bench.GVisorClientMain(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestBenchRoot runs the bench as make bench does, shortened: one round of
// 1-second runs of configurations 1 (kernel), 3 (stock gVisor, through the
// re-executed client) and 5 (the headline), with the mplsnode binary built
// from this tree. The output files must exist, every run must carry a
// non-zero throughput and process accounting, and no namespace may remain.
func TestBenchRoot(t *testing.T) {
	netns.SkipUnlessRoot(t)
	if _, err := exec.LookPath("ss"); err != nil {
		t.Skip("needs ss from iproute2")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "mplsnode")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/mplsnode/mplsnode/cmd/mplsnode").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	// Group 5 holds 5, 5x (AF_XDP links) and 5k (the LSR in XDP mode).
	sel, err := bench.ParseSelection("1,3,5", bench.Configs())
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("mpbt%d-", os.Getpid())
	out := filepath.Join(dir, "results")
	var progress strings.Builder
	res, err := bench.Bench(context.Background(), bench.Options{
		Bin: bin, Rounds: 1, Seconds: 1, Select: sel, OutDir: out,
		GVisorCmd: []string{os.Args[0]}, GVisorEnv: []string{gvisorClientEnv + "=1"},
		Progress: &progress, NSPrefix: prefix,
	})
	if err != nil {
		t.Fatalf("Bench: %v\n%s", err, progress.String())
	}
	if list, err := exec.Command("ip", "netns", "list").Output(); err != nil || strings.Contains(string(list), prefix) {
		t.Errorf("namespaces left behind (%v):\n%s", err, list)
	}
	for _, name := range []string{bench.FileMarkdown, bench.FileJSON, bench.FilePNG, bench.FileSVG} {
		if fi, err := os.Stat(filepath.Join(out, name)); err != nil || fi.Size() == 0 {
			t.Errorf("output %s: %v (size %v)", name, err, fi)
		}
	}
	b, err := os.ReadFile(filepath.Join(out, bench.FileJSON))
	if err != nil {
		t.Fatal(err)
	}
	var doc bench.Results
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("results.json: %v", err)
	}
	// Group 5 holds 5 and its variants (5k, 5x, 5m, 5q).
	if n := len(sel.Filter(bench.Configs())); len(doc.Runs) != n || len(res.Runs) != n {
		t.Fatalf("results.json has %d runs, want %d\n%s", len(doc.Runs), n, progress.String())
	}
	for _, r := range doc.Runs {
		if !r.OK || r.Throughput <= 0 || r.Result == nil || r.Result.BytesSent == 0 {
			t.Errorf("run of %s: ok %v, throughput %v, error %q; want a non-zero throughput", r.Config, r.OK, r.Throughput, r.Error)
		}
		var cpu float64
		for _, p := range r.Procs {
			cpu += p.UserSeconds + p.SysSeconds
			if p.Mplsnode && p.PeakRSSKiB <= 0 {
				t.Errorf("run of %s: %s has no peak RSS", r.Config, p.Role)
			}
		}
		if cpu <= 0 {
			t.Errorf("run of %s: no CPU time accounted: %+v", r.Config, r.Procs)
		}
	}
	md, _ := os.ReadFile(filepath.Join(out, bench.FileMarkdown))
	if !strings.Contains(string(md), "| 5 | mplsnode ns0 -> mplsnode LSR ns1 (pop)") {
		t.Errorf("results.md lacks configuration 5's row:\n%s", md)
	}
}

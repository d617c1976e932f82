package bench_test

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/bench"
	"github.com/mplsnode/mplsnode/netperf"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
		ok   bool
	}{
		{nil, 0, false},
		{[]float64{7}, 7, true},
		{[]float64{3, 1, 2}, 2, true},
		{[]float64{4, 1, 3, 2}, 2.5, true},
		{[]float64{5, 5, 1, 9, 5}, 5, true},
	} {
		in := append([]float64(nil), tc.in...)
		got, ok := bench.Median(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Median(%v) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
		for i := range in {
			if in[i] != tc.in[i] {
				t.Errorf("Median(%v) modified its input", in)
			}
		}
	}
}

func TestMinMax(t *testing.T) {
	lo, hi, ok := bench.MinMax([]float64{3, -1, 8, 2})
	if lo != -1 || hi != 8 || !ok {
		t.Errorf("MinMax = %v, %v, %v; want -1, 8, true", lo, hi, ok)
	}
	if _, _, ok := bench.MinMax(nil); ok {
		t.Error("MinMax(nil) ok = true, want false")
	}
}

func TestParseSelection(t *testing.T) {
	cfgs := bench.Configs()
	for _, tc := range []struct {
		in   string
		want []string // selected row IDs, in order
		lsr  bool
	}{
		{"1,5,8", []string{"1", "5", "5x", "5m", "5q", "5u", "5k", "8a", "8b"}, false},
		{"5k", []string{"5k"}, false},
		{"6b, 9c", []string{"6b", "9c"}, false},
		{"9", []string{"9a", "9b", "9c", "9d", "9e", "9f", "9g", "9h", "9i", "9j", "9k"}, false},
		{"10", nil, true},
		{"5,10", []string{"5", "5x", "5m", "5q", "5u", "5k"}, true},
	} {
		sel, err := bench.ParseSelection(tc.in, cfgs)
		if err != nil {
			t.Errorf("ParseSelection(%q): %v", tc.in, err)
			continue
		}
		var got []string
		for _, c := range sel.Filter(cfgs) {
			got = append(got, c.ID)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("ParseSelection(%q) selects %v, want %v", tc.in, got, tc.want)
		}
		if sel.Has("10") != tc.lsr {
			t.Errorf("ParseSelection(%q).Has(10) = %v, want %v", tc.in, sel.Has("10"), tc.lsr)
		}
	}
	all, err := bench.ParseSelection("all", cfgs)
	if err != nil || len(all.Filter(cfgs)) != len(cfgs) || !all.Has("10") {
		t.Errorf("ParseSelection(all) = %v selecting %d, want every configuration (%d) and 10", err, len(all.Filter(cfgs)), len(cfgs))
	}
	for _, bad := range []string{"11", "0", "x", "1,,2", "6c"} {
		if _, err := bench.ParseSelection(bad, cfgs); err == nil {
			t.Errorf("ParseSelection(%q) = nil error, want one", bad)
		} else if !strings.Contains(err.Error(), "-configs") {
			t.Errorf("ParseSelection(%q) error %q does not name the flag", bad, err)
		}
	}
}

func TestConfigsUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range bench.Configs() {
		if seen[c.ID] {
			t.Errorf("configuration ID %s repeated", c.ID)
		}
		seen[c.ID] = true
		if c.Client == bench.ClientNode && c.NS0Conf == "" {
			t.Errorf("configuration %s runs mplsnode in ns0 without a config", c.ID)
		}
	}
	for g := 1; g < bench.LSRGroup; g++ {
		found := false
		for _, c := range bench.Configs() {
			found = found || c.Group == g
		}
		if !found {
			t.Errorf("no configuration for issue item %d", g)
		}
	}
}

// sample returns configurations 2..5 with runs whose figures are known.
func sample() ([]bench.Config, []bench.Run) {
	sel, _ := bench.ParseSelection("2,3,4,5", bench.Configs())
	var cfgs []bench.Config
	for _, c := range sel.Filter(bench.Configs()) {
		if c.ID == "5" || c.ID[0] != '5' { // 5's variants (5k, 5x, 5m, 5q): no runs in the sample
			cfgs = append(cfgs, c)
		}
	}
	proc := func(role string, mplsnode bool, u, s float64, rss int64) bench.ProcStats {
		return bench.ProcStats{Role: role, Mplsnode: mplsnode, UserSeconds: u, SysSeconds: s, PeakRSSKiB: rss}
	}
	var runs []bench.Run
	add := func(id string, round int, tput float64, procs ...bench.ProcStats) {
		runs = append(runs, bench.Run{Config: id, Round: round, OK: tput > 0, Throughput: tput, Units: "Mbit/s", Procs: procs})
	}
	add("2", 1, 1000, proc("ns0 client", false, 0.1, 1, 5000))
	add("2", 2, 3000, proc("ns0 client", false, 0.3, 3, 5000))
	add("2", 3, 2000, proc("ns0 client", false, 0.2, 2, 5000))
	add("3", 1, 100)
	add("3", 2, 0) // failed
	add("4", 1, 1600, proc("ns0 client", true, 1, 1, 30*1024))
	add("5", 1, 1500, proc("ns0 client", true, 1, 1, 20*1024), proc("ns1 lsr", true, 2, 2, 50*1024))
	add("5", 2, 1700, proc("ns0 client", true, 3, 1, 21*1024), proc("ns1 lsr", true, 4, 2, 70*1024))
	add("5", 0, 9999, proc("ns1 lsr", true, 9, 9, 99*1024)) // a profile run: not counted
	return cfgs, runs
}

func TestSummarize(t *testing.T) {
	cfgs, runs := sample()
	sums := bench.Summarize(cfgs, runs)
	if len(sums) != 4 {
		t.Fatalf("got %d summaries, want 4", len(sums))
	}
	s2 := sums[0]
	if s2.ID != "2" || s2.Runs != 3 || s2.Median != 2000 || s2.Min != 1000 || s2.Max != 3000 {
		t.Errorf("summary 2 = %+v, want 3 runs, median 2000, min 1000, max 3000", s2)
	}
	if len(s2.Procs) != 1 || s2.Procs[0].UserSeconds != 0.2 || s2.Procs[0].SysSeconds != 2 {
		t.Errorf("summary 2 procs = %+v, want median user 0.2 s, sys 2 s", s2.Procs)
	}
	if s2.PeakRSSKiB != 0 {
		t.Errorf("summary 2 mplsnode peak RSS = %d, want 0 (no mplsnode process)", s2.PeakRSSKiB)
	}
	if s3 := sums[1]; s3.Runs != 1 || s3.Failed != 1 || s3.Median != 100 {
		t.Errorf("summary 3 = %+v, want 1 run, 1 failed, median 100", s3)
	}
	s5 := sums[3]
	if s5.Runs != 2 || s5.Median != 1600 || s5.Max != 1700 {
		t.Errorf("summary 5 = %+v, want 2 runs (profile run excluded), median 1600, max 1700", s5)
	}
	if s5.PeakRSSKiB != 70*1024 {
		t.Errorf("summary 5 peak RSS = %d KiB, want %d", s5.PeakRSSKiB, 70*1024)
	}
	if len(s5.Procs) != 2 || s5.Procs[1].Role != "ns1 lsr" || s5.Procs[1].UserSeconds != 3 {
		t.Errorf("summary 5 procs = %+v, want ns1 lsr with median user 3 s", s5.Procs)
	}
}

func TestTargets(t *testing.T) {
	cfgs, runs := sample()
	sums := bench.Summarize(cfgs, runs)
	lsr := []bench.LSRResult{
		{Config: "mplsnode-swap", FrameSize: 64, PPS: 500},
		{Config: "kernel-ipfwd", FrameSize: 64, PPS: 1000},
		{Config: "mplsnode-swap", FrameSize: 1500, PPS: 300},
		{Config: "kernel-ipfwd", FrameSize: 1500, PPS: 200},
	}
	got := map[string]bench.Target{}
	for _, tg := range bench.Targets(sums, lsr) {
		got[tg.Name] = tg
	}
	check := func(name string, value float64, met bool) {
		t.Helper()
		tg, ok := got[name]
		if !ok {
			t.Errorf("no target %q in %v", name, got)
			return
		}
		if !tg.Available || math.Abs(tg.Value-value) > 1e-9 || tg.Met != met {
			t.Errorf("target %q = %+v, want value %v, met %v", name, tg, value, met)
		}
	}
	check("5/4 (labels cost nothing)", 1600.0/1600, true)
	check("5/3 (ahead of stock netstack)", 16, true)
	check("5/2 (ahead of the kernel segmenting per frame)", 0.8, false)
	check("LSR pps / kernel IP forwarding, 64 B", 0.5, false)
	check("LSR pps / kernel IP forwarding, 1500 B", 1.5, true)
	check("peak RSS of each mplsnode (MiB)", 70, false)

	// Without configuration 4 and the LSR rows those targets are not
	// available, and not met.
	sel, _ := bench.ParseSelection("2,3,5", bench.Configs())
	for _, tg := range bench.Targets(bench.Summarize(sel.Filter(bench.Configs()), runs), nil) {
		if strings.HasPrefix(tg.Name, "5/4") || strings.HasPrefix(tg.Name, "LSR") {
			if tg.Available || tg.Met {
				t.Errorf("target %q = %+v without its configurations, want unavailable", tg.Name, tg)
			}
			if !strings.Contains(tg.String(), "not measured") {
				t.Errorf("target %q renders as %q, want it to say not measured", tg.Name, tg.String())
			}
		}
	}
}

func sampleResults() *bench.Results {
	cfgs, runs := sample()
	res := &bench.Results{Started: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), Rounds: 3, Seconds: 5, Runs: runs,
		Host: bench.HostInfo{CPUs: 2, Kernel: "6.1"}}
	res.Summaries = bench.Summarize(cfgs, runs)
	res.LSR = []bench.LSRResult{{Config: "mplsnode-swap", FrameSize: 64, PPS: 123456, CPUSecondsPerMpkt: 1.5, Frames: 617280, OfferedPPS: 130000, Generator: "xdp"}}
	res.Targets = bench.Targets(res.Summaries, res.LSR)
	return res
}

func TestWriteMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := bench.WriteMarkdown(&b, sampleResults()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	var rows []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "| ") && strings.Contains(line, "Mbit/s") {
			rows = append(rows, line)
		}
	}
	if len(rows) != 4 {
		t.Fatalf("got %d configuration rows, want 4:\n%s", len(rows), out)
	}
	header := strings.Count(strings.Split(out, "\n")[2], "|")
	for _, r := range rows {
		if n := strings.Count(r, "|"); n != header {
			t.Errorf("row has %d cell separators, header %d: %s", n, header, r)
		}
	}
	for _, want := range []string{
		"| 2 | kernel -> kernel, plain IP, tso/gso off on virt01 | TCP_STREAM | 2000.0 | 1000.0-3000.0 | Mbit/s | 3 |",
		"| 1 (1 failed) |",
		"ns1 lsr 3.00/2.00",
		"| ns0 21.0 / ns1 70.0 MiB |",
		"| 10 | mplsnode-swap | 64 | 130000 | 123456 | 1.500 | 617280 |",
		"(bench/lsrrate: xdp generator in ns0,",
		"- [x] 5/3 (ahead of stock netstack) = 16.00 (want >= 5): met",
		"- [ ] 5/2 (ahead of the kernel segmenting per frame) = 0.80 (want >= 1): NOT met",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, out)
		}
	}
}

func TestWriteJSONShape(t *testing.T) {
	var b bytes.Buffer
	if err := bench.WriteJSON(&b, sampleResults()); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Rounds int `json:"rounds"`
		Runs   []struct {
			Config     string  `json:"config"`
			Round      int     `json:"round"`
			OK         bool    `json:"ok"`
			Throughput float64 `json:"throughput"`
			Procs      []struct {
				Role       string  `json:"role"`
				User       float64 `json:"user_s"`
				Sys        float64 `json:"sys_s"`
				PeakRSSKiB int64   `json:"peak_rss_kib"`
			} `json:"procs"`
		} `json:"runs"`
		Summaries []struct {
			ID     string  `json:"id"`
			Median float64 `json:"median"`
		} `json:"summaries"`
		LSR     []map[string]any `json:"lsr"`
		Targets []struct {
			Name string `json:"name"`
			Met  bool   `json:"met"`
		} `json:"targets"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("results.json does not parse: %v", err)
	}
	if doc.Rounds != 3 || len(doc.Runs) != 9 || len(doc.Summaries) != 4 || len(doc.LSR) != 1 || len(doc.Targets) == 0 {
		t.Fatalf("results.json: rounds %d, %d runs, %d summaries, %d LSR rows, %d targets; want 3, 9, 4, 1, >0",
			doc.Rounds, len(doc.Runs), len(doc.Summaries), len(doc.LSR), len(doc.Targets))
	}
	r := doc.Runs[len(doc.Runs)-2] // the second run of 5
	if r.Config != "5" || r.Round != 2 || !r.OK || r.Throughput != 1700 || len(r.Procs) != 2 ||
		r.Procs[1].Role != "ns1 lsr" || r.Procs[1].User != 4 || r.Procs[1].PeakRSSKiB != 70*1024 {
		t.Errorf("raw run = %+v, want config 5 round 2 at 1700 with the LSR's user 4 s and 70 MiB", r)
	}
	for _, k := range []string{"config", "frame_size", "pps", "cpu_s_per_mpkt", "frames"} {
		if _, ok := doc.LSR[0][k]; !ok {
			t.Errorf("LSR row lacks %q: %v", k, doc.LSR[0])
		}
	}
}

func TestWriteOutputs(t *testing.T) {
	dir := t.TempDir()
	if err := bench.WriteOutputs(dir, sampleResults()); err != nil {
		t.Fatal(err)
	}
	for name, magic := range map[string]string{
		bench.FileMarkdown: "Seed topology bench",
		bench.FileJSON:     "{",
		bench.FilePNG:      "\x89PNG",
		bench.FileSVG:      "<?xml",
	} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !bytes.HasPrefix(b, []byte(magic)) {
			t.Errorf("%s starts with %q, want %q", name, b[:min(len(b), 16)], magic)
		}
	}
	svg, _ := os.ReadFile(filepath.Join(dir, bench.FileSVG))
	if !bytes.Contains(svg, []byte("5/3")) {
		t.Error("the chart does not print the 5/3 ratio")
	}
}

// TestCPUPerGB checks the machine CPU seconds per GB: a run that carried
// 1600 Mbit/s for 5 s (1 GB) on 2 busy CPU seconds costs 2 s per GB.
func TestCPUPerGB(t *testing.T) {
	sel, _ := bench.ParseSelection("4", bench.Configs())
	cfgs := sel.Filter(bench.Configs())
	runs := []bench.Run{{Config: "4", Round: 1, OK: true, Throughput: 1600, Units: "Mbit/s", MachineCPUSeconds: 2,
		Result: &netperf.Result{Elapsed: 5 * time.Second}}}
	sums := bench.Summarize(cfgs, runs)
	if len(sums) != 1 || math.Abs(sums[0].CPUSecondsPerGB-2) > 1e-9 {
		t.Fatalf("got %+v, want CPUSecondsPerGB 2", sums)
	}
}

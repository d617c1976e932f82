package node_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/mplsnode/mplsnode/forward"
	"github.com/mplsnode/mplsnode/internal/buildinfo"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/node"
)

// sample is one line of the Prometheus text format: name{labels} value.
var sampleRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$`)

// scrape fetches url and returns the samples keyed by name{labels} and
// the TYPE of each metric family.
func scrape(t *testing.T, url string) (samples map[string]float64, types map[string]string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("got status %d, want 200: %s", resp.StatusCode, b)
	}
	samples, types = map[string]float64{}, map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(f, " ")
			types[name] = typ
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := sampleRE.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("unparsable line %q", line)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		samples[m[1]+m[2]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return samples, types
}

// documentedMetrics returns the metric families docs/METRICS.md has a
// table row for whose names start with prefix.
func documentedMetrics(t *testing.T, prefix string) map[string]bool {
	t.Helper()
	doc, err := os.ReadFile("../docs/METRICS.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `("+regexp.QuoteMeta(prefix)+"[a-z_]*)` \\|").FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	return documented
}

// serveMetrics serves n's /metrics on a loopback port until t ends (the
// server must then return nil) and returns its base URL.
func serveMetrics(t *testing.T, n *node.Node) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.ServeMetricsListener(ctx, n, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("got ServeMetricsListener error %v, want nil", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// TestMetrics scrapes /metrics of an LSR fed four frames: label 100
// (swapped), 999 (no ILM entry) and 101 twice (popped to IP), so that the
// forwarded (3), swapped (1) and popped (2) counters differ: a metric that
// returned another's value fails (a swapped metric returning the
// forwarded count passes when both are 1).
func TestMetrics(t *testing.T) {
	n := obsNodeWith(t, "-f mpls route add 101 via inet 10.2.0.2\n", []uint32{100, 999, 101, 101})
	samples, types := scrape(t, serveMetrics(t, n)+"/metrics")

	tests := []struct {
		sample string
		want   float64
	}{
		{`mplsnode_rx_frames_total{device="in0"}`, 4},
		{`mplsnode_tx_frames_total{device="out0"}`, 3},
		{`mplsnode_ilm_hits_total{device="in0"}`, 3},
		{`mplsnode_fib_pushes_total{device="in0"}`, 0},
		{`mplsnode_drops_total{device="in0",reason="no_ilm_entry"}`, 1},
		{`mplsnode_drops_total{device="out0",reason="no_ilm_entry"}`, 0},
		{`mplsnode_labelswitch_forwarded_frames_total`, 3},
		{`mplsnode_labelswitch_swapped_frames_total`, 1},
		{`mplsnode_labelswitch_popped_ip_frames_total`, 2},
		{`mplsnode_labelswitch_popped_labelled_frames_total`, 0},
		{`mplsnode_labelswitch_drops_total{reason="no_neighbor"}`, 0},
		{`mplsnode_tcp_active_opens_total`, 0},
		{`mplsnode_tcp_established_connections`, 0},
		// Channel links: no afpacket mode.
		{`mplsnode_link_info{device="in0",mode="none",queues="0"}`, 1},
	}
	for _, tc := range tests {
		got, ok := samples[tc.sample]
		if !ok {
			t.Errorf("got no sample %s", tc.sample)
			continue
		}
		if got != tc.want {
			t.Errorf("got %s = %v, want %v", tc.sample, got, tc.want)
		}
	}
	// Every link drop reason is exported for every device, zero or not.
	for _, dev := range []string{"in0", "out0"} {
		for _, r := range mplsendpoint.DropReasons() {
			k := `mplsnode_drops_total{device="` + dev + `",reason="` + r.String() + `"}`
			if _, ok := samples[k]; !ok {
				t.Errorf("got no sample %s", k)
			}
		}
	}
	for _, r := range forward.Drops() {
		k := `mplsnode_labelswitch_drops_total{reason="` + r.String() + `"}`
		if _, ok := samples[k]; !ok {
			t.Errorf("got no sample %s", k)
		}
	}
	// Naming rules: every family is mplsnode_* (or the standard go_* and
	// process_* of the process), counters end in _total, and the only
	// labels are device and reason (mplsnode_build_info's say what runs;
	// mplsnode_link_info's how a link moves frames; the per-label counters'
	// the incoming label and the plane that carried it).
	labelRE := regexp.MustCompile(`([a-z_]+)="`)
	for k := range samples {
		name, labels, _ := strings.Cut(k, "{")
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || name == "mplsnode_build_info" {
			continue
		}
		if !strings.HasPrefix(name, "mplsnode_") {
			t.Errorf("got metric %s, want the mplsnode_ prefix only", name)
		}
		if types[name] == "counter" && !strings.HasSuffix(name, "_total") {
			t.Errorf("got counter %s, want a _total suffix", name)
		}
		for _, m := range labelRE.FindAllStringSubmatch(labels, -1) {
			if m[1] != "device" && m[1] != "reason" && (name != "mplsnode_link_info" || m[1] != "mode" && m[1] != "queues") &&
				(!strings.HasPrefix(name, "mplsnode_label_") || m[1] != "label" && m[1] != "plane") {
				t.Errorf("got label %q on %s, want device or reason only", m[1], name)
			}
		}
	}
	for _, dev := range []string{"in0", "out0"} {
		for _, r := range node.LowerDropReasons {
			k := `mplsnode_drops_total{device="` + dev + `",reason="` + r + `"}`
			if _, ok := samples[k]; !ok {
				t.Errorf("got no sample %s", k)
			}
		}
	}
	for _, r := range node.IPDropReasons {
		k := `mplsnode_ip_drops_total{reason="` + r + `"}`
		if _, ok := samples[k]; !ok {
			t.Errorf("got no sample %s", k)
		}
	}
	// docs/METRICS.md lists every family served, and no other.
	documented := documentedMetrics(t, "mplsnode_")
	for name := range types {
		if !strings.HasPrefix(name, "mplsnode_") {
			continue // go_* and process_*: the client library's, documented there
		}
		if !documented[name] {
			t.Errorf("metric %s is served but not in docs/METRICS.md", name)
		}
	}
	for name := range documented {
		if strings.HasPrefix(name, "mplsnode_bgp_") {
			continue // served by nodes with bgp lines: TestBGPMetrics
		}
		if _, ok := types[name]; !ok {
			t.Errorf("docs/METRICS.md lists %s, which is not served", name)
		}
	}
	// The standard collectors and the build: one gauge with value 1 whose
	// labels are what `mplsnode version` prints (internal/buildinfo).
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_open_fds", "process_resident_memory_bytes"} {
		if _, ok := types[name]; !ok {
			t.Errorf("got no %s: the Go and process collectors are missing", name)
		}
	}
	bi := buildinfo.Read()
	k := `mplsnode_build_info{goversion="` + bi.GoVersion + `",revision="` + bi.Revision + `",version="` + bi.Version + `"}`
	if samples[k] != 1 || types["mplsnode_build_info"] != "gauge" {
		t.Errorf("got %s = %v (type %q), want a gauge of 1", k, samples[k], types["mplsnode_build_info"])
	}
	if got := types["mplsnode_drops_total"]; got != "counter" {
		t.Errorf("got TYPE mplsnode_drops_total %q, want counter", got)
	}
}

// TestMetricsPromlint runs the Prometheus client library's linter
// (promlint, the rules of `promtool check metrics`) over a scrape: the
// mplsnode_* families, mplsnode_build_info and the standard Go and process
// collectors. Planted bug: a counter without _total, or build_info as a
// counter, is reported.
func TestMetricsPromlint(t *testing.T) {
	rec := httptest.NewRecorder()
	node.MetricsHandler(obsNode(t)).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	problems, err := promlint.New(rec.Body).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

func TestServeMetricsBadAddr(t *testing.T) {
	n := obsNode(t)
	if err := node.ServeMetrics(context.Background(), n, "127.0.0.1:notaport"); err == nil {
		t.Errorf("got nil error for a bad address, want one")
	}
}

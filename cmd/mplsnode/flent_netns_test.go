package main

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
)

// flentSeries are, per flent test, the data series flent fills from
// netperf runs (the NetperfDemoRunner: TCP_STREAM, TCP_MAERTS and, for the
// UDP pings without irtt, UDP_RR) and from ping.
var flentSeries = map[string][]string{
	"tcp_upload":   {"TCP upload", "Ping (ms) ICMP"},
	"tcp_download": {"TCP download", "Ping (ms) ICMP"},
	"tcp_nup":      {"TCP upload::1", "TCP upload::2", "Ping (ms) ICMP"},
	"rrul": {"TCP upload BE", "TCP upload BK", "TCP upload CS5", "TCP upload EF",
		"TCP download BE", "TCP download BK", "TCP download CS5", "TCP download EF",
		"Ping (ms) UDP BE", "Ping (ms) UDP BK", "Ping (ms) UDP EF", "Ping (ms) ICMP"},
}

// TestFlent runs Debian's flent with `mplsnode netperf` as its netperf
// (flent finds "netperf" on PATH: a script there runs ours) against
// `mplsnode netserver --config` on the userspace stack in a second
// namespace, for tcp_upload, tcp_download, tcp_nup and rrul. flent parses
// our -k output and interim lines itself; each data file must hold, for
// every netperf and ping series, interim points with positive values and a
// positive mean. (flent's udp_flood runs iperf, not netperf.) Checked by
// planting the bug: with the -k interim lines printed in the human layout,
// flent warns "Command produced no valid data" and the test fails with
// `series "TCP upload": 0 positive points`.
func TestFlent(t *testing.T) {
	netns.SkipUnlessRoot(t)
	for _, tool := range []string{"flent", "ping"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (scripts/deps.sh installs it): %v", tool, err)
		}
	}
	bin, dir := buildBinary(t), t.TempDir()
	wrapDir := filepath.Join(dir, "path")
	if err := os.Mkdir(wrapDir, 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf("#!/bin/sh\nexec %s netperf \"$@\"\n", bin)
	if err := os.WriteFile(filepath.Join(wrapDir, "netperf"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	cli, srv := netns.New(t, "nffc"), netns.New(t, "nffs")
	vc, vs := netns.VethPair(t, cli, srv)
	cli.MustExec("ip", "addr", "add", "172.16.93.1/24", "dev", vc)
	conf := writeFile(t, dir, "srv.conf", fmt.Sprintf("link add %s type afpacket\naddr add 172.16.93.2/24 dev %[1]s\n", vs))
	var srvLogs lockedBuffer
	startIn(t, srv, &srvLogs, bin, "netserver", "--config", conf)
	// The server is up when a short netperf run through it succeeds.
	var probe []byte
	var err error
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		probe, err = exec.CommandContext(ctx, "ip", "netns", "exec", cli.Name(), bin, "netperf",
			"-H", "172.16.93.2", "-t", "TCP_RR", "-l", "-10", "-P", "0").CombinedOutput()
		cancel()
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("netserver never answered: %v: %s\nserver: %s", err, probe, srvLogs.String())
	}
	for _, test := range []string{"tcp_upload", "tcp_download", "tcp_nup", "rrul"} {
		t.Run(test, func(t *testing.T) {
			data := t.TempDir()
			// flent's run is its -l plus twice its delay (5 s); each run has
			// a deadline well past that.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "ip", "netns", "exec", cli.Name(), "flent", test,
				"-H", "172.16.93.2", "-l", "3", "-s", "0.2", "-D", data, "-f", "summary",
				"--test-parameter", "upload_streams=2")
			cmd.Env = append(os.Environ(), "PATH="+wrapDir+":"+os.Getenv("PATH"))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("flent %s: %v\n%s\nserver: %s", test, err, out, srvLogs.String())
			}
			files, _ := filepath.Glob(filepath.Join(data, test+"-*.flent.gz"))
			if len(files) != 1 {
				t.Fatalf("flent %s wrote %v, want one data file\n%s", test, files, out)
			}
			checkFlentData(t, files[0], flentSeries[test], string(out))
		})
	}
}

// checkFlentData checks that each of series in a .flent.gz file holds
// more than one positive point, that every raw point of it is positive,
// and that flent took a positive MEAN_VALUE for it from netperf's
// THROUGHPUT (the ping series have none).
func checkFlentData(t *testing.T, path string, series []string, flentOut string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Results   map[string][]*float64 `json:"results"`
		RawValues map[string][]struct {
			Val *float64 `json:"val"`
		} `json:"raw_values"`
		Metadata struct {
			SeriesMeta map[string]map[string]any `json:"SERIES_META"`
		} `json:"metadata"`
	}
	if err := json.NewDecoder(zr).Decode(&d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, name := range series {
		points := 0
		for _, v := range d.Results[name] {
			if v != nil && *v > 0 {
				points++
			}
		}
		raw := d.RawValues[name]
		if points < 2 || len(raw) < 2 {
			t.Errorf("series %q: %d positive points, %d raw values; want at least 2 of each\n%s", name, points, len(raw), flentOut)
			continue
		}
		for i, r := range raw {
			if r.Val == nil || *r.Val <= 0 {
				t.Errorf("series %q raw value %d is %v, want > 0", name, i, r.Val)
				break
			}
		}
		meta := d.Metadata.SeriesMeta[name]
		if strings.HasPrefix(name, "Ping (ms) ICMP") {
			continue
		}
		if mean, ok := meta["MEAN_VALUE"].(float64); !ok || mean <= 0 {
			t.Errorf("series %q: MEAN_VALUE %v, want > 0 (netperf's THROUGHPUT as flent parsed it)", name, meta["MEAN_VALUE"])
		}
		if runner, _ := meta["RUNNER"].(string); runner != "NetperfDemoRunner" {
			t.Errorf("series %q ran with %q, want NetperfDemoRunner (our netperf)", name, runner)
		}
	}
}

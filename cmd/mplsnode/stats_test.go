package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/node"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// statsNode starts a node on channel endpoints and serves its control
// socket; it returns the socket path.
func statsNode(t *testing.T) string {
	t.Helper()
	path, _ := statsNodeLinks(t)
	return path
}

// statsNodeLinks is statsNode that also returns link a0's channel endpoint,
// to inject frames into.
func statsNodeLinks(t *testing.T) (string, *channel.Endpoint) {
	t.Helper()
	path, a, _ := channelNode(t, "stats.conf", "link add a0 type afpacket\nlink add b0 type afpacket\naddr add 10.1.0.1/24 dev a0\naddr add 10.2.0.1/24 dev b0\n")
	return path, a
}

// TestStatsDrops: --drops says "no drops" (exit 0) until a frame is
// dropped, then names the link, the reason and the count (exit 3).
func TestStatsDrops(t *testing.T) {
	path, a := statsNodeLinks(t)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"stats", "--socket", path, "--drops"}, &out, &errb); code != 0 || out.String() != "no drops\n" {
		t.Fatalf("fresh node: exit %d, stdout %q, stderr %q; want 0 and \"no drops\"", code, out.String(), errb.String())
	}
	// A labelled frame for a0 with a label no ILM entry holds.
	frame := []byte{2, 0, 0, 0, 1, 1, 2, 0, 0, 0, 9, 9, 0x88, 0x47, 0x00, 0x1f, 0x41, 0x40}
	frame = append(frame, make([]byte, 46)...)
	pkt := gstack.NewPacketBuffer(gstack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
	a.InjectInbound(0, pkt)
	pkt.DecRef()
	out.Reset()
	if code := run(context.Background(), []string{"stats", "--socket", path, "--drops"}, &out, &errb); code != 3 || out.String() != "a0 no_ilm_entry 1\n" {
		t.Errorf("after an unknown label: exit %d, stdout %q; want 3 and \"a0 no_ilm_entry 1\"", code, out.String())
	}
	if code := run(context.Background(), []string{"stats", "--socket", path, "--drops", "--json"}, &out, &errb); code != 2 {
		t.Errorf("--drops --json: exit %d, want 2", code)
	}
}

func TestStats(t *testing.T) {
	path := statsNode(t)
	missing := filepath.Join(t.TempDir(), "none.sock")
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  []string // substrings of stdout
		wantErr  string   // substring of stderr
	}{
		{"table", []string{"--socket", path}, 0,
			[]string{"links", "a0", "b0", "drops by reason", "no_ilm_entry", "ttl_expired", "label_switch", "no_neighbor", "tcp", "retransmits", "checksum_errors"}, ""},
		{"json", []string{"--socket", path, "--json"}, 0, []string{`"links"`, `"label_switch"`, `"tcp"`}, ""},
		{"missing socket", []string{"--socket", missing}, 1, nil, "is `mplsnode run` running? (choose the socket with --socket PATH)"},
		{"help", []string{"-h"}, 0, []string{"mplsnode stats --socket", "--json"}, ""},
		{"extra arg", []string{"x"}, 2, nil, `unexpected argument "x"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errb := runExit(t, tc.wantCode, append([]string{"stats"}, tc.args...)...)
			for _, w := range tc.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("got stdout %q, want it to contain %q", out, w)
				}
			}
			if !strings.Contains(errb, tc.wantErr) {
				t.Errorf("got stderr %q, want it to contain %q", errb, tc.wantErr)
			}
		})
	}
}

// TestStatsTableZeros checks that every link drop reason appears in the
// table with a zero for each link, and that --json decodes to the Report.
func TestStatsTableZeros(t *testing.T) {
	path := statsNode(t)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"stats", "--socket", path}, &out, &errb); code != 0 {
		t.Fatalf("got exit code %d, want 0: %s", code, errb.String())
	}
	for _, r := range mplsendpoint.DropReasons() {
		re := regexp.MustCompile(`(?m)^\s*` + r.String() + `\s+0\s+0\s*$`)
		if !re.MatchString(out.String()) {
			t.Errorf("got no line %q with 0 for a0 and b0 in:\n%s", r.String(), out.String())
		}
	}
	out.Reset()
	if code := run(context.Background(), []string{"stats", "--socket", path, "--json"}, &out, &errb); code != 0 {
		t.Fatalf("got exit code %d, want 0: %s", code, errb.String())
	}
	var r node.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("--json output does not decode: %v", err)
	}
	if len(r.Links) != 2 || r.Links[0].Name != "a0" || r.Links[1].Name != "b0" {
		t.Errorf("got links %+v, want a0, b0", r.Links)
	}
}

// TestStatsTextUsesJSONNames checks that the text form of `mplsnode stats`
// names every counter and section by its name in `stats --json`: each key
// of the JSON document (of a live node's report, with an XDP section
// added so that its keys are there too) is a word of the text. Checked by
// planting the bug: with "popped_ip" printed as "popped to IP" (the old
// label) the test fails naming popped_ip.
func TestStatsTextUsesJSONNames(t *testing.T) {
	path := statsNode(t)
	body, err := fetchStats(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	var r node.Report
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	r.XDP = &node.XDPReport{Links: []string{"a0", "b0"}, EgressOK: []string{"b0"}, Skipped: map[string]string{"c0": "no native XDP"},
		Entries: 1, VerifiedInstructions: 2, Swapped: 3, PoppedLabelled: 4, PoppedIP: 5, Passed: map[string]uint64{"no_ilm_entry": 6},
		FIBNotCarried: 7, FIBError: "XDP FIB 10.0.0.0/8: no space left on device"}
	full, err := json.Marshal(&r)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(full, &doc); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printReport(&out, &r)
	// The text's sections: a line that starts with a top-level key of the
	// document opens that key's section.
	sections := map[string]string{}
	cur := ""
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) > 0 && !strings.HasPrefix(line, " ") {
			if _, ok := doc[f[0]]; ok {
				cur = f[0]
			}
		}
		sections[cur] += line + "\n"
	}
	for section, v := range doc {
		keys := map[string]bool{section: true}
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				for k, e := range v {
					keys[k] = true
					walk(e)
				}
			case []any:
				for _, e := range v {
					walk(e)
				}
			}
		}
		walk(v)
		for k := range keys {
			if !regexp.MustCompile(`(?m)(^|\s)` + regexp.QuoteMeta(k) + `(\s|$)`).MatchString(sections[section]) {
				t.Errorf("JSON key %s.%s is not a word of the text's %q section:\n%s", section, k, section, sections[section])
			}
		}
	}
}

// TestRunObservability runs `mplsnode run` in a namespace with
// --control-socket and --metrics-addr, reads both, and checks that SIGTERM
// removes the socket.
func TestRunObservability(t *testing.T) {
	bin := rootBinary(t)
	nsA, nsB := netns.New(t, "oa"), netns.New(t, "ob")
	va, _ := netns.VethPair(t, nsA, nsB)
	nsA.MustExec("ip", "link", "set", "lo", "up")
	dir := t.TempDir()
	file := filepath.Join(dir, "a.conf")
	if err := os.WriteFile(file, []byte(fmt.Sprintf("link add %[1]s type afpacket\naddr add 10.77.0.1/24 dev %[1]s\n", va)), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "a.sock")
	// 9477 is free inside the fresh namespace: nothing else listens there.
	const metricsAddr = "127.0.0.1:9477"
	cmd := exec.Command("ip", "netns", "exec", nsA.Name(), bin, "run", "-c", file,
		"--control-socket", sock, "--metrics-addr", metricsAddr)
	var logs lockedBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := false
	t.Cleanup(func() {
		if !exited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	waitFor(t, &logs, "metrics listening")
	waitFor(t, &logs, "control socket listening")
	var body []byte
	var err error
	for range 100 {
		if body, err = fetchStats(context.Background(), sock); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("stats: %v\n%s", err, logs.String())
	}
	var r node.Report
	if err := json.Unmarshal(body, &r); err != nil || len(r.Links) != 1 || r.Links[0].Name != va {
		t.Errorf("got report %+v (err %v), want one link %s", r, err, va)
	}
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("got socket stat %v, %v, want mode 0600", fi, err)
	}

	var metrics string
	for range 100 {
		err = nsA.Run(func() error {
			c, err := net.Dial("tcp", metricsAddr)
			if err != nil {
				return err
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			fmt.Fprintf(c, "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
			b, err := io.ReadAll(c)
			metrics = string(b)
			return err
		})
		if err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	if want := `mplsnode_rx_frames_total{device="` + va + `"}`; !strings.Contains(metrics, want) {
		t.Errorf("got metrics without %s:\n%s", want, metrics)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	err = cmd.Wait()
	exited = true
	if err != nil {
		t.Errorf("got exit %v after SIGTERM, want 0\n%s", err, logs.String())
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("got Stat(socket) error %v after exit, want not exist", err)
	}
}

// TestReportFitsTerminal prints a report of four links with counters in
// the billions and checks that every line fits 100 columns, the width of
// a terminal beside another.
func TestReportFitsTerminal(t *testing.T) {
	r := node.Report{}
	for _, name := range []string{"virt10", "virt12", "uplink0", "customer-a"} {
		r.Links = append(r.Links, node.LinkReport{Name: name, LinkMode: "ring", Queues: 2,
			RXFrames: 4_000_000_000, TXFrames: 4_000_000_000, RXForwarded: 3_999_999_999,
			Drops: map[string]uint64{"no_ilm_entry": 1_000_000}})
	}
	var out bytes.Buffer
	printReport(&out, &r)
	for i, line := range strings.Split(out.String(), "\n") {
		if len(line) > 100 {
			t.Errorf("line %d is %d columns, want at most 100: %q", i+1, len(line), line)
		}
	}
	if !strings.Contains(out.String(), "rx_forwarded") || !strings.Contains(out.String(), "3999999999") {
		t.Errorf("report lacks the links' counters:\n%s", out.String())
	}
}

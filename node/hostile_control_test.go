package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/node"
)

// scapyPython is the Debian python3 that has python3-scapy (a python3
// elsewhere in PATH may not).
const scapyPython = "/usr/bin/python3"

// waitFor polls cond every 20 ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tables is what a control or metrics request must never change: the
// routes, the label routes and the counters.
func tables(n *node.Node) string {
	routes := n.Stack().Routes()
	ilm := n.Stack().Tables().ILM().Entries()
	r := n.Report()
	r.Runtime = node.RuntimeReport{} // the process's goroutines and heap move on their own
	return fmt.Sprintf("routes %+v\nilm %+v\nreport %+v", routes, ilm, r)
}

// TestControlSocketHostile sends the control socket what a careless or
// hostile local client might: binary garbage, an overlong line, no line at
// all, write-like commands, several commands on one connection, and a
// client that connects and says nothing, and route changes outside the
// exact grammar (route add LINE in the config's words, route del PREFIX,
// mpls route add LINE, mpls route del LABEL, one line, one statement).
// Each gets an error line (or, for a line the server cannot read, an
// error and the close); the routes, label routes and counters stay as
// they were; and a silent client does not hold the socket up for others.
func TestControlSocketHostile(t *testing.T) {
	n := obsNode(t)
	path := startControl(t, n)
	want := tables(n)

	silent, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	for _, tc := range []struct {
		name, req string
	}{
		{"binary", "\x00\x01\xff\xfe\x88\x47\n"},
		{"overlong line", strings.Repeat("stats", 100) + "\n"},
		{"no newline, then EOF", "stats please"},
		{"nothing, then EOF", ""},
		{"route add without a next hop", "route add 10.0.0.0/8 via\n"},
		{"route add with trailing words", "route add 10.0.0.0/8 via 10.1.0.2 please\n"},
		{"route add of another statement", "route add 10.0.0.0/8 via 10.1.0.2 link add x0 type tap\n"},
		{"route add, binary", "route add \x00\xff/8 via 10.1.0.2\n"},
		{"route del of no route", "route del 10.0.0.0/8\n"},
		{"route del of a whole line", "route del 10.0.0.0/8 via 10.1.0.2\n"},
		{"route without a verb", "route 10.0.0.0/8 via 10.1.0.2\n"},
		{"label route add in the file's words", "-f mpls route add 300 via inet 10.2.0.2\n"},
		{"label route add, label too big", "mpls route add 1048576 via inet 10.2.0.2\n"},
		{"label route del of no route", "mpls route del 300\n"},
		{"label route del, not a label", "mpls route del -1\n"},
		{"reload", "reload\n"},
		{"set", "set ttl-model pipe\n"},
		{"json", `{"command":"route","args":["del","default"]}` + "\n"},
		{"http", "POST /reload HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"second command ignored", "nonsense\nroute add 1.2.3.0/24 via 10.1.0.2\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := askHalfClose(t, path, tc.req)
			if !strings.HasPrefix(got, "error: ") || strings.Count(got, "\n") != 1 {
				t.Errorf("request %q: got %q, want one error line", tc.req, got)
			}
		})
	}
	if got := tables(n); got != want {
		t.Errorf("tables or counters changed by control requests:\n%s\nwant\n%s", got, want)
	}
	// The silent client is still connected; others were answered (above)
	// and still are.
	var r node.Report
	if err := json.Unmarshal([]byte(ask(t, path, "stats\n")), &r); err != nil {
		t.Errorf("stats while a silent client holds a connection: %v", err)
	}
}

// TestControlSocketRootOnly checks, as root, that the control socket is
// owned by root with mode 0600, and that an unprivileged user (nobody,
// uid 65534) who can reach the directory cannot connect to it.
func TestControlSocketRootOnly(t *testing.T) {
	netns.SkipUnlessRoot(t)
	n := obsNode(t)
	dir := t.TempDir()
	// The directory and its parent (both 0700 from t.TempDir) are opened
	// to all, so the socket's own mode is what keeps others out.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := startControlAt(t, n, filepath.Join(dir, "c.sock"))
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != 0o600 || st.Uid != 0 || st.Gid != 0 {
		t.Errorf("got socket mode %v owner %d:%d, want 0600 root:root", fi.Mode().Perm(), st.Uid, st.Gid)
	}
	// The oracle is the kernel: connect(2) as nobody, in a child process.
	const nobody = 65534
	connect := func() (string, error) {
		cmd := exec.Command(scapyPython, "-c", `import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"stats\n")
print(len(s.recv(65536)))`, path)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	out, err := connect()
	if err == nil || !strings.Contains(out, "PermissionError") {
		t.Errorf("connect as uid %d: got %v: %s, want PermissionError", nobody, err, out)
	}
	// The same client reaches a socket that lets it (so the refusal
	// above is the socket's mode, not a broken client).
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if out, err := connect(); err != nil {
		t.Errorf("connect as uid %d to a 0666 socket: %v: %s, want an answer", nobody, err, out)
	}
}

// TestMetricsReadOnly: the metrics endpoint answers GET (and HEAD) on
// /metrics only; other methods get 405 and other paths 404, and nothing
// changes the node.
func TestMetricsReadOnly(t *testing.T) {
	n := obsNode(t)
	base := serveMetrics(t, n)
	want := tables(n)
	for _, tc := range []struct {
		method, path, body string
		status             int
	}{
		{"GET", "/metrics", "", http.StatusOK},
		{"HEAD", "/metrics", "", http.StatusOK},
		{"POST", "/metrics", "route add 10.0.0.0/8 via 10.1.0.2", http.StatusMethodNotAllowed},
		{"PUT", "/metrics", `mplsnode_drops_total{device="in0",reason="no_ilm_entry"} 0`, http.StatusMethodNotAllowed},
		{"DELETE", "/metrics", "", http.StatusMethodNotAllowed},
		{"PATCH", "/metrics", "{}", http.StatusMethodNotAllowed},
		{"POST", "/reload", "", http.StatusNotFound},
		{"GET", "/", "", http.StatusNotFound},
		{"GET", "/debug/pprof/", "", http.StatusNotFound},
	} {
		req, err := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: got status %d, want %d", tc.method, tc.path, resp.StatusCode, tc.status)
		}
	}
	if got := tables(n); got != want {
		t.Errorf("tables or counters changed by metrics requests:\n%s\nwant\n%s", got, want)
	}
}

// TestMetricsBindsGivenAddress runs the metrics server in a namespace
// with a second address (10.88.0.1, on lo): given
// 127.0.0.1:9477 it listens there only, and given only a port (":9478")
// it listens on loopback, not on every address. ss(8) and connect(2) are
// the oracles.
func TestMetricsBindsGivenAddress(t *testing.T) {
	netns.SkipUnlessRoot(t)
	n := obsNode(t)
	ns := netns.New(t, "mb")
	ns.MustExec("ip", "link", "set", "lo", "up")
	ns.MustExec("ip", "addr", "add", "10.88.0.1/32", "dev", "lo")

	for _, tc := range []struct {
		addr, listening string
		port            string
	}{
		{"127.0.0.1:9477", "127.0.0.1:9477", "9477"},
		{":9478", "127.0.0.1:9478", "9478"},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- ns.Run(func() error { return node.ServeMetrics(ctx, n, tc.addr) }) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("ServeMetrics(%q): %v", tc.addr, err)
				}
			}()
			var ss string
			waitFor(t, 10*time.Second, "the metrics listener", func() bool {
				ss = strings.TrimSpace(ns.MustExec("ss", "-Hltn"))
				return ss != ""
			})
			fields := strings.Fields(ss)
			if strings.Count(ss, "\n") != 0 || len(fields) < 4 || fields[3] != tc.listening {
				t.Errorf("ServeMetrics(%q): ss -ltn shows %q, want one listener on %s", tc.addr, ss, tc.listening)
			}
			dial := func(host string) error {
				return ns.Run(func() error {
					c, err := net.DialTimeout("tcp", net.JoinHostPort(host, tc.port), 2*time.Second)
					if err == nil {
						c.Close()
					}
					return err
				})
			}
			if err := dial("127.0.0.1"); err != nil {
				t.Errorf("dial 127.0.0.1:%s: %v", tc.port, err)
			}
			if err := dial("10.88.0.1"); !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("dial 10.88.0.1:%s: got %v, want connection refused", tc.port, err)
			}
		})
	}
}

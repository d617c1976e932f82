package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	seed0 := filepath.Join("..", "..", "config", "testdata", "seed-ns0.conf")
	seed1 := filepath.Join("..", "..", "config", "testdata", "seed-ns1.conf")
	bad := write("bad.conf", "link add virt01 type afpacket\naddr add 10.0.0.1/24 dev virt01\nroute add 10.9.0.0/16 encap mpls 3 via 10.0.0.2\n")
	lo := write("lo.conf", "link add virt01 type afpacket\naddr add 10.0.0.1/24 dev virt01\naddr add 10.10.10.0/24 dev lo\n")
	empty := write("empty.conf", "")
	comments := write("comments.conf", "# nothing yet\n\n")
	// A 2 MB word: the error quotes its first bytes and its length only
	// (before: the whole word, 2 MB of stderr).
	long := write("long.conf", "link add virt01 type afpacket mtu "+strings.Repeat("9", 2<<20)+"\n")
	// rx-ring-frames: accepted on an afpacket link, refused with mode mmsg
	// (planted bug: the mmsg check removed from config/parse.go, the
	// second case exits 0).
	ring := write("ring.conf", "link add virt01 type afpacket rx-ring-frames 16384\naddr add 10.0.0.1/24 dev virt01\n")
	ringMMsg := write("ringmmsg.conf", "link add virt01 type afpacket\nlink add virt02 type afpacket mode mmsg rx-ring-frames 4096\n")
	bgpConf := filepath.Join("..", "..", "config", "testdata", "bgp.conf")
	farPeer := write("far.conf", "link add virt01 type afpacket\naddr add 10.0.0.1/24 dev virt01\nbgp as 65001 router-id 10.0.0.1\nbgp neighbor 10.9.0.2 remote-as 65002\n")
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string // substring of stdout
		wantErr  string // substring of stderr
	}{
		{"empty file", []string{"-c", empty}, 0, empty + ": ok (no links, no routes)\n", ""},
		{"comments only", []string{"-c", comments}, 0, comments + ": ok (no links, no routes)\n", ""},
		{"2 MB token", []string{"-c", long}, 2, "", long + `:1:35: bad link mtu "` + strings.Repeat("9", 44) + `...(2097152 bytes)"`},
		{"seed ns0", []string{"-c", seed0}, 0, seed0 + ": ok", ""},
		{"seed ns1", []string{"-c", seed1}, 0, seed1 + ": ok", ""},
		{"parse error", []string{"-c", bad}, 2, "", bad + ":3:"},
		{"semantic error", []string{"-c", lo}, 2, "", lo + ":3:10: an address on lo must be a host address: 10.10.10.0/32"},
		{"rx-ring-frames", []string{"-c", ring}, 0, ring + ": ok", ""},
		{"rx-ring-frames mmsg", []string{"-c", ringMMsg}, 2, "", ringMMsg + ":2:41: rx-ring-frames sizes the receive ring; a mode mmsg link has none"},
		{"bgp", []string{"-c", bgpConf}, 0, bgpConf + ": ok", ""},
		{"bgp neighbor not connected", []string{"-c", farPeer}, 2, "", farPeer + ":4:14: bgp neighbor 10.9.0.2 is on none of the node's subnets"},
		{"missing file", []string{"-c", filepath.Join(dir, "nope.conf")}, 2, "", "nope.conf"},
		{"no -c", nil, 2, "", "-c FILE is required"},
		{"extra arg", []string{"-c", seed0, "x"}, 2, "", `unexpected argument "x"`},
		{"file without -c", []string{seed0}, 2, "", `unexpected argument "` + seed0 + `" (a config file goes after -c: mplsnode check -c ` + seed0 + ")"},
		{"unknown flag", []string{"--bogus"}, 2, "", "flag provided but not defined"},
		{"help", []string{"-h"}, 0, "mplsnode check -c ns0.conf", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errb := runExit(t, tc.wantCode, append([]string{"check"}, tc.args...)...)
			if !strings.Contains(out, tc.wantOut) {
				t.Errorf("got stdout %q, want it to contain %q", out, tc.wantOut)
			}
			if !strings.Contains(errb, tc.wantErr) {
				t.Errorf("got stderr %.300q, want it to contain %q", errb, tc.wantErr)
			}
			if tc.wantCode != 0 && strings.HasPrefix(tc.wantErr, dir) && len(errb) > 300 {
				t.Errorf("stderr is %d bytes long; an error quotes at most ~60 bytes of a token", len(errb))
			}
		})
	}
}

func TestRunUsage(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"no -c", nil, 2, "-c FILE is required"},
		{"bad log format", []string{"-c", "x.conf", "--log-format", "xml"}, 2, `--log-format "xml"`},
		{"bad log level", []string{"-c", "x.conf", "--log-level", "loud"}, 2, `--log-level "loud"`},
		{"missing file", []string{"-c", "/nonexistent/x.conf"}, 2, "/nonexistent/x.conf"},
		{"pcap without file", []string{"-c", "x.conf", "--pcap", ",virt10"}, 2, `--pcap ",virt10": want FILE[,DEV...]`},
		{"-C to stdout", []string{"-c", "x.conf", "--pcap", "-", "-C", "1"}, 2, "-C rotates files: it needs --pcap FILE, not -"},
		{"-W without -C", []string{"-c", "x.conf", "--pcap", "x.pcapng", "-W", "3"}, 2, "-W needs -C SIZE"},
		{"-s without --pcap", []string{"-c", "x.conf", "-s", "96"}, 2, "-s, -C and -W need --pcap"},
		{"pcap unwritable", []string{"-c", "../../examples/seed/ns1.conf", "--control-socket", "", "--pcap", "/nonexistent/dir/x.pcap"}, 2, "--pcap: open /nonexistent/dir/x.pcap"},
		// The link check runs before any interface is opened: no root needed.
		{"pcap unknown link", []string{"-c", "../../examples/seed/ns1.conf", "--pcap", "-,virt10,eth9"},
			2, `ns1.conf: capture: no link named "eth9" in the config (links: virt10, virt12)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, errb := runExit(t, tc.wantCode, append([]string{"run"}, tc.args...)...)
			if !strings.Contains(errb, tc.wantErr) {
				t.Errorf("got stderr %q, want it to contain %q", errb, tc.wantErr)
			}
		})
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"run", "-h"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "SIGHUP reloads") {
		t.Errorf("run -h: got code %d, stdout %q; want 0 and the usage", code, out.String())
	}
}

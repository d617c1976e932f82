package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/nodekit"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
)

// TestBGPCommands asks a node with bgp lines (its neighbour never answers;
// the node runs on a channel endpoint, no root needed) through the CLI.
// Planting a broken `-f mpls` rewrite in run makes the last query exit 2.
func TestBGPCommands(t *testing.T) {
	conf := `link add a0 type afpacket
addr add 10.1.0.1/24 dev a0
route add 10.9.0.0/16 encap mpls 100 via 10.1.0.2
bgp as 65001 router-id 10.1.0.1
bgp neighbor 10.1.0.2 remote-as 65002
bgp network 10.10.10.10/32
bgp network 10.20.0.0/16 label explicit-null
`
	n := nodekit.ChannelNode(t, "bgp.conf", conf, nil, map[string]*channel.Endpoint{"a0": channel.New(64, 1500, tcpip.LinkAddress("\x02\x00\x00\x00\x01\x01"))})
	path := serveNode(t, n)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"bgp", "summary"}, []string{"AS 65001, router-id 10.1.0.1, labels 16000-23999: 1 of 8000 bound", "NEIGHBOR", "10.1.0.2"}},
		{[]string{"bgp", "neighbor"}, []string{"ipv4-labeled-unicast", "ipv6-labeled-unicast", "10.1.0.2  65002  -          active"}},
		{[]string{"bgp", "routes"}, []string{"10.10.10.10/32  local", "10.20.0.0/16", "16000", " 0 "}},
		{[]string{"bgp", "summary", "--json"}, []string{`"labels_used": 1`}},
		{[]string{"route", "show"}, []string{"10.9.0.0/16 encap mpls 100 via 10.1.0.2 dev a0 proto static metric 1"}},
		{[]string{"-f", "mpls", "route", "show"}, []string{"16000 dev lo proto bgp", "0 dev lo proto static"}},
	} {
		var out, errb bytes.Buffer
		args := append(tc.args, "--socket", path)
		if code := run(context.Background(), args, &out, &errb); code != 0 {
			t.Errorf("%v: exit %d, stderr %q", tc.args, code, errb.String())
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, out.String())
			}
		}
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"bgp", "bogus", "--socket", path}, &out, &errb); code != exitUsage {
		t.Errorf("bgp bogus: exit %d, want %d", code, exitUsage)
	}
}

// waitSocket waits for the control socket file to appear.
func waitSocket(t *testing.T, path string) {
	t.Helper()
	for range 400 {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("control socket did not appear")
}

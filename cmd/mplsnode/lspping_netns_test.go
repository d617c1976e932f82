package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/node"
)

// TestLSPPingCLI runs the seed topology with three `mplsnode run`
// processes (host, LSR, egress) and `mplsnode ping mpls` and `mplsnode
// traceroute mpls` against the host's control socket, as an operator
// would: return code 3 from the egress and exit 0; then, with the LSR's
// label route changed over its control socket (`mplsnode -f mpls route
// add`) to a label the egress has none for, return code 11, the hop where
// the LSP breaks, and exit 1.
func TestLSPPingCLI(t *testing.T) {
	bin := rootBinary(t)
	ns0, ns1, ns2 := netns.New(t, "lpc0"), netns.New(t, "lpc1"), netns.New(t, "lpc2")
	for _, ns := range []*netns.NS{ns0, ns1, ns2} {
		writeSysctl(t, ns, "net/ipv6/conf/all/disable_ipv6", "1")
		writeSysctl(t, ns, "net/ipv6/conf/all/disable_ipv6", "1")
	}
	v01, v10 := netns.VethPair(t, ns0, ns1)
	v12, v21 := netns.VethPair(t, ns1, ns2)
	host := startLSR(t, bin, ns0, fmt.Sprintf(`link add %[1]s type afpacket
addr add 172.16.20.20/24 dev %[1]s
route add 10.10.10.10/32 encap mpls 100 via inet 172.16.20.21 dev %[1]s
route add 172.16.21.0/24 via 172.16.20.21 dev %[1]s
`, v01))
	lsr := startLSR(t, bin, ns1, fmt.Sprintf(`link add %[1]s type afpacket
link add %[2]s type afpacket
addr add 172.16.20.21/24 dev %[1]s
addr add 172.16.21.21/24 dev %[2]s
sysctl -w net.ipv4.ip_forward=1
-f mpls route add 100 as to 200 via inet 172.16.21.22 dev %[2]s
`, v10, v12))
	startLSR(t, bin, ns2, fmt.Sprintf(`link add %[1]s type afpacket
addr add 172.16.21.22/24 dev %[1]s
addr add 10.10.10.10/32 dev lo
route add 172.16.20.0/24 via 172.16.21.21 dev %[1]s
-f mpls route add 200 dev lo
`, v21))
	cli := func(args ...string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var out, errb bytes.Buffer
		code := run(ctx, append(args, "--socket", host.sock), &out, &errb)
		t.Logf("mplsnode %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
		return out.String(), code
	}
	contains := func(what, out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: no %q in\n%s", what, w, out)
			}
		}
	}

	out, code := cli("ping", "mpls", "ipv4", "10.10.10.10/32", "-c", "3", "-i", "50")
	if code != exitOK {
		t.Errorf("ping: exit %d, want 0", code)
	}
	contains("ping", out, "Sending 3 MPLS echo requests for LDP IPv4 prefix 10.10.10.10/32 via 172.16.20.21 dev "+v01+" labels 100",
		"! seq=1 reply from 172.16.21.22: return code 3 (Replying router is an egress for the FEC at stack-depth 1), rtt",
		"3 requests sent, 3 replies, 3 egress (return code 3), 0% not as expected")
	out, code = cli("traceroute", "mpls", "ipv4", "10.10.10.10/32", "--ttl-max", "5")
	if code != exitOK {
		t.Errorf("traceroute: exit %d, want 0", code)
	}
	contains("traceroute", out, "L  1 172.16.20.21", "return code 8 (Label switched at stack-depth 1)",
		"downstream 172.16.21.22 mtu 1500 labels 200", "!  2 172.16.21.22", "--- egress reached at hop 2")
	out, code = cli("ping", "mpls", "ipv4", "10.10.10.10/32", "-c", "1", "--fec", "bgp", "--json")
	var res node.LSPPingResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != exitOK || res.Egress != 1 {
		t.Errorf("ping --fec bgp --json: exit %d, %v, %+v", code, err, res)
	}

	// The LSR swaps to a label the egress has no entry for.
	for _, args := range [][]string{{"-f", "mpls", "route", "del", "100"}, {"-f", "mpls", "route", "add", "100", "as", "to", "999", "via", "inet", "172.16.21.22", "dev", v12}} {
		if out, err := exec.Command(bin, append(args, "--socket", lsr.sock)...).CombinedOutput(); err != nil {
			t.Fatalf("mplsnode %v: %v: %s", args, err, out)
		}
	}
	out, code = cli("ping", "mpls", "ipv4", "10.10.10.10/32", "-c", "2", "-i", "50")
	if code != exitFailure {
		t.Errorf("ping over the broken LSP: exit %d, want 1", code)
	}
	contains("ping over the broken LSP", out, "N seq=1 reply from 172.16.21.22: return code 11 (No label entry at stack-depth 1)",
		"2 requests sent, 2 replies, 0 egress (return code 3), 100% not as expected")
	out, code = cli("traceroute", "mpls", "ipv4", "10.10.10.10/32", "--ttl-max", "5")
	if code != exitFailure {
		t.Errorf("traceroute over the broken LSP: exit %d, want 1", code)
	}
	contains("traceroute over the broken LSP", out, "downstream 172.16.21.22 mtu 1500 labels 999",
		"N  2 172.16.21.22", "--- LSP breaks at hop 2: 172.16.21.22 answered return code 11 (No label entry at stack-depth 1)")
}

// TestLSPPingUsage: bad words and options are usage errors (exit 2)
// naming what was wrong, before any node is asked.
func TestLSPPingUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ping"}, "want `mpls ipv4 PREFIX`"},
		{[]string{"ping", "mpls", "ipv5", "10.0.0.0/8"}, "want `mpls ipv4 PREFIX`"},
		{[]string{"ping", "mpls", "ipv4", "10.0.0.300/8"}, "is not a prefix"},
		{[]string{"ping", "mpls", "ipv6", "10.0.0.0/8"}, "is not an ipv6 prefix"},
		{[]string{"ping", "mpls", "ipv4", "10.0.0.0/8", "--fec", "rsvp"}, "--fec \"rsvp\""},
		{[]string{"ping", "mpls", "ipv4", "10.0.0.0/8", "--exp", "9"}, "--exp 9"},
		{[]string{"ping", "mpls", "ipv4", "10.0.0.0/8", "--ttl", "0"}, "--ttl 0"},
		{[]string{"ping", "mpls", "ipv4", "10.0.0.0/8", "--reply-mode", "4"}, "--reply-mode 4"},
		{[]string{"traceroute", "mpls", "ipv4", "10.0.0.0/8", "--ttl-max", "0"}, "--ttl-max 0"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), append(c.args, "--socket", "/nonexistent"), &out, &errb); code != exitUsage {
			t.Errorf("mplsnode %v: exit %d, want 2", c.args, code)
		}
		if !strings.Contains(errb.String(), c.want) {
			t.Errorf("mplsnode %v: stderr %q, want %q", c.args, errb.String(), c.want)
		}
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"ping", "mpls", "ipv4", "10.0.0.0/8", "--socket", "/nonexistent/x.sock"}, &out, &errb); code != exitFailure ||
		!strings.Contains(errb.String(), "no node answers on /nonexistent/x.sock") {
		t.Errorf("ping with no node: exit %d, stderr %q, want 1 and no node answers", code, errb.String())
	}
}

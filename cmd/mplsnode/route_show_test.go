package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/config"
	"github.com/mplsnode/mplsnode/node"
)

// mplsnodeCLI runs the CLI in process and returns its exit code, stdout
// and stderr.
func mplsnodeCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// routeNode starts an in-process node from conf (links a0 and b0 on
// channel endpoints, no root needed) serving its control socket, and
// returns the socket's path.
func routeNode(t *testing.T, conf string) string {
	t.Helper()
	path, _, _ := channelNode(t, "route.conf", conf)
	return path
}

const routeLinks = "link add a0 type afpacket\nlink add b0 type afpacket\n"

// TestRouteShowConnected: route show lists each address's subnet as ip
// route does ("proto kernel scope link"), a host address none, and in
// --json with protocol kernel and scope link. Planted bug (Routes without
// the connected routes) caught: the lines are missing.
func TestRouteShowConnected(t *testing.T) {
	path := routeNode(t, routeLinks+"addr add 10.1.0.1/24 dev a0\naddr add 2001:db8:2::1/64 dev b0\naddr add 10.255.0.1/32 dev lo\nroute add 10.9.0.0/16 via 10.1.0.2\n")
	code, out, errs := mplsnodeCLI("route", "show", "--socket", path)
	want := []string{
		"10.1.0.0/24 dev a0 proto kernel scope link",
		"10.9.0.0/16 via 10.1.0.2 dev a0 proto static metric 1",
		"2001:db8:2::/64 dev b0 proto kernel scope link",
	}
	if got := strings.Split(strings.TrimSpace(out), "\n"); code != exitOK || !slices.Equal(got, want) {
		t.Errorf("route show: exit %d, stderr %q, lines\n%s\nwant\n%s", code, errs, out, strings.Join(want, "\n"))
	}
	code, out, errs = mplsnodeCLI("route", "show", "--json", "--socket", path)
	var rs []node.RouteEntry
	if err := json.Unmarshal([]byte(out), &rs); code != exitOK || err != nil || len(rs) != 3 {
		t.Fatalf("route show --json: exit %d, err %v, stderr %q, stdout %s", code, err, errs, out)
	}
	if r := rs[0]; r.Prefix != "10.1.0.0/24" || r.Protocol != "kernel" || r.Scope != "link" || r.Distance != 0 || r.Dev != "a0" {
		t.Errorf("route show --json: connected route %+v", r)
	}
}

// TestRouteShowJSONEmpty: a node without routes (no addresses) answers
// route show --json with an empty list, [], not null, and route show with
// nothing. (The ILM is never empty: explicit null 0 and 2 are always
// there.) Planted bug (Routes' nil slice) caught.
func TestRouteShowJSONEmpty(t *testing.T) {
	path := routeNode(t, routeLinks)
	code, out, errs := mplsnodeCLI("route", "show", "--json", "--socket", path)
	if code != exitOK || strings.TrimSpace(out) != "[]" {
		t.Errorf("route show --json: exit %d, stdout %q, stderr %q; want []", code, out, errs)
	}
	code, out, errs = mplsnodeCLI("route", "show", "--socket", path)
	if code != exitOK || out != "" {
		t.Errorf("route show: exit %d, stdout %q, stderr %q; want nothing", code, out, errs)
	}
}

// TestRouteShowParsesBack: each line `mplsnode [-f mpls] route show`
// prints (connected, static, labelled with a TTL, with an MTU, multipath
// routes and label routes, and the
// BGP route and label lines as the node writes them) is accepted by the
// config parser after "route add " ("-f mpls route add "), and by the
// running node as `mplsnode [-f mpls] route replace LINE`, which leaves
// route show as it was but the connected route, now also static. Planted
// bugs caught: the parser without proto (unknown word "proto"), without
// scope (the connected line refused); route show without mtu, ttl or a
// multipath route's hops (the line is missing; replacing with it would
// drop them).
func TestRouteShowParsesBack(t *testing.T) {
	conf := routeLinks + `addr add 10.1.0.1/24 dev a0
addr add 10.2.0.1/24 dev b0
addr add 2001:db8:2::1/64 dev b0
route add 10.9.0.0/16 encap mpls 100/200 via 10.1.0.2
route add 10.8.0.0/16 via 10.2.0.2 dev b0 mtu 1400
route add 2001:db8:9::/48 encap mpls 300 via inet 10.2.0.2
route add 10.7.0.0/16 encap mpls 500 ttl 64 via 10.1.0.2
route add 10.6.0.0/16 mtu 1400 nexthop encap mpls 600 via 10.1.0.2 weight 2 nexthop via 10.2.0.2
-f mpls route add 400 as to 401 via inet 10.2.0.2
-f mpls route add 402 via inet 10.1.0.2
-f mpls route add 403 nexthop as to 404 via inet 10.1.0.2 weight 1 nexthop via inet 10.2.0.2 weight 3
`
	path := routeNode(t, conf)
	show := func(family ...string) []string {
		t.Helper()
		args := append(append(family, "route", "show"), "--socket", path)
		code, out, errs := mplsnodeCLI(args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errs)
		}
		return strings.Split(strings.TrimSpace(out), "\n")
	}
	ipLines, labelLines := show(), show("-f", "mpls")
	for _, want := range []string{
		"10.6.0.0/16 mtu 1400 nexthop encap mpls 600 via 10.1.0.2 dev a0 weight 2 nexthop via 10.2.0.2 dev b0 weight 1 proto static metric 1",
		"10.7.0.0/16 encap mpls 500 ttl 64 via 10.1.0.2 dev a0 proto static metric 1",
		"10.8.0.0/16 via 10.2.0.2 dev b0 mtu 1400 proto static metric 1",
	} {
		if !slices.Contains(ipLines, want) {
			t.Errorf("route show lacks %q:\n%s", want, strings.Join(ipLines, "\n"))
		}
	}
	if len(ipLines) != 8 || len(labelLines) != 5 {
		t.Fatalf("route show printed\n%s\n-f mpls route show printed\n%s\nwant 8 and 5 lines", strings.Join(ipLines, "\n"), strings.Join(labelLines, "\n"))
	}
	// As BGP's routes show: the node writes them with RouteEntry and
	// ILMEntry.String, proto bgp.
	bgpLines := []string{
		node.RouteEntry{Prefix: "10.77.0.0/16", Labels: []uint32{100}, Via: "10.1.0.2", Dev: "a0", Protocol: "bgp", Distance: 20}.String(),
	}
	bgpLabelLines := []string{
		node.ILMEntry{Label: 16000, Action: "pop", Dev: "lo", Protocol: "bgp"}.String(),
		node.ILMEntry{Label: 16001, Action: "swap", OutLabels: []uint32{500}, Via: "10.1.0.2", Dev: "a0", Protocol: "bgp"}.String(),
	}
	context := routeLinks + "addr add 10.1.0.1/24 dev a0\naddr add 10.2.0.1/24 dev b0\naddr add 2001:db8:2::1/64 dev b0\n"
	for _, l := range append(slices.Clone(ipLines), bgpLines...) {
		if _, err := config.Parse("show", strings.NewReader(context+"route add "+l+"\n")); err != nil {
			t.Errorf("route add %s: the config parser refuses it: %v", l, err)
		}
	}
	for _, l := range append(slices.Clone(labelLines), bgpLabelLines...) {
		if _, err := config.Parse("show", strings.NewReader(context+"-f mpls route add "+l+"\n")); err != nil {
			t.Errorf("-f mpls route add %s: the config parser refuses it: %v", l, err)
		}
	}
	for _, l := range ipLines {
		if code, out, errs := mplsnodeCLI(append(append([]string{"route", "replace"}, strings.Fields(l)...), "--socket", path)...); code != exitOK {
			t.Errorf("route replace %s: exit %d, stdout %q, stderr %q", l, code, out, errs)
		}
	}
	for _, l := range labelLines {
		if code, out, errs := mplsnodeCLI(append(append([]string{"-f", "mpls", "route", "replace"}, strings.Fields(l)...), "--socket", path)...); code != exitOK {
			t.Errorf("-f mpls route replace %s: exit %d, stdout %q, stderr %q", l, code, out, errs)
		}
	}
	// The replaced routes are the ones shown: the same lines again, and
	// each connected subnet now has a static route too.
	wantIP := slices.Clone(ipLines)
	for _, l := range ipLines {
		if c, ok := strings.CutSuffix(l, " proto kernel scope link"); ok {
			wantIP = append(wantIP, c+" proto static metric 1")
		}
	}
	slices.Sort(wantIP)
	gotIP := show()
	slices.Sort(gotIP)
	if !slices.Equal(gotIP, wantIP) {
		t.Errorf("route show after replacing each line:\n%s\nwant\n%s", strings.Join(gotIP, "\n"), strings.Join(wantIP, "\n"))
	}
	if got := show("-f", "mpls"); !slices.Equal(got, labelLines) {
		t.Errorf("-f mpls route show after replacing each line:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(labelLines, "\n"))
	}
}

// TestRouteReplace: route replace adds a route that is not there
// ("added"), puts a new one in the place of the static route to the
// prefix ("replaced": route show has the new label, once), for IP and
// label routes; route add of a prefix that has a route says to use
// replace. Planted bug (replace sent as add) caught: the second replace
// exits 1 with "exists".
func TestRouteReplace(t *testing.T) {
	path := routeNode(t, routeLinks+"addr add 10.1.0.1/24 dev a0\naddr add 10.2.0.1/24 dev b0\n")
	steps := []struct {
		args []string
		code int
		out  string // stdout prefix
		err  string // in stderr
	}{
		{[]string{"route", "replace", "10.9.0.0/16", "encap", "mpls", "100", "via", "10.1.0.2"}, exitOK, "added: route add 10.9.0.0/16 encap mpls 100 via inet 10.1.0.2", ""},
		{[]string{"route", "replace", "10.9.0.0/16", "encap", "mpls", "200", "via", "10.2.0.2"}, exitOK, "replaced: route add 10.9.0.0/16 encap mpls 200 via inet 10.2.0.2", ""},
		{[]string{"route", "add", "10.9.0.0/16", "via", "10.2.0.2"}, exitFailure, "", "exists; delete it first (or use route replace)"},
		{[]string{"route", "replace", "10.9.0.0/16", "via", "10.2.0.9", "dev", "c0"}, exitFailure, "", `control:1:`},
		{[]string{"-f", "mpls", "route", "replace", "300", "as", "301", "via", "inet", "10.1.0.2"}, exitOK, "added: mpls route add 300 as to 301", ""},
		{[]string{"-f", "mpls", "route", "replace", "300", "as", "302", "via", "inet", "10.2.0.2"}, exitOK, "replaced: mpls route add 300 as to 302", ""},
		{[]string{"-f", "mpls", "route", "add", "300", "via", "inet", "10.2.0.2"}, exitFailure, "", "label 300 has a route; delete it first (or use route replace)"},
	}
	for _, s := range steps {
		code, out, errs := mplsnodeCLI(append(s.args, "--socket", path)...)
		if code != s.code || !strings.HasPrefix(out, s.out) || !strings.Contains(errs, s.err) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d, stdout %q..., stderr with %q", s.args, code, out, errs, s.code, s.out, s.err)
		}
	}
	_, out, _ := mplsnodeCLI("route", "show", "--socket", path)
	if strings.Count(out, "10.9.0.0/16") != 1 || !strings.Contains(out, "10.9.0.0/16 encap mpls 200 via 10.2.0.2 dev b0 proto static metric 1") {
		t.Errorf("route show after replace:\n%s", out)
	}
	_, out, _ = mplsnodeCLI("-f", "mpls", "route", "show", "--socket", path)
	if strings.Count(out, "300 ") != 1 || !strings.Contains(out, "300 as to 302 via 10.2.0.2 dev b0 proto static") {
		t.Errorf("-f mpls route show after replace:\n%s", out)
	}
	// A replaced route that the node refuses leaves the one there.
	if code, _, _ := mplsnodeCLI("route", "replace", "10.9.0.0/16", "via", "10.2.0.9", "dev", "c0", "--socket", path); code != exitFailure {
		t.Errorf("route replace to an unknown device: exit %d", code)
	}
	if _, out, _ = mplsnodeCLI("route", "show", "--socket", path); !strings.Contains(out, "10.9.0.0/16 encap mpls 200 via 10.2.0.2") {
		t.Errorf("route show after a refused replace:\n%s", out)
	}
}

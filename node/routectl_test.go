package node_test

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/config"
	"github.com/mplsnode/mplsnode/node"
)

// routeShow asks the control socket for `route show` and returns its
// routes but the connected ones (proto kernel).
func routeShow(t *testing.T, path string) []node.RouteEntry {
	t.Helper()
	var rs []node.RouteEntry
	if err := json.Unmarshal([]byte(ask(t, path, "route show\n")), &rs); err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(rs, func(r node.RouteEntry) bool { return r.Protocol == "kernel" })
}

// fibRoute returns the FIB's route for dst as "prefix dev via labels".
func fibRoute(n *node.Node, dst string) (string, bool) {
	e, ok := n.Stack().Tables().FIB().Lookup(netip.MustParseAddr(dst))
	if !ok {
		return "", false
	}
	return e.Route().Prefix.String(), true
}

// TestControlRouteAddDel adds a route through the control socket, sees it
// in `route show` and in the FIB's lookups, deletes it and sees it gone;
// a second delete, and an invalid line, are refused with a positioned
// error and change nothing. (Checked by planting the bug: DelRoute that
// reports success without touching the FIB fails the "after del" checks.)
func TestControlRouteAddDel(t *testing.T) {
	n := obsNode(t)
	path := startControl(t, n)

	got := ask(t, path, "route add 172.16.0.0/16 encap mpls 300/301 via 10.2.0.2\n")
	var ch node.RouteChange
	if err := json.Unmarshal([]byte(got), &ch); err != nil {
		t.Fatalf("route add: %q: %v", got, err)
	}
	if want := (node.RouteChange{Change: "added", Route: "route add 172.16.0.0/16 encap mpls 300/301 via inet 10.2.0.2 dev out0"}); ch != want {
		t.Errorf("route add answered %+v, want %+v", ch, want)
	}
	rs := routeShow(t, path)
	if len(rs) != 1 || rs[0].Prefix != "172.16.0.0/16" || rs[0].Via != "10.2.0.2" || rs[0].Dev != "out0" ||
		len(rs[0].Labels) != 2 || rs[0].Labels[0] != 300 || rs[0].Protocol != "static" {
		t.Errorf("route show after add: %+v", rs)
	}
	if p, ok := fibRoute(n, "172.16.9.9"); !ok || p != "172.16.0.0/16" {
		t.Errorf("FIB lookup 172.16.9.9 after add: %q %v, want 172.16.0.0/16", p, ok)
	}
	// The same prefix again is refused.
	if got := ask(t, path, "route add 172.16.0.0/16 via 10.2.0.2\n"); got != "error: control:1:11: route 172.16.0.0/16 exists; delete it first (or use route replace)\n" {
		t.Errorf("duplicate route add: got %q", got)
	}

	got = ask(t, path, "route del 172.16.0.0/16\n")
	if err := json.Unmarshal([]byte(got), &ch); err != nil || ch.Change != "removed" || !strings.HasPrefix(ch.Route, "route add 172.16.0.0/16 ") {
		t.Errorf("route del: %q (%v)", got, err)
	}
	if rs := routeShow(t, path); len(rs) != 0 {
		t.Errorf("route show after del: %+v, want none but the connected routes", rs)
	}
	if p, ok := fibRoute(n, "172.16.9.9"); ok {
		t.Errorf("FIB lookup 172.16.9.9 after del: %q, want no route", p)
	}

	want := tables(n)
	for _, tc := range []struct{ req, want string }{
		{"route del 172.16.0.0/16\n", "error: control:1:11: no static route to 172.16.0.0/16\n"},
		{"route del 172.16.0.1/16\n", "error: control:1:11: prefix 172.16.0.1/16 has host bits set; did you mean 172.16.0.0/16?\n"},
		{"route del nonsense\n", "error: control:1:11: want a prefix such as 10.0.0.0/8 or 2001:db8::/32, got \"nonsense\"\n"},
		{"route add 172.16.0.0/16 via 10.2.0.2 dev out9\n", "error: control:1:42: unknown device"},
		{"route add 172.16.0.0/16 via 10.9.0.2\n", "error: control:1:"},
		{"route add 172.16.0.0/16 encap mpls 1048576 via 10.2.0.2\n", "error: control:1:"},
		{"route add 172.16.0.0/16 via 10.2.0.2 link add x type tap\n", "error: control:1:"},
		{"mpls route add 100 via inet 10.2.0.2\n", "error: control:1:16: label 100 has a route; delete it first (or use route replace)\n"},
		{"mpls route add 101 via inet 10.2.0.2 dev out9\n", "error: control:1:42: unknown device"},
		{"mpls route del 101\n", "error: control:1:16: no static label route for label 101\n"},
		{"mpls route del 1048576\n", "error: control:1:16: want a label 0..1048575, got \"1048576\"\n"},
	} {
		got := ask(t, path, tc.req)
		if !strings.HasPrefix(got, tc.want) || strings.Count(got, "\n") != 1 {
			t.Errorf("request %q: got %q, want one line starting %q", tc.req, got, tc.want)
		}
	}
	if got := tables(n); got != want {
		t.Errorf("refused changes changed the tables:\n%s\nwant\n%s", got, want)
	}
}

// TestControlLabelRouteAddDel adds a label route through the control
// socket, sees it in `mpls route show`, deletes it and sees it gone.
// (Checked by planting the bug: DelLabelRoute that keeps the entry fails
// the "after del" check.)
func TestControlLabelRouteAddDel(t *testing.T) {
	n := obsNode(t)
	path := startControl(t, n)
	show := func() map[uint32]node.ILMEntry {
		var es []node.ILMEntry
		if err := json.Unmarshal([]byte(ask(t, path, "mpls route show\n")), &es); err != nil {
			t.Fatal(err)
		}
		m := map[uint32]node.ILMEntry{}
		for _, e := range es {
			m[e.Label] = e
		}
		return m
	}
	before := show()
	got := ask(t, path, "mpls route add 101 as 201 via inet 10.2.0.2\n")
	var ch node.RouteChange
	if err := json.Unmarshal([]byte(got), &ch); err != nil {
		t.Fatalf("mpls route add: %q: %v", got, err)
	}
	if ch.Change != "added" || !strings.HasPrefix(ch.Route, "mpls route add 101 as to 201 via inet 10.2.0.2") {
		t.Errorf("mpls route add answered %+v", ch)
	}
	m := show()
	if e, ok := m[101]; !ok || e.Via != "10.2.0.2" || e.Dev != "out0" || len(e.OutLabels) != 1 || e.OutLabels[0] != 201 {
		t.Errorf("mpls route show after add: %+v", m)
	}
	if _, ok := m[100]; !ok {
		t.Errorf("mpls route show after add lost the file's label 100: %+v", m)
	}
	got = ask(t, path, "mpls route del 101\n")
	if err := json.Unmarshal([]byte(got), &ch); err != nil || ch.Change != "removed" {
		t.Errorf("mpls route del: %q (%v)", got, err)
	}
	m = show()
	if _, ok := m[101]; ok {
		t.Errorf("mpls route show after del still has 101: %+v", m)
	}
	if !reflect.DeepEqual(m, before) {
		t.Errorf("mpls route show after del: %+v, want as before the add: %+v", m, before)
	}

	// A multipath label route, in iproute2's words, through the same
	// parser as the file's.
	got = ask(t, path, "mpls route add 102 nexthop as 202 via inet 10.2.0.2 nexthop via inet 10.2.0.3 weight 3\n")
	if err := json.Unmarshal([]byte(got), &ch); err != nil || ch.Change != "added" {
		t.Fatalf("multipath mpls route add: %q (%v)", got, err)
	}
	e, ok := show()[102]
	if want := "102 nexthop as to 202 via 10.2.0.2 dev out0 weight 1 nexthop via 10.2.0.3 dev out0 weight 3 proto static"; !ok || e.Action != "multipath" || e.String() != want {
		t.Errorf("mpls route show after the multipath add: %+v %q, want %q", e, e.String(), want)
	}
}

// TestControlRouteChangesUntilReload: routes and label routes added at run
// time are gone after a reload, which returns to the file's. (Checked by
// planting the bug: Reload not replacing the FIB keeps 172.16.0.0/16.)
func TestControlRouteChangesUntilReload(t *testing.T) {
	n := obsNode(t)
	path := startControl(t, n)
	want := tables(n)
	for _, req := range []string{"route add 172.16.0.0/16 via 10.2.0.2\n", "mpls route add 101 via inet 10.2.0.2\n", "mpls route del 100\n"} {
		if got := ask(t, path, req); strings.HasPrefix(got, "error: ") {
			t.Fatalf("%q: %s", req, got)
		}
	}
	if _, ok := fibRoute(n, "172.16.0.1"); !ok {
		t.Fatal("route add did not reach the FIB")
	}
	cfg, err := config.Parse("obs.conf", strings.NewReader(obsConf))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if got := tables(n); got != want {
		t.Errorf("after reload:\n%s\nwant the file's:\n%s", got, want)
	}
}

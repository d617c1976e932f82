package node_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/node"
)

// TestControlRouteShow asks the control socket for the routes and the ILM
// of the two-link LSR and for BGP state it does not have. The expected
// lines are obsConf's, written as `ip -f mpls route show` prints a swap.
func TestControlRouteShow(t *testing.T) {
	n := obsNode(t)
	path := startControl(t, n)
	var ilm []node.ILMEntry
	if err := json.Unmarshal([]byte(ask(t, path, "mpls route show\n")), &ilm); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range ilm {
		lines = append(lines, e.String())
	}
	if want := "100 as to 200 via 10.2.0.2 dev out0 proto static"; !strings.Contains(strings.Join(lines, "\n"), want) {
		t.Errorf("mpls route show:\n%s\nwant a line %q", strings.Join(lines, "\n"), want)
	}
	var routes []node.RouteEntry
	if err := json.Unmarshal([]byte(ask(t, path, "route show\n")), &routes); err != nil {
		t.Fatal(err)
	}
	if len(routes) != 0 {
		t.Errorf("route show: %+v, want none (the file has no routes)", routes)
	}
	if got := ask(t, path, "bgp summary\n"); !strings.HasPrefix(got, "error: this node runs no BGP") {
		t.Errorf("bgp summary on a node without bgp: %q", got)
	}
}

package node_test

import (
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/internal/testkit/nodekit"
	"github.com/mplsnode/mplsnode/node"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
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
	// The connected routes only (the file has no routes).
	if len(routes) != 2 || routes[0].Protocol != "kernel" || routes[1].Protocol != "kernel" {
		t.Errorf("route show: %+v, want the two connected routes (the file has no routes)", routes)
	}
	if got := ask(t, path, "bgp summary\n"); !strings.HasPrefix(got, "error: this node runs no BGP") {
		t.Errorf("bgp summary on a node without bgp: %q", got)
	}
}

// TestBGPMetrics serves the metrics of a node with bgp lines (on a channel
// endpoint; its neighbour never answers) and checks the mplsnode_bgp_
// families against docs/METRICS.md, both ways, and a few values.
func TestBGPMetrics(t *testing.T) {
	n := nodekit.ChannelNode(t, "bgp.conf", `link add a0 type afpacket
addr add 10.1.0.1/24 dev a0
bgp as 65001 router-id 10.1.0.1
bgp neighbor 10.1.0.2 remote-as 65002 family ipv4-labeled-unicast
bgp network 10.10.10.10/32
`, nil, map[string]*channel.Endpoint{"a0": channel.New(64, 1500, tcpip.LinkAddress("\x02\x00\x00\x00\x01\x01"))})
	rec := httptest.NewRecorder()
	node.MetricsHandler(n).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	served := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (mplsnode_bgp_[a-z_]+) `).FindAllStringSubmatch(body, -1) {
		served[m[1]] = true
	}
	documented := documentedMetrics(t, "mplsnode_bgp_")
	for name := range served {
		if !documented[name] {
			t.Errorf("%s is served but not in docs/METRICS.md", name)
		}
	}
	for name := range documented {
		if !served[name] {
			t.Errorf("docs/METRICS.md lists %s, which is not served", name)
		}
	}
	for _, want := range []string{
		`mplsnode_bgp_session_established{neighbor="10.1.0.2"} 0`,
		`mplsnode_bgp_labels_used 1`,
		`mplsnode_bgp_labels_size 8000`,
		`mplsnode_bgp_prefixes{family="ipv4-labeled-unicast",neighbor="10.1.0.2",stage="received"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

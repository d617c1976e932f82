package config_test

import (
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/config"
)

// TestShownWords: the words `mplsnode route show` writes after a route
// (proto, metric, scope) parse anywhere in a route and a label route, a
// multipath one included, and change nothing (the canonical form is the
// route's without them); a bad value, a word twice or a missing value is
// an error at its column. Planted bug (metric taken without its number)
// caught: "metric 1" fails as an unknown word "1".
func TestShownWords(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"route add 10.9.0.0/16 encap mpls 100 via 172.16.20.21 dev virt01 proto static metric 1", "route add 10.9.0.0/16 encap mpls 100 via inet 172.16.20.21 dev virt01"},
		{"route add 172.16.20.0/24 dev virt01 proto kernel scope link", "route add 172.16.20.0/24 dev virt01"},
		{"route add 10.9.0.0/16 proto bgp metric 20 via 172.16.20.21", "route add 10.9.0.0/16 via inet 172.16.20.21 dev virt01"},
		{"route add 10.9.0.0/16 nexthop via 172.16.20.21 weight 1 nexthop via 172.16.20.22 weight 2 proto static metric 1", "route add 10.9.0.0/16 nexthop via inet 172.16.20.21 dev virt01 weight 1 nexthop via inet 172.16.20.22 dev virt01 weight 2"},
		{"-f mpls route add 100 as to 200 via inet 172.16.20.21 dev virt01 proto bgp", "-f mpls route add 100 as to 200 via inet 172.16.20.21 dev virt01"},
		{"-f mpls route add 101 nexthop via inet 172.16.20.21 weight 1 nexthop via inet 172.16.20.22 weight 3 proto static", "-f mpls route add 101 nexthop via inet 172.16.20.21 dev virt01 weight 1 nexthop via inet 172.16.20.22 dev virt01 weight 3"},
	} {
		cfg := mustParse(t, "s.conf", prelude+tc.in+"\n")
		var got string
		for _, l := range strings.Split(cfg.Format(), "\n") {
			if strings.HasPrefix(l, "route add 10.9.") || strings.HasPrefix(l, "route add 172.16.20.0/24") || strings.HasPrefix(l, "-f mpls route add 10") {
				got = l
			}
		}
		if got != tc.want {
			t.Errorf("%s\n  formats as %q\n  want       %q", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"route add 10.9.0.0/16 via 172.16.20.21 proto ospf", `:6:46: unknown proto "ospf"`},
		{"route add 10.9.0.0/16 via 172.16.20.21 metric x", `:6:47: bad route metric "x"`},
		{"route add 10.9.0.0/16 via 172.16.20.21 scope host", `:6:46: unknown scope "host"`},
		{"route add 10.9.0.0/16 via 172.16.20.21 proto static proto bgp", `:6:53: proto given twice`},
		{"route add 10.9.0.0/16 via 172.16.20.21 proto", `proto`},
		{"-f mpls route add 100 via inet 172.16.20.21 proto kernal", `unknown proto "kernal"`},
	} {
		_, err := config.Parse("s.conf", strings.NewReader(prelude+tc.in+"\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one with %q", tc.in, err, tc.want)
		}
	}
}

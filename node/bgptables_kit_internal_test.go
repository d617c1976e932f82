package node

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/config"
	"github.com/mplsnode/mplsnode/mpls"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// bgpTablesNode starts a node from conf, its one link a0 on a channel
// endpoint, logging to logger (discarded when nil), closed when t ends;
// it returns the node, the parsed config and BGP tables built on the
// node's stack from that config (not installed as n.bgpTab: the caller
// decides whether the control paths see them).
func bgpTablesNode(t *testing.T, conf string, logger *slog.Logger) (*Node, *config.Config, *bgpTables) {
	t.Helper()
	cfg, err := config.Parse("t.conf", strings.NewReader(conf))
	if err != nil {
		t.Fatal(err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	a := channel.New(16, 1500, tcpip.LinkAddress("\x02\x00\x00\x00\x01\x01"))
	n, err := New(cfg, Options{Logger: logger, Endpoints: map[string]gstack.LinkEndpoint{"a0": a}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(); a.Drain() })
	c, err := convert(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return n, cfg, newBGPTables(n.Stack(), cfg, c)
}

// bgpRoute is a route BGP learned for prefix p: next hop 10.1.0.9 on a0,
// pushing label l.
func bgpRoute(p netip.Prefix, l mpls.Label) mpls.Route {
	return mpls.Route{Prefix: p, NextHops: []mpls.NextHop{{Via: netip.MustParseAddr("10.1.0.9"), Device: "a0", Labels: []mpls.Label{l}}}}
}

// pushedLabels returns the labels n's FIB pushes towards dst (nil when
// nothing routes it).
func pushedLabels(n *Node, dst string) []mpls.Label {
	e, ok := n.Stack().Tables().FIB().Lookup(netip.MustParseAddr(dst))
	if !ok {
		return nil
	}
	return e.Group.Hops[0].Labels
}

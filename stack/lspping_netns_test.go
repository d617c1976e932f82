package stack_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/config"
	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/lspping"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/node"
	"github.com/mplsnode/mplsnode/stack"
)

// TestPingLSP: an embedder's stack checks its LSP before using it
// (stack.PingLSP, stack.TraceLSP) against an mplsnode egress that pops
// label 200: return code 3, one hop; a label the egress does not know
// gets 11 (no label entry).
func TestPingLSP(t *testing.T) {
	netns.SkipUnlessRoot(t)
	ns0, ns1 := netns.New(t, "lps0"), netns.New(t, "lps1")
	for _, ns := range []*netns.NS{ns0, ns1} {
		ns.MustExec("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
	}
	v01, v10 := netns.VethPair(t, ns0, ns1)
	cfg, err := config.Parse("egress.conf", strings.NewReader(fmt.Sprintf(`link add %[1]s type afpacket
addr add 172.16.21.22/24 dev %[1]s
addr add 10.10.10.10/32 dev lo
-f mpls route add 200 dev lo
`, v10)))
	if err != nil {
		t.Fatal(err)
	}
	var egress *node.Node
	if err := ns1.Run(func() (err error) {
		egress, err = node.New(cfg, node.Options{Logger: slog.New(slog.DiscardHandler)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { egress.Close() })
	route := func(p string, label mpls.Label) stack.Route {
		return stack.Route{Prefix: netip.MustParsePrefix(p), Via: netip.MustParseAddr("172.16.21.22"), Link: v01, Labels: []mpls.Label{label}}
	}
	s := newStackIn(t, ns0, stack.Config{
		Links:     []stack.Link{{Name: v01, Kind: stack.LinkAFPacket}},
		Addresses: []stack.Address{{Link: v01, Prefix: netip.MustParsePrefix("172.16.21.21/24")}},
		Routes:    []stack.Route{route("10.10.10.10/32", 200), route("10.10.10.11/32", 201)},
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fec := func(p string) lspping.FEC {
		f, err := lspping.PrefixFEC("ldp", netip.MustParsePrefix(p))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	opts := stack.LSPProbeOptions{FEC: fec("10.10.10.10/32"), Count: 2, Interval: 20 * time.Millisecond, Timeout: 2 * time.Second, MaxTTL: 3}
	res, err := s.PingLSP(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Egress != 2 || res.Probes[0].Replier != "172.16.21.22" {
		t.Errorf("PingLSP: %+v, want 2 egress replies from 172.16.21.22", res)
	}
	tr, err := s.TraceLSP(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Paths) != 1 || !tr.Paths[0].Reached || len(tr.Paths[0].Hops) != 1 {
		t.Errorf("TraceLSP: %+v, want the egress at hop 1", tr)
	}
	opts.FEC = fec("10.10.10.11/32")
	res, err = s.PingLSP(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Replies != 2 || lspping.ReturnCode(res.Probes[0].Code) != lspping.CodeNoLabelEntry {
		t.Errorf("PingLSP over label 201: %+v, want 2 replies no-label-entry", res)
	}
	if _, err := s.PingLSP(ctx, stack.LSPProbeOptions{FEC: fec("192.0.2.0/24")}); err == nil {
		t.Errorf("PingLSP for a prefix with no route: no error")
	}
}

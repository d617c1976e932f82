package node_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/config"
	"github.com/mplsnode/mplsnode/internal/testkit/nodekit"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
)

// TestReloadWeightOnly: a reload that changes nothing but one ECMP next
// hop's weight is applied, and logged as a changed route. The oracle is
// the reloaded file itself: every FIB route's hops and weights must be
// the file's. The routes share their hops, so that the table builder's
// group sharing (consecutive routes with the same hops share one group)
// is what decides: a comparison that ignores the weight keeps the
// previous route's weights. Planted bugs: mpls.sameHops without the
// weight (the second route keeps weight 1); node's sameEntry without the
// weight (the reload logs no change).
func TestReloadWeightOnly(t *testing.T) {
	const base = `
link add in0 type afpacket
link add out0 type afpacket
addr add 10.1.0.1/24 dev in0
addr add 10.2.0.1/24 dev out0
`
	conf := func(w1, w2, w3 int) string {
		var b strings.Builder
		b.WriteString(base)
		for i, w := range []int{w1, w2, w3} {
			fmt.Fprintf(&b, "route add 10.%d.0.0/16 nexthop via 10.2.0.2 weight 1 nexthop via 10.2.0.3 weight %d\n", 50+i, w)
		}
		return b.String()
	}
	parse := func(s string) *config.Config {
		t.Helper()
		cfg, err := config.Parse("w.conf", strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	var logs bytes.Buffer
	n := nodekit.ChannelNode(t, "w.conf", conf(1, 1, 1), slog.New(slog.NewTextHandler(&logs, nil)),
		map[string]*channel.Endpoint{"in0": channel.New(16, 1500, macIn), "out0": channel.New(16, 1500, macOut)})
	check := func(w1, w2, w3 int) {
		t.Helper()
		fib := n.Stack().Tables().FIB()
		for i, w := range []int{w1, w2, w3} {
			dst := netip.AddrFrom4([4]byte{10, byte(50 + i), 1, 1})
			e, ok := fib.Lookup(dst)
			if !ok {
				t.Fatalf("%s: no route", dst)
			}
			var got []string
			for _, h := range e.Group.Hops {
				got = append(got, fmt.Sprintf("%s/%d", h.Via, max(h.Weight, 1)))
			}
			if want := fmt.Sprintf("[10.2.0.2/1 10.2.0.3/%d]", w); fmt.Sprint(got) != want {
				t.Errorf("%s: hops %v, want %s (the file's)", e.Prefix, got, want)
			}
		}
	}
	check(1, 1, 1)
	for _, w := range [][3]int{{1, 3, 1}, {1, 3, 7}, {2, 3, 7}, {1, 1, 1}} {
		logs.Reset()
		if err := n.Reload(parse(conf(w[0], w[1], w[2]))); err != nil {
			t.Fatal(err)
		}
		check(w[0], w[1], w[2])
		if !strings.Contains(logs.String(), "reload: routes") || !strings.Contains(logs.String(), "changed=") {
			t.Errorf("reload to weights %v logged no changed route: %s", w, logs.String())
		}
	}
}

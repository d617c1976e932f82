package config_test

import (
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/config"
)

func mustParse(t *testing.T, name, src string) *config.Config {
	t.Helper()
	cfg, err := config.Parse(name, strings.NewReader(src))
	if err != nil {
		t.Fatalf("Parse(%q) error:\n%v", src, err)
	}
	return cfg
}

// TestParseStatements parses one statement after the prelude and compares
// the resulting item, written back in canonical form.
func TestParseStatements(t *testing.T) {
	tests := []struct {
		name, in, want string
		action         config.LabelAction // label routes only
	}{
		{name: "link afpacket", in: "link add virt02 type afpacket", want: "link add virt02 type afpacket"},
		{name: "link afpacket mtu", in: "ip link add virt02 type afpacket mtu 9000", want: "link add virt02 type afpacket mtu 9000"},
		{name: "link afpacket queues mode", in: "link add virt10 type afpacket queues 2 mode ring", want: "link add virt10 type afpacket queues 2 mode ring"},
		{name: "link afpacket mode auto", in: "link add virt10 mode auto type afpacket queues 1", want: "link add virt10 type afpacket"},
		{name: "link afpacket mode mmsg", in: "link add virt10 type afpacket mode mmsg", want: "link add virt10 type afpacket mode mmsg"},
		{name: "link afpacket qdisc-bypass", in: "link add virt10 type afpacket qdisc-bypass on mode ring", want: "link add virt10 type afpacket mode ring qdisc-bypass on"},
		{name: "link afpacket busy-poll", in: "link add virt10 busy-poll 50 type afpacket mode ring", want: "link add virt10 type afpacket mode ring busy-poll 50"},
		{name: "link afpacket busy-poll 0", in: "link add virt10 type afpacket busy-poll 0", want: "link add virt10 type afpacket busy-poll 0"},
		{name: "link afpacket rx-ring-frames", in: "link add virt10 rx-ring-frames 16384 type afpacket", want: "link add virt10 type afpacket rx-ring-frames 16384"},
		{name: "link afpacket rx-ring-frames ring", in: "link add virt10 type afpacket mode ring rx-ring-frames 64 queues 2", want: "link add virt10 type afpacket queues 2 mode ring rx-ring-frames 64"},
		{name: "link afpacket rx-ring-frames max", in: "link add virt10 type afpacket rx-ring-frames 32768 busy-poll 50", want: "link add virt10 type afpacket busy-poll 50 rx-ring-frames 32768"},
		{name: "link tap", in: "link add tap0 type tap", want: "link add tap0 type tap"},
		{name: "link tap bridge mtu", in: "link add tap0 mtu 1500 type tap bridge br0", want: "link add tap0 type tap bridge br0 mtu 1500"},
		{name: "link tap queues", in: "link add tap0 type tap queues 4", want: "link add tap0 type tap queues 4"},
		{name: "link tap address", in: "link add tap0 address 02:00:00:00:00:0A type tap bridge br0", want: "link add tap0 type tap bridge br0 address 02:00:00:00:00:0a"},
		{name: "link xdp queues", in: "ip link add virt10 type xdp queues 2 mtu 1500", want: "link add virt10 type xdp mtu 1500 queues 2"},
		{name: "link xdp", in: "link add virt10 type xdp", want: "link add virt10 type xdp"},
		{name: "addr v4", in: "addr add 10.9.0.1/16 dev virt12", want: "addr add 10.9.0.1/16 dev virt12"},
		{name: "addr v6", in: "ip -6 addr add 2001:db8:2::1/64 dev virt12", want: "addr add 2001:db8:2::1/64 dev virt12"},
		{name: "addr host", in: "ip address add 10.10.10.10 dev lo", want: "addr add 10.10.10.10/32 dev lo"},
		{name: "addr -4", in: "ip -4 addr add 10.9.0.1/16 dev virt12", want: "addr add 10.9.0.1/16 dev virt12"},
		{name: "route plain", in: "route add 172.16.22.0/24 via 172.16.20.21 mtu lock 1496",
			want: "route add 172.16.22.0/24 via inet 172.16.20.21 dev virt01 mtu lock 1496"},
		{name: "route encap", in: "route add 10.10.10.10/32 encap mpls 100 via inet 172.16.20.21 mtu lock 1496",
			want: "route add 10.10.10.10/32 encap mpls 100 via inet 172.16.20.21 dev virt01 mtu lock 1496"},
		{name: "route encap stack ttl", in: "ip route add 10.0.0.0/8 encap mpls 100/200/16 ttl 64 via 172.16.21.22 mtu 1400",
			want: "route add 10.0.0.0/8 encap mpls 100/200/16 ttl 64 via inet 172.16.21.22 dev virt12 mtu 1400"},
		{name: "route encap explicit null v4", in: "route add 10.0.0.0/8 encap mpls 100/0 via 172.16.20.21",
			want: "route add 10.0.0.0/8 encap mpls 100/0 via inet 172.16.20.21 dev virt01"},
		{name: "route encap explicit null v6", in: "route add 2001:db8:9::/64 encap mpls 2 via inet6 2001:db8:1::2",
			want: "route add 2001:db8:9::/64 encap mpls 2 via inet6 2001:db8:1::2 dev virt01"},
		{name: "route v6 link-local", in: "route add 2001:db8::/64 encap mpls 100/200 via inet6 fe80::1 dev virt01",
			want: "route add 2001:db8::/64 encap mpls 100/200 via inet6 fe80::1 dev virt01"},
		{name: "route -6", in: "ip -6 route add 2001:db8:9::/48 via 2001:db8:1::2 mtu 1280",
			want: "route add 2001:db8:9::/48 via inet6 2001:db8:1::2 dev virt01 mtu 1280"},
		{name: "route default", in: "route add default via 172.16.20.21", want: "route add 0.0.0.0/0 via inet 172.16.20.21 dev virt01"},
		{name: "route default v6", in: "ip route add default via inet6 fe80::1 dev virt12", want: "route add ::/0 via inet6 fe80::1 dev virt12"},
		{name: "route -6 default dev", in: "ip -6 route add default dev virt12", want: "route add ::/0 dev virt12"},
		{name: "route connected", in: "route add 192.168.0.0/16 dev virt12", want: "route add 192.168.0.0/16 dev virt12"},
		{name: "route host no length", in: "route add 192.168.1.1 via 172.16.20.21", want: "route add 192.168.1.1/32 via inet 172.16.20.21 dev virt01"},
		{name: "route via off-link with dev", in: "route add 10.0.0.0/8 via 192.168.1.1 dev virt12", want: "route add 10.0.0.0/8 via inet 192.168.1.1 dev virt12"},
		{name: "route trailing comment", in: "route add 10.0.0.0/8 via 172.16.20.21 # to the core", want: "route add 10.0.0.0/8 via inet 172.16.20.21 dev virt01"},
		{name: "route max depth", in: "route add 10.0.0.0/8 encap mpls 16/17/18/19/20/21/22/23/24/25/26/27/28/29/30/1048575 via 172.16.20.21",
			want: "route add 10.0.0.0/8 encap mpls 16/17/18/19/20/21/22/23/24/25/26/27/28/29/30/1048575 via inet 172.16.20.21 dev virt01"},
		{name: "pop forward", in: "-f mpls route add 100 via inet 172.16.21.22 dev virt12", action: config.LabelPopForward,
			want: "-f mpls route add 100 via inet 172.16.21.22 dev virt12"},
		{name: "pop forward dev inferred", in: "ip -f mpls route add 100 via inet 172.16.21.22", action: config.LabelPopForward,
			want: "-f mpls route add 100 via inet 172.16.21.22 dev virt12"},
		{name: "pop forward v6", in: "-f mpls route add 101 via inet6 2001:db8:1::2", action: config.LabelPopForward,
			want: "-f mpls route add 101 via inet6 2001:db8:1::2 dev virt01"},
		{name: "swap and push", in: "-f mpls route add 200 as to 300/400 via inet 172.16.21.22", action: config.LabelSwap,
			want: "-f mpls route add 200 as to 300/400 via inet 172.16.21.22 dev virt12"},
		{name: "swap without to", in: "ip -M route add 200 as 300 via inet 172.16.21.22", action: config.LabelSwap,
			want: "-f mpls route add 200 as to 300 via inet 172.16.21.22 dev virt12"},
		{name: "multipath swap", in: "-f mpls route add 100 nexthop as 200 via inet 172.16.21.22 dev virt12 nexthop as to 300/400 via 172.16.20.21 weight 3",
			action: config.LabelMultipath,
			want:   "-f mpls route add 100 nexthop as to 200 via inet 172.16.21.22 dev virt12 nexthop as to 300/400 via inet 172.16.20.21 dev virt01 weight 3"},
		{name: "multipath swap and pop", in: "ip -M route add 100 nexthop as 200 via inet 172.16.21.22 nexthop via inet6 2001:db8:1::2 weight 256",
			action: config.LabelMultipath,
			want:   "-f mpls route add 100 nexthop as to 200 via inet 172.16.21.22 dev virt12 nexthop via inet6 2001:db8:1::2 dev virt01 weight 256"},
		{name: "multipath explicit null pops", in: "-f mpls route add 0 nexthop via inet 172.16.21.22 nexthop via inet 172.16.20.21",
			action: config.LabelMultipath,
			want:   "-f mpls route add 0 nexthop via inet 172.16.21.22 dev virt12 nexthop via inet 172.16.20.21 dev virt01"},
		{name: "one nexthop is a swap", in: "-f mpls route add 100 nexthop as 200 via inet 172.16.21.22", action: config.LabelSwap,
			want: "-f mpls route add 100 as to 200 via inet 172.16.21.22 dev virt12"},
		{name: "one nexthop is a pop", in: "-f mpls route add 100 nexthop via inet 172.16.21.22 weight 5", action: config.LabelPopForward,
			want: "-f mpls route add 100 via inet 172.16.21.22 dev virt12"},
		{name: "local explicit null v4", in: "-f mpls route add 0 dev lo", action: config.LabelPopLocal, want: "-f mpls route add 0 dev lo"},
		{name: "local explicit null v6", in: "-family mpls route add 2 dev lo", action: config.LabelPopLocal, want: "-f mpls route add 2 dev lo"},
		{name: "local label", in: "-f mpls route add 1048575 dev lo", action: config.LabelPopLocal, want: "-f mpls route add 1048575 dev lo"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustParse(t, "node.conf", prelude+tc.in+"\n")
			var got string
			switch {
			case strings.Contains(tc.want, "link add"):
				got = cfg.Links[len(cfg.Links)-1].String()
			case strings.HasPrefix(tc.want, "addr"):
				got = cfg.Addrs[len(cfg.Addrs)-1].String()
			case strings.HasPrefix(tc.want, "route"):
				if len(cfg.Routes) != 1 {
					t.Fatalf("got %d routes, want 1", len(cfg.Routes))
				}
				got = cfg.Routes[0].String()
			default:
				if len(cfg.LabelRoutes) != 1 {
					t.Fatalf("got %d label routes, want 1", len(cfg.LabelRoutes))
				}
				r := cfg.LabelRoutes[0]
				got = r.String()
				if r.Action != tc.action {
					t.Errorf("got action %v, want %v", r.Action, tc.action)
				}
			}
			if got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestParseSettings(t *testing.T) {
	def := mustParse(t, "empty.conf", "")
	if want := (config.Sysctl{IPTTLPropagate: true, DefaultTTL: 255, PlatformLabels: 1 << 20}); def.Sysctl != want {
		t.Errorf("got default sysctls %+v, want %+v", def.Sysctl, want)
	}
	if want := (config.Settings{GSO: config.GSOEndpoint, TCPCongestion: "cubic", TCPSACK: true, TCPRACK: true}); def.Settings != want {
		t.Errorf("got default settings %+v, want %+v", def.Settings, want)
	}
	src := `# every setting, against its default
link add virt01 type afpacket
sysctl net.mpls.ip_ttl_propagate=0
sysctl -w net.mpls.default_ttl=64
sysctl net/mpls/platform_labels = 1000
sysctl net.ipv4.ip_forward=1
	sysctl -q net.ipv6.conf.all.forwarding =1
sysctl net.mpls.conf.virt01.input=0
set gso stack
set tcp cc cubic
set tcp sack off
set tcp rack off
set forward xdp auto
`
	cfg := mustParse(t, "s.conf", src)
	if want := (config.Sysctl{IPTTLPropagate: false, DefaultTTL: 64, PlatformLabels: 1000, IPv4Forward: true, IPv6Forward: true}); cfg.Sysctl != want {
		t.Errorf("got sysctls %+v, want %+v", cfg.Sysctl, want)
	}
	if want := (config.Settings{GSO: config.GSOStack, TCPCongestion: "cubic", TCPSACK: false, TCPRACK: false, ForwardXDP: config.XDPAuto}); cfg.Settings != want {
		t.Errorf("got settings %+v, want %+v", cfg.Settings, want)
	}
	if cfg.Links[0].MPLSInput {
		t.Errorf("got MPLSInput true on virt01, want false after net.mpls.conf.virt01.input=0")
	}
	for key, want := range map[string]string{
		"net.mpls.default_ttl":         "s.conf:4:1",
		"net.ipv6.conf.all.forwarding": "s.conf:7:2",
		"set tcp rack":                 "s.conf:12:1",
		"set forward xdp":              "s.conf:13:1",
	} {
		if got := cfg.Where[key].String(); got != want {
			t.Errorf("got Where[%q] = %s, want %s", key, got, want)
		}
	}
	gso := mustParse(t, "g.conf", "set gso off\n")
	if gso.Settings.GSO != config.GSOOff {
		t.Errorf("got GSO %v, want off", gso.Settings.GSO)
	}
}

// TestPositions checks the positions carried by every item and its tokens.
func TestPositions(t *testing.T) {
	src := "link add virt01 type afpacket\n" +
		"\taddr add 172.16.20.20/24 dev virt01 # ours\n" +
		"\n" +
		"ip route add 10.10.10.10/32 encap mpls 100 via inet 172.16.20.21 dev virt01\n" +
		"ip -f mpls route add 200 as to 300 via inet 172.16.20.21\n"
	cfg := mustParse(t, "p.conf", src)
	checks := []struct {
		what string
		got  config.Pos
		want string
	}{
		{"link", cfg.Links[0].Pos, "p.conf:1:1"},
		{"link name", cfg.Links[0].NamePos, "p.conf:1:10"},
		{"addr", cfg.Addrs[0].Pos, "p.conf:2:2"},
		{"addr prefix", cfg.Addrs[0].PrefixPos, "p.conf:2:11"},
		{"addr dev", cfg.Addrs[0].DevPos, "p.conf:2:31"},
		{"route", cfg.Routes[0].Pos, "p.conf:4:1"},
		{"route prefix", cfg.Routes[0].PrefixPos(), "p.conf:4:14"},
		{"route labels", cfg.Routes[0].LabelsPos(), "p.conf:4:40"},
		{"route via", cfg.Routes[0].ViaPos(), "p.conf:4:53"},
		{"route dev", cfg.Routes[0].DevPos(), "p.conf:4:70"},
		{"label route", cfg.LabelRoutes[0].Pos, "p.conf:5:1"},
		{"label", cfg.LabelRoutes[0].LabelPos, "p.conf:5:22"},
		{"out labels", cfg.LabelRoutes[0].OutLabelsPos, "p.conf:5:32"},
		{"label via", cfg.LabelRoutes[0].ViaPos, "p.conf:5:45"},
	}
	for _, c := range checks {
		if c.got.String() != c.want {
			t.Errorf("%s: got position %s, want %s", c.what, c.got, c.want)
		}
	}
	if r := cfg.LabelRoutes[0]; r.DevPos.IsValid() {
		t.Errorf("got DevPos %s for a dev filled from the subnet, want none", r.DevPos)
	}
	e := cfg.Routes[0].ViaPos().Errorf("172.16.20.21", "neighbour did not answer")
	if got, want := e.Error(), "p.conf:4:53: neighbour did not answer"; got != want {
		t.Errorf("got Pos.Errorf %q, want %q", got, want)
	}
}

func TestSeedConfigs(t *testing.T) {
	ns0, err := config.ParseFile("testdata/seed-ns0.conf")
	if err != nil {
		t.Fatal(err)
	}
	pfx := netip.MustParsePrefix
	ip := netip.MustParseAddr
	wantLinks := []config.Link{{Name: "virt01", Type: config.LinkAFPacket, MPLSInput: true}}
	wantAddrs := []config.Addr{{Prefix: pfx("172.16.20.20/24"), Dev: "virt01"}}
	wantRoutes := []config.Route{
		{Prefix: pfx("10.10.10.10/32"), Labels: []uint32{100}, Via: ip("172.16.20.21"), Dev: "virt01", MTU: 1496, MTULock: true},
		{Prefix: pfx("172.16.21.0/24"), Via: ip("172.16.20.21"), Dev: "virt01", MTU: 1496, MTULock: true},
	}
	compare(t, "ns0 links", stripLinks(ns0.Links), wantLinks)
	compare(t, "ns0 addrs", stripAddrs(ns0.Addrs), wantAddrs)
	compare(t, "ns0 routes", stripRoutes(ns0.Routes), wantRoutes)
	if len(ns0.LabelRoutes) != 0 {
		t.Errorf("got %d label routes on ns0, want 0", len(ns0.LabelRoutes))
	}
	if got := ns0.Routes[0].Pos.String(); got != "testdata/seed-ns0.conf:12:1" {
		t.Errorf("got ns0 FTN position %s, want testdata/seed-ns0.conf:12:1", got)
	}

	ns1, err := config.ParseFile("testdata/seed-ns1.conf")
	if err != nil {
		t.Fatal(err)
	}
	compare(t, "ns1 links", stripLinks(ns1.Links), []config.Link{
		{Name: "virt10", Type: config.LinkAFPacket, MPLSInput: true},
		{Name: "virt12", Type: config.LinkAFPacket, MPLSInput: true},
	})
	compare(t, "ns1 addrs", stripAddrs(ns1.Addrs), []config.Addr{
		{Prefix: pfx("172.16.20.21/24"), Dev: "virt10"},
		{Prefix: pfx("172.16.21.21/24"), Dev: "virt12"},
	})
	compare(t, "ns1 label routes", stripLabelRoutes(ns1.LabelRoutes), []config.LabelRoute{
		{Label: 100, Action: config.LabelPopForward, Via: ip("172.16.21.22"), Dev: "virt12"},
	})
	if len(ns1.Routes) != 0 {
		t.Errorf("got %d routes on ns1, want 0 (connected subnets only)", len(ns1.Routes))
	}
	if !ns1.Sysctl.IPv4Forward || ns1.Sysctl.PlatformLabels != 1000 {
		t.Errorf("got ns1 sysctls %+v, want ip_forward=1 and platform_labels=1000", ns1.Sysctl)
	}
}

// TestFormatRoundTrip: a canonical config parses back to the same values.
func TestFormatRoundTrip(t *testing.T) {
	for _, f := range []string{"testdata/seed-ns0.conf", "testdata/seed-ns1.conf", "testdata/all.conf"} {
		t.Run(f, func(t *testing.T) {
			cfg, err := config.ParseFile(f)
			if err != nil {
				t.Fatal(err)
			}
			text := cfg.Format()
			again := mustParse(t, "again.conf", text)
			if got := again.Format(); got != text {
				t.Errorf("Format after reparse:\n%s\nwant\n%s", got, text)
			}
			compare(t, "routes", stripRoutes(again.Routes), stripRoutes(cfg.Routes))
			compare(t, "label routes", stripLabelRoutes(again.LabelRoutes), stripLabelRoutes(cfg.LabelRoutes))
		})
	}
}

func TestParseFileMissing(t *testing.T) {
	_, err := config.ParseFile("testdata/no-such.conf")
	if !os.IsNotExist(unwrapAll(err)) {
		t.Errorf("got %v, want a not-exist error", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func compare[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\ngot  %+v\nwant %+v", what, got, want)
	}
}

// The strip functions zero positions so values compare by content.
func stripLinks(in []config.Link) []config.Link {
	out := append([]config.Link(nil), in...)
	for i := range out {
		out[i].Pos, out[i].NamePos, out[i].MTUPos = config.Pos{}, config.Pos{}, config.Pos{}
	}
	return out
}

func stripAddrs(in []config.Addr) []config.Addr {
	out := append([]config.Addr(nil), in...)
	for i := range out {
		out[i].Pos, out[i].PrefixPos, out[i].DevPos = config.Pos{}, config.Pos{}, config.Pos{}
	}
	return out
}

func stripRoutes(in []config.Route) []config.Route {
	out := append([]config.Route(nil), in...)
	for i := range out {
		r := &out[i]
		r.Pos, r.PrefixCol, r.LabelsCol, r.ViaCol, r.DevCol = config.Pos{}, 0, 0, 0, 0
	}
	return out
}

func stripLabelRoutes(in []config.LabelRoute) []config.LabelRoute {
	out := append([]config.LabelRoute(nil), in...)
	for i := range out {
		r := &out[i]
		r.Pos, r.LabelPos, r.OutLabelsPos, r.ViaPos, r.DevPos = config.Pos{}, config.Pos{}, config.Pos{}, config.Pos{}, config.Pos{}
	}
	return out
}

// TestParseMultipathAnd6PE: multipath routes keep their hops (devices
// filled from the connected subnets, weights, labels) and 6PE routes their
// IPv4 next hop, and both survive the canonical form.
func TestParseMultipathAnd6PE(t *testing.T) {
	cfg, err := config.ParseFile("testdata/multipath.conf")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Routes) != 4 {
		t.Fatalf("got %d routes, want 4", len(cfg.Routes))
	}
	r := cfg.Routes[1]
	if len(r.NextHops) != 2 || r.MTU != 1400 || r.NextHops[0].Weight != 3 || r.NextHops[0].Dev != "virt01" ||
		r.NextHops[1].Dev != "virt02" || config.FormatStack(r.NextHops[1].Labels) != "300/301" || r.NextHops[1].TTL != 9 {
		t.Errorf("route 2 = %+v", r)
	}
	if h := r.NextHops[1]; h.Pos.String() != "testdata/multipath.conf:8:67" || h.ViaPos.Col == 0 {
		t.Errorf("second nexthop at %s (via at %s), want testdata/multipath.conf:8:67", h.Pos, h.ViaPos)
	}
	if r := cfg.Routes[2]; !r.Via.Is4() || !r.Prefix.Addr().Is6() || r.Dev != "virt01" || config.FormatStack(r.Labels) != "300" {
		t.Errorf("6PE route = %+v", r)
	}
	again, err := config.Parse("again.conf", strings.NewReader(cfg.Format()))
	if err != nil {
		t.Fatalf("canonical form: %v\n%s", err, cfg.Format())
	}
	if again.Format() != cfg.Format() {
		t.Errorf("canonical form changed:\n%s\nwant\n%s", again.Format(), cfg.Format())
	}
}

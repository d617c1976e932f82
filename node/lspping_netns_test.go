package node_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/internal/testkit/planetest"
	"github.com/mplsnode/mplsnode/internal/testkit/tshark"
	"github.com/mplsnode/mplsnode/internal/testkit/wiretest"
	"github.com/mplsnode/mplsnode/lspping"
	"github.com/mplsnode/mplsnode/node"
)

// lspSeed is the seed topology with three mplsnodes: ns0 (host, pushes
// label 100 for 10.10.10.10/32, 101 for 10.10.10.11/32) -- ns1 (LSR: 100
// swapped to 200, 101 popped: penultimate hop popping) -- ns2 (egress:
// both addresses on lo, 200 popped), the return path plain IP.
type lspSeed struct {
	ns0, ns1, ns2 *netns.NS
	v10, v12, v21 string // ns1's link to ns0, ns1's to ns2, ns2's to ns1
	n0, n1, n2    *node.Node
}

func startLSPSeed(t *testing.T, prefix, lsrMode string) *lspSeed {
	t.Helper()
	s := &lspSeed{ns0: netns.New(t, prefix+"0"), ns1: netns.New(t, prefix+"1"), ns2: netns.New(t, prefix+"2")}
	for _, ns := range []*netns.NS{s.ns0, s.ns1, s.ns2} {
		wiretest.DisableIPv6(t, ns)
	}
	v01, v10 := netns.VethPair(t, s.ns0, s.ns1)
	v12, v21 := netns.VethPair(t, s.ns1, s.ns2)
	s.v10, s.v12, s.v21 = v10, v12, v21
	s.n0 = startNode(t, s.ns0, "ns0.conf", fmt.Sprintf(`link add %[1]s type afpacket
addr add 172.16.20.20/24 dev %[1]s
route add 10.10.10.10/32 encap mpls 100 via inet 172.16.20.21 dev %[1]s
route add 10.10.10.11/32 encap mpls 101 via inet 172.16.20.21 dev %[1]s
route add 172.16.21.0/24 via 172.16.20.21 dev %[1]s
`, v01))
	s.n1 = startNode(t, s.ns1, "ns1.conf", fmt.Sprintf(`link add %[1]s type afpacket
link add %[2]s type afpacket
addr add 172.16.20.21/24 dev %[1]s
addr add 172.16.21.21/24 dev %[2]s
sysctl -w net.ipv4.ip_forward=1
-f mpls route add 100 as to 200 via inet 172.16.21.22 dev %[2]s
-f mpls route add 101 via inet 172.16.21.22 dev %[2]s
`, v10, v12)+lsrMode)
	s.n2 = startNode(t, s.ns2, "ns2.conf", fmt.Sprintf(`link add %[1]s type afpacket
addr add 172.16.21.22/24 dev %[1]s
addr add 10.10.10.10/32 dev lo
addr add 10.10.10.11/32 dev lo
route add 172.16.20.0/24 via 172.16.21.21 dev %[1]s
-f mpls route add 200 dev lo
`, v21))
	return s
}

func ldpFEC(t *testing.T, p string) lspping.FEC {
	t.Helper()
	f, err := lspping.PrefixFEC("ldp", netip.MustParsePrefix(p))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// lspOpts are quick probes: the test bounds every wait.
func lspOpts(fec lspping.FEC) node.LSPProbeOptions {
	return node.LSPProbeOptions{FEC: fec, Count: 3, Interval: 50 * time.Millisecond, Timeout: 2 * time.Second, MaxTTL: 4}
}

// hopText is a traceroute hop as the tests compare it: TTL, replier,
// return code name and the first downstream's labels.
func hopText(h node.LSPProbe) string {
	if !h.Replied {
		return fmt.Sprintf("%d *", h.TTL)
	}
	s := fmt.Sprintf("%d %s %s", h.TTL, h.Replier, h.Name)
	for _, d := range h.Downstreams {
		s += fmt.Sprintf(" [%s %v]", d.Address, d.Labels)
	}
	return s
}

func traceText(tr *node.LSPTraceResult) []string {
	var out []string
	for _, p := range tr.Paths {
		var hops []string
		for _, h := range p.Hops {
			hops = append(hops, hopText(h))
		}
		out = append(out, strings.Join(hops, "; "))
	}
	return out
}

// TestLSPPingSeed pings and traces the LSP of 10.10.10.10/32 across three
// mplsnodes: the egress answers 3 (egress), the LSR 8 (label switched,
// downstream 172.16.21.22 with label 200); with the LSR's label route
// changed at run time to swap to a label the egress has none for, the
// ping gets 11 (no label entry) from the egress and the traceroute shows
// the LSR pushing the wrong label and the break at hop 2. tshark decodes
// every request and reply of a ping on the LSR-egress wire and of a
// traceroute (with their DDMAPs) on the host-LSR wire. Both LSR planes.
// Checked by planting the bugs (scripts/mutants.tsv l05, l06): with the
// forwarding plane's echo hook off, hop 1 answers nothing ("1 *"); with
// the endpoint's IP hook off, the ping over PHP gets no reply.
func TestLSPPingSeed(t *testing.T) {
	netns.SkipUnlessRoot(t)
	wiretest.Need(t)
	for i, m := range planetest.Modes {
		t.Run(m.Name, func(t *testing.T) {
			s := startLSPSeed(t, fmt.Sprintf("lp%d", i), m.Conf())
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			fec := ldpFEC(t, "10.10.10.10/32")

			var capt *tshark.Capture
			if tshark.Installed() {
				// 3 requests and 3 replies of the first ping.
				capt = tshark.StartCapture(t, s.ns1, s.v12, "udp port 3503 or (mpls and udp port 3503)", 6)
			}
			res, err := s.n0.PingLSP(ctx, lspOpts(fec))
			if err != nil {
				t.Fatal(err)
			}
			if res.Sent != 3 || res.Egress != 3 {
				s.dump(t)
				t.Fatalf("ping: %d sent, %d egress replies, want 3 and 3: %+v", res.Sent, res.Egress, res.Probes)
			}
			for _, p := range res.Probes {
				if p.Replier != "172.16.21.22" || p.Code != 3 || p.Subcode != 1 {
					t.Errorf("probe %d: code %d/%d from %s, want 3/1 from 172.16.21.22", p.Seq, p.Code, p.Subcode, p.Replier)
				}
			}
			if got, want := fmt.Sprint(res.Path.Labels), "[100]"; got != want {
				t.Errorf("ping left with labels %s, want %s", got, want)
			}
			if capt != nil {
				rows := capt.Fields("_ws.malformed", "_ws.expert.severity", "mpls.label", "mpls_echo.msg_type", "mpls_echo.return_code", "mpls_echo.tlv.fec.ldp_ipv4")
				var got []string
				for _, r := range rows {
					if r[0] != "" || strings.Contains(r[1], "8388608") || strings.Contains(r[1], "6291456") {
						t.Errorf("tshark: malformed or error/warning item in %q", r)
					}
					got = append(got, strings.Join(r[2:], " "))
				}
				want := strings.Repeat("200 1 0 10.10.10.10| 2 3 |", 3)
				if g := strings.Join(got, "|") + "|"; g != want {
					t.Errorf("tshark on the LSR-egress wire:\n got %s\nwant %s", g, want)
				}
			}

			if tshark.Installed() {
				// The traceroute's 2 requests and 2 replies, with their
				// DDMAPs, on the host-LSR wire.
				capt = tshark.StartCapture(t, s.ns1, s.v10, "udp port 3503 or (mpls and udp port 3503)", 4)
			}
			tr, err := s.n0.TraceLSP(ctx, lspOpts(fec))
			if err != nil {
				t.Fatal(err)
			}
			if capt != nil {
				rows := capt.Fields("_ws.malformed", "_ws.expert.severity", "mpls_echo.msg_type", "mpls_echo.return_code",
					"mpls_echo.tlv.dd_map.ds_ip", "mpls_echo.subtlv.label")
				var got []string
				for _, r := range rows {
					if r[0] != "" || strings.Contains(r[1], "8388608") || strings.Contains(r[1], "6291456") {
						t.Errorf("tshark: malformed or error/warning item in %q", r)
					}
					got = append(got, strings.Join(r[2:], " "))
				}
				want := "1 0 172.16.20.21 100|2 8 172.16.21.22 200|1 0 172.16.21.22 200|2 3  |"
				if g := strings.Join(got, "|") + "|"; g != want {
					t.Errorf("tshark on the host-LSR wire during the traceroute:\n got %s\nwant %s", g, want)
				}
			}
			want := []string{"1 172.16.20.21 label-switched [172.16.21.22 [200]]; 2 172.16.21.22 egress"}
			if got := traceText(tr); fmt.Sprint(got) != fmt.Sprint(want) || !tr.Paths[0].Reached {
				t.Errorf("traceroute:\n got %q\nwant %q (reached)", got, want)
			}

			// Penultimate hop popping: the request reaches the egress as
			// IP to 127.0.0.1.
			php := lspOpts(ldpFEC(t, "10.10.10.11/32"))
			php.Count = 1
			if res, err := s.n0.PingLSP(ctx, php); err != nil || res.Egress != 1 {
				t.Errorf("ping over PHP: %v %+v, want one egress reply", err, res)
			}
			tr, err = s.n0.TraceLSP(ctx, php)
			if err != nil {
				t.Fatal(err)
			}
			want = []string{"1 172.16.20.21 label-switched [172.16.21.22 [3]]; 2 172.16.21.22 egress"}
			if got := traceText(tr); fmt.Sprint(got) != fmt.Sprint(want) || !tr.Paths[0].Reached {
				t.Errorf("traceroute over PHP:\n got %q\nwant %q (reached)", got, want)
			}

			// The LSR now swaps to a label the egress has no entry for.
			if _, err := s.n1.DelLabelRoute("100"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.n1.AddLabelRoute("mpls route add 100 as to 999 via inet 172.16.21.22 dev " + s.v12); err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond) // the XDP plane's mirror follows the ILM
			res, err = s.n0.PingLSP(ctx, lspOpts(fec))
			if err != nil {
				t.Fatal(err)
			}
			if res.Egress != 0 || res.Replies != 3 {
				t.Fatalf("ping over the broken LSP: %d replies, %d egress, want 3 and 0: %+v", res.Replies, res.Egress, res.Probes)
			}
			for _, p := range res.Probes {
				if p.Replier != "172.16.21.22" || lspping.ReturnCode(p.Code) != lspping.CodeNoLabelEntry || p.Subcode != 1 {
					t.Errorf("probe %d: %s (%d/%d) from %s, want no-label-entry (11/1) from 172.16.21.22", p.Seq, p.Name, p.Code, p.Subcode, p.Replier)
				}
			}
			tr, err = s.n0.TraceLSP(ctx, lspOpts(fec))
			if err != nil {
				t.Fatal(err)
			}
			want = []string{"1 172.16.20.21 label-switched [172.16.21.22 [999]]; 2 172.16.21.22 no-label-entry"}
			if got := traceText(tr); fmt.Sprint(got) != fmt.Sprint(want) || tr.Paths[0].BrokenAt != 2 {
				t.Errorf("traceroute over the broken LSP:\n got %q broken at %d\nwant %q broken at 2", got, tr.Paths[0].BrokenAt, want)
			}
			// The responder counts a reply once sent: the prober may
			// read it first.
			waitFor(t, 5*time.Second, "the egress's lsp_ping counters", func() bool {
				rep := s.n2.Report().LSPPing
				return rep.Requests["egress"] == 3+1+2 && rep.Requests["no_label_entry"] == 3+1 && rep.Replies["egress"] == 6 && rep.Replies["no-label-entry"] == 4
			})
			waitFor(t, 5*time.Second, "the LSR's lsp_ping counters", func() bool {
				rep := s.n1.Report().LSPPing
				return rep.Requests["ttl_expired"] == 3 && rep.Replies["label-switched"] == 3
			})
		})
	}
}

// dump logs the nodes' non-zero drop and echo counters.
func (s *lspSeed) dump(t *testing.T) {
	t.Helper()
	for name, n := range map[string]*node.Node{"ns0": s.n0, "ns1": s.n1, "ns2": s.n2} {
		r := n.Report()
		var nz []string
		for _, l := range r.Links {
			for k, v := range l.Drops {
				if v != 0 {
					nz = append(nz, fmt.Sprintf("%s:%s=%d", l.Name, k, v))
				}
			}
			nz = append(nz, fmt.Sprintf("%s:rx=%d,tx=%d", l.Name, l.RXFrames, l.TXFrames))
		}
		for k, v := range r.LabelSwitch.Drops {
			if v != 0 {
				nz = append(nz, fmt.Sprintf("switch:%s=%d", k, v))
			}
		}
		for k, v := range r.IP.Drops {
			if v != 0 {
				nz = append(nz, fmt.Sprintf("ip:%s=%d", k, v))
			}
		}
		u := n.Stack().Netstack().Stats().UDP
		t.Logf("%s: %v lsp_ping %+v swapped=%d fwd=%d udp rx=%d unknown_port=%d rcvbuf=%d malformed=%d csum=%d", name, nz, r.LSPPing,
			r.LabelSwitch.Swapped, r.LabelSwitch.Forwarded, u.PacketsReceived.Value(), u.UnknownPortErrors.Value(),
			u.ReceiveBufferErrors.Value(), u.MalformedPacketsReceived.Value(), u.ChecksumErrors.Value())
	}
}

package node_test

import (
	"encoding/binary"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/netns"
	"github.com/mplsnode/mplsnode/internal/wiretest"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/mplstest"
	"github.com/mplsnode/mplsnode/node"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"gvisor.dev/gvisor/pkg/tcpip"
)

// TestXDPLargeFIB: a node in XDP mode with 200,000 IPv4 routes (three
// times the old ceiling of 65,536 a family, over which the plane carried
// no IP transit at all) carries them all (stats: fib_entries_resolved,
// fib_routes_not_carried 0), and a UDP probe to the last route's prefix
// crosses it inside the kernel (xdp ip_forwarded, the frame on ns2's
// wire). With the plane's periodic sync made an hour long, a route
// written to the tables as BGP writes them (Tables.UpdateRoutes: the node
// is not told) is mirrored by the FIB notification alone, and one added
// through the node API (the control socket's `route add`) at once: probes
// to both are forwarded inside the kernel. Planted bugs: the old ceiling
// (FIBCapacity 65536 and the node's 2x cut-off: fails waiting for the
// FIB entries, fib_routes_not_carried 200,000 in the report); the FIB
// notification not taken in the plane's loop (fails: the BGP-written
// route is not mirrored in 20 s). MPLSNODE_XDP_FIB_ROUTES=1000000 runs it
// at a BGP-fed node's million routes (the log says how long each sync
// took).
func TestXDPLargeFIB(t *testing.T) {
	netns.SkipUnlessRoot(t)
	wiretest.Need(t)
	t.Cleanup(node.SetXDPSyncInterval(time.Hour))
	ns0, ns1, ns2 := netns.New(t, "xl0"), netns.New(t, "xl1"), netns.New(t, "xl2")
	for _, ns := range []*netns.NS{ns0, ns1, ns2} {
		wiretest.DisableIPv6(t, ns)
	}
	v01, v10 := netns.VethPair(t, ns0, ns1)
	v12, v21 := netns.VethPair(t, ns1, ns2)
	ns0.MustExec("ip", "addr", "add", "172.16.30.20/24", "dev", v01)
	ns2.MustExec("ip", "addr", "add", "172.16.31.22/24", "dev", v21)
	ns2.MustExec("ethtool", "-K", v21, "gro", "on") // takes redirected frames
	routes := 200_000
	if v := os.Getenv("MPLSNODE_XDP_FIB_ROUTES"); v != "" {
		var err error
		if routes, err = strconv.Atoi(v); err != nil || routes < 1 || routes > 1<<22 {
			t.Fatalf("MPLSNODE_XDP_FIB_ROUTES=%q: want a count in 1..%d", v, 1<<22)
		}
	}
	var conf strings.Builder
	fmt.Fprintf(&conf, `link add %[1]s type afpacket
link add %[2]s type afpacket
addr add 172.16.30.21/24 dev %[1]s
addr add 172.16.31.21/24 dev %[2]s
sysctl -w net.ipv4.ip_forward=1
set forward xdp on
`, v10, v12)
	prefix := func(i int) netip.Prefix {
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], 0x0b000000+uint32(i)<<8) // 11.0.0.0/24 up
		return netip.PrefixFrom(netip.AddrFrom4(a), 24)
	}
	for i := range routes {
		fmt.Fprintf(&conf, "route add %s via 172.16.31.22 dev %s\n", prefix(i), v12)
	}
	const probePort = 7779
	udpSink(t, ns2, probePort)
	n1 := startNode(t, ns1, "ns1.conf", conf.String())

	// The whole FIB carried, as stats say.
	// waitFIB waits until the program carries more than after FIB
	// entries (resolved next hops), all routes carried.
	waitFIB := func(after int, what string) {
		t.Helper()
		deadline := time.Now().Add(20*time.Second + time.Duration(routes)*20*time.Microsecond)
		for {
			x := n1.Report().XDP
			if x.FIBEntries > after && x.FIBNotCarried == 0 && len(x.EgressOK) > 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: by the deadline the XDP program carries %d FIB entries (want more than %d), %d routes not carried (%s), egress ok %v",
					what, x.FIBEntries, after, x.FIBNotCarried, x.FIBError, x.EgressOK)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFIB(routes-1, "start")
	x := n1.Report().XDP
	t.Logf("%d routes: %d FIB map entries, capacity %d a family, last sync %.3f s", routes, x.FIBMapEntries, x.FIBCapacity, x.FIBSyncSeconds)
	// /metrics says the same, and passes promlint.
	rec := httptest.NewRecorder()
	node.MetricsHandler(n1).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	scrape := rec.Body.String()
	for _, want := range []string{fmt.Sprintf(`mplsnode_xdp_fib_entries{state="resolved"} %d`, x.FIBEntries),
		fmt.Sprintf(`mplsnode_xdp_fib_entries{state="all"} %d`, x.FIBMapEntries), "mplsnode_xdp_fib_routes_not_carried 0"} {
		if !strings.Contains(scrape, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	problems, err := promlint.New(strings.NewReader(scrape)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}

	lsrMAC := tcpip.LinkAddress(wiretest.MAC(t, ns1, v10))
	peerMAC := tcpip.LinkAddress(wiretest.MAC(t, ns0, v01))
	probeTo := func(dst netip.Addr, what string) {
		t.Helper()
		frame := mplstest.Frame{Dst: lsrMAC, Src: peerMAC,
			Payload: mplstest.IPv4UDP(netip.MustParseAddrPort("172.16.30.20:5000"), netip.AddrPortFrom(dst, probePort), true, make([]byte, 64))}.Bytes()
		before := xdpCounts(n1)
		probe{ns: ns0, dev: v01, frames: [][]byte{frame},
			taps: map[string]*wiretest.Tap{"ns2": wiretest.NewTap(t, ns2, v21, wiretest.UDPTo(probePort))}, tapCount: map[string]int{"ns2": 1},
			nodes: map[string]*node.Node{"ns1": n1}, counts: map[string]map[string]uint64{"ns1": {"ip_forwarded": 1}},
		}.run(t)
		if got := xdpCounts(n1)["ip_forwarded"] - before["ip_forwarded"]; got != 1 {
			t.Errorf("%s: the XDP program forwarded %d frames, want 1 (it went through userspace)", what, got)
		}
	}
	probeTo(prefix(routes-1).Addr().Next(), "probe to the last of the routes")

	// A route written as BGP writes it: only the FIB notification can
	// bring it into the program now.
	bgpRoute := prefix(routes + 10)
	carried := n1.Report().XDP.FIBEntries
	if err := n1.Stack().Tables().UpdateRoutes([]mpls.Route{{Prefix: bgpRoute,
		NextHops: []mpls.NextHop{{Via: netip.MustParseAddr("172.16.31.22"), Device: v12}}}}, nil); err != nil {
		t.Fatal(err)
	}
	waitFIB(carried, "route written to the tables")
	t.Logf("route written to the tables: mirrored in a sync of %.3f s", n1.Report().XDP.FIBSyncSeconds)
	probeTo(bgpRoute.Addr().Next(), "probe to the route written to the tables")

	// A route added through the node API (the control socket's).
	apiRoute := prefix(routes + 20)
	carried = n1.Report().XDP.FIBEntries
	if _, err := n1.AddRoute(fmt.Sprintf("route add %s via 172.16.31.22 dev %s", apiRoute, v12)); err != nil {
		t.Fatal(err)
	}
	if x := n1.Report().XDP; x.FIBEntries != carried+1 {
		t.Fatalf("route added through the API: the XDP program carries %d FIB entries when AddRoute returns, want %d", x.FIBEntries, carried+1)
	}
	t.Logf("route added through the API: mirrored in a sync of %.3f s", n1.Report().XDP.FIBSyncSeconds)
	probeTo(apiRoute.Addr().Next(), "probe to the route added through the API")
}

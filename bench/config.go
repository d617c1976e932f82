package bench

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/mplsnode/mplsnode/netperf"
)

// Topology is a kind of namespace set: who holds the addresses in ns0 and
// ns1. Every kind is the seed's three namespaces and two veth pairs
// (virt01-virt10, virt12-virt21); ns2 is always the kernel's, with
// 172.16.21.22/24 and fd00:21::22/64 on virt21, 10.10.10.10/32 and
// fd00:10::10/128 on lo, and routes back to ns0's subnets via ns1.
type Topology int

// The topology kinds; configurations of one kind share one namespace set.
const (
	// TopoKernel: the kernel holds ns0's and ns1's addresses and ns1
	// forwards (the seed script without MPLS).
	TopoKernel Topology = iota
	// TopoKernelNoTSO: TopoKernel with "ethtool -K virt01 tso off gso off"
	// in ns0, so ns0's kernel segments every frame at egress.
	TopoKernelNoTSO
	// TopoUserHost: ns0's kernel holds no address (a userspace stack owns
	// virt01), ns1's kernel forwards.
	TopoUserHost
	// TopoUserLSR: neither ns0's nor ns1's kernel holds an address; mplsnode
	// runs in both.
	TopoUserLSR
	// TopoTAP: TopoUserLSR with a Linux bridge in ns0 (br0: virt01) and
	// ns1 (br10: virt10, br12: virt12) for mplsnode's TAP links.
	TopoTAP
	// TopoUserLSRPeerGRO: TopoUserLSR with GRO on ns2's virt21, so that
	// it runs NAPI and takes frames that ns1's XDP label switch redirects
	// into virt12 (package forward/xdp).
	TopoUserLSRPeerGRO
	// TopoUserLSRXDP: TopoUserLSR with TX checksum offload off on ns2's
	// virt21: the kernel peer of ns1's AF_XDP link (link type xdp) must
	// send full checksums, which that link verifies (package link/xdp).
	TopoUserLSRXDP
	// TopoUDP: TopoUserLSR with the underlay of an MPLS-in-UDP link
	// (link type udp) between ns0 and ns1: their kernels hold
	// 192.168.77.20/24 and 192.168.77.21/24 on virt01 and virt10 and
	// carry the datagrams; ns1's kernel holds nothing on virt12.
	TopoUDP
	numTopologies
)

var topoNames = [numTopologies]string{"kernel", "kernel-notso", "user-host", "user-lsr", "tap", "user-lsr-peer-gro", "user-lsr-xdp", "udp"}

// letters name each kind's namespaces: mpb<pid>-<letter><0|1|2>.
var topoLetters = [numTopologies]string{"k", "n", "h", "l", "t", "x", "c", "u"}

// String returns the kind's name as results.json records it.
func (t Topology) String() string {
	if t < 0 || t >= numTopologies {
		return "topology(" + strconv.Itoa(int(t)) + ")"
	}
	return topoNames[t]
}

// Client says which netperf client runs in ns0.
type Client int

// The clients. All three are the project's netperf client (package netperf).
const (
	// ClientKernel: "mplsnode netperf --kernel", on kernel sockets.
	ClientKernel Client = iota
	// ClientGVisor: the stock gVisor client (GVisorClientMain): a plain
	// netstack on gVisor's fdbased endpoint over AF_PACKET.
	ClientGVisor
	// ClientNode: "mplsnode netperf --config ns0.conf", on mplsnode's stack.
	ClientNode
)

var clientNames = [...]string{"kernel", "gvisor-fdbased", "mplsnode"}

// String returns the client's name as results.json records it.
func (c Client) String() string {
	if c < 0 || int(c) >= len(clientNames) {
		return "client(" + strconv.Itoa(int(c)) + ")"
	}
	return clientNames[c]
}

// Config is one measured configuration of the issue.
type Config struct {
	// ID names the configuration: the number, with a letter where
	// one number has several rows (6a, 8b, 9c).
	ID string
	// Group is the number (1..10).
	Group int
	// Name says what is measured, for the table.
	Name string
	// Test is the netperf test.
	Test netperf.TestType
	// Topo is the namespace set the configuration runs in.
	Topo Topology
	// Client is the netperf client in ns0.
	Client Client
	// Host is netperf's -H: the netserver in ns2.
	Host string
	// NS0Conf is the ns0 node's config (ClientNode only).
	NS0Conf string
	// NS1Conf is the LSR's config; empty means ns1's kernel forwards.
	NS1Conf string
}

// Units returns the unit of the configuration's throughput.
func (c *Config) Units() string {
	if c.Test == netperf.TCPRR {
		return "trans/s"
	}
	return "Mbit/s"
}

// The seed's node configs (examples/seed), and their variants.
const (
	ns0Plain = `link add virt01 type afpacket
addr add 172.16.20.20/24 dev virt01
route add 172.16.21.0/24 via 172.16.20.21 mtu lock 1496
`
	ns0Label = `link add virt01 type afpacket
addr add 172.16.20.20/24 dev virt01
route add 10.10.10.10/32 encap mpls 100 via inet 172.16.20.21 mtu lock 1496
route add 172.16.21.0/24 via 172.16.20.21 mtu lock 1496
`
	ns1Pop = `link add virt10 type afpacket
link add virt12 type afpacket
addr add 172.16.20.21/24 dev virt10
addr add 172.16.21.21/24 dev virt12
sysctl -w net.ipv4.ip_forward=1
-f mpls route add 100 via inet 172.16.21.22 dev virt12
`
	// Three labels, IPv4 and IPv6 inside: ns1 pops 100 and 200 (dev lo:
	// pop and look up the next label) and pops the bottom one towards ns2.
	ns0ThreeLabels = `link add virt01 type afpacket
addr add 172.16.20.20/24 dev virt01
addr add fd00:20::20/64 dev virt01
route add 10.10.10.10/32 encap mpls 100/200/300 via inet 172.16.20.21 mtu lock 1488
route add 172.16.21.0/24 via 172.16.20.21 mtu lock 1496
route add fd00:10::10/128 encap mpls 100/200/306 via inet6 fd00:20::21 mtu lock 1488
route add fd00:21::/64 via inet6 fd00:20::21 mtu lock 1496
`
	ns1ThreeLabels = `link add virt10 type afpacket
link add virt12 type afpacket
addr add 172.16.20.21/24 dev virt10
addr add 172.16.21.21/24 dev virt12
addr add fd00:20::21/64 dev virt10
addr add fd00:21::21/64 dev virt12
sysctl -w net.ipv4.ip_forward=1
sysctl -w net.ipv6.conf.all.forwarding=1
-f mpls route add 100 dev lo
-f mpls route add 200 dev lo
-f mpls route add 300 via inet 172.16.21.22 dev virt12
-f mpls route add 306 via inet6 fd00:21::22 dev virt12
`
	ns0TAP = `link add tap0 type tap bridge br0
addr add 172.16.20.20/24 dev tap0
route add 10.10.10.10/32 encap mpls 100 via inet 172.16.20.21 mtu lock 1496
route add 172.16.21.0/24 via 172.16.20.21 mtu lock 1496
`
	ns1TAP = `link add tap10 type tap bridge br10
link add tap12 type tap bridge br12
addr add 172.16.20.21/24 dev tap10
addr add 172.16.21.21/24 dev tap12
sysctl -w net.ipv4.ip_forward=1
-f mpls route add 100 via inet 172.16.21.22 dev tap12
`
	// MPLS in UDP between ns0 and ns1 (TopoUDP's underlay): ns0 pushes
	// 100 on a udp link, ns1 pops it towards ns2 on afpacket. The udp
	// link's MTU is 1500 less 28 bytes of IPv4 and UDP and 4 for an
	// explicit null, so no route needs an mtu lock; ns1's afpacket link
	// keeps 1500: the LSR cuts the kernel's GSO frames to fit the node's
	// smallest link, so the pieces fit the udp link back to ns0.
	ns0UDP = `link add mu0 type udp local 192.168.77.20:6635 remote 192.168.77.21:6635
addr add 172.16.20.20/24 dev mu0
route add 10.10.10.10/32 encap mpls 100 via inet 172.16.20.21
route add 172.16.21.0/24 via 172.16.20.21
`
	ns1UDP = `link add mu1 type udp local 192.168.77.21:6635 remote 192.168.77.20:6635
link add virt12 type afpacket
addr add 172.16.20.21/24 dev mu1
addr add 172.16.21.21/24 dev virt12
sysctl -w net.ipv4.ip_forward=1
-f mpls route add 100 via inet 172.16.21.22 dev virt12
`
	// The return path labelled too: ns1 is the LER pushing 200 towards
	// ns0, which pops it to its own stack.
	ns0LabelBoth = ns0Label + "-f mpls route add 200 dev lo\n"
	ns1LabelBoth = ns1Pop + "route add 172.16.20.20/32 encap mpls 200 via inet 172.16.20.20 dev virt10\n"
)

// onXDP returns conf with its afpacket links on AF_XDP instead.
func onXDP(conf string) string { return strings.ReplaceAll(conf, " type afpacket", " type xdp") }

// linkWords adds words to every "type afpacket" link line of conf: the
// link mode dimension of configuration 5.
func linkWords(conf, words string) string {
	return strings.ReplaceAll(conf, " type afpacket\n", " type afpacket "+words+"\n")
}

// The netserver's addresses in ns2.
const (
	hostPlain = "172.16.21.22"
	hostLSP   = "10.10.10.10"
	hostLSP6  = "fd00:10::10"
)

// Configs returns every configuration of the issue except 10 (the LSR
// forwarding rate, measured by bench/lsrrate), in the order they are run in
// each round.
func Configs() []Config {
	return []Config{
		{ID: "1", Group: 1, Name: "kernel -> kernel, plain IP, veth offloads on", Test: netperf.TCPStream, Topo: TopoKernel, Client: ClientKernel, Host: hostPlain},
		{ID: "2", Group: 2, Name: "kernel -> kernel, plain IP, tso/gso off on virt01", Test: netperf.TCPStream, Topo: TopoKernelNoTSO, Client: ClientKernel, Host: hostPlain},
		{ID: "3", Group: 3, Name: "stock gVisor (fdbased, AF_PACKET), plain IP, no GSO", Test: netperf.TCPStream, Topo: TopoUserHost, Client: ClientGVisor, Host: hostPlain},
		{ID: "4", Group: 4, Name: "mplsnode ns0, no labels, kernel forwards in ns1", Test: netperf.TCPStream, Topo: TopoUserHost, Client: ClientNode, Host: hostPlain, NS0Conf: ns0Plain},
		{ID: "5", Group: 5, Name: "mplsnode ns0 -> mplsnode LSR ns1 (pop) -> kernel, 1 label", Test: netperf.TCPStream, Topo: TopoUserLSR, Client: ClientNode, Host: hostLSP, NS0Conf: ns0Label, NS1Conf: ns1Pop},
		{ID: "5x", Group: 5, Name: "as 5, AF_XDP links (link type xdp) in ns0 and ns1", Test: netperf.TCPStream, Topo: TopoUserLSRXDP, Client: ClientNode, Host: hostLSP, NS0Conf: onXDP(ns0Label), NS1Conf: onXDP(ns1Pop)},
		{ID: "5m", Group: 5, Name: "as 5, every afpacket link mode mmsg (recvmmsg/sendmmsg; 5 runs auto: packet rings)", Test: netperf.TCPStream, Topo: TopoUserLSR, Client: ClientNode, Host: hostLSP, NS0Conf: linkWords(ns0Label, "mode mmsg"), NS1Conf: linkWords(ns1Pop, "mode mmsg")},
		{ID: "5q", Group: 5, Name: "as 5, every afpacket link mode ring with queues 2 (PACKET_FANOUT)", Test: netperf.TCPStream, Topo: TopoUserLSR, Client: ClientNode, Host: hostLSP, NS0Conf: linkWords(ns0Label, "queues 2 mode ring"), NS1Conf: linkWords(ns1Pop, "queues 2 mode ring")},
		{ID: "6a", Group: 6, Name: "as 5, 3 labels (ns1 pops all three), IPv4", Test: netperf.TCPStream, Topo: TopoUserLSR, Client: ClientNode, Host: hostLSP, NS0Conf: ns0ThreeLabels, NS1Conf: ns1ThreeLabels},
		{ID: "6b", Group: 6, Name: "as 5, 3 labels (ns1 pops all three), IPv6", Test: netperf.TCPStream, Topo: TopoUserLSR, Client: ClientNode, Host: hostLSP6, NS0Conf: ns0ThreeLabels, NS1Conf: ns1ThreeLabels},
		{ID: "5u", Group: 5, Name: "as 5, ns0 -- ns1 as MPLS in UDP (link type udp, RFC 7510) over the kernels' veth", Test: netperf.TCPStream, Topo: TopoUDP, Client: ClientNode, Host: hostLSP, NS0Conf: ns0UDP, NS1Conf: ns1UDP},
		{ID: "5k", Group: 5, Name: "as 5, LSR in XDP mode (set forward xdp on; GRO on ns2's virt21)", Test: netperf.TCPStream, Topo: TopoUserLSRPeerGRO, Client: ClientNode, Host: hostLSP, NS0Conf: ns0Label, NS1Conf: ns1Pop + "set forward xdp on\n"},
		{ID: "7", Group: 7, Name: "as 5, TAP in a Linux bridge instead of AF_PACKET", Test: netperf.TCPStream, Topo: TopoTAP, Client: ClientNode, Host: hostLSP, NS0Conf: ns0TAP, NS1Conf: ns1TAP},
		{ID: "8a", Group: 8, Name: "as 5, set gso off (endpoint: see 5)", Test: netperf.TCPStream, Topo: TopoUserLSR, Client: ClientNode, Host: hostLSP, NS0Conf: ns0Label + "set gso off\n", NS1Conf: ns1Pop},
		{ID: "8b", Group: 8, Name: "as 5, set gso stack (endpoint: see 5)", Test: netperf.TCPStream, Topo: TopoUserLSR, Client: ClientNode, Host: hostLSP, NS0Conf: ns0Label + "set gso stack\n", NS1Conf: ns1Pop},
		{ID: "9a", Group: 9, Name: "as 1, TCP_MAERTS", Test: netperf.TCPMaerts, Topo: TopoKernel, Client: ClientKernel, Host: hostPlain},
		{ID: "9b", Group: 9, Name: "as 2, TCP_MAERTS", Test: netperf.TCPMaerts, Topo: TopoKernelNoTSO, Client: ClientKernel, Host: hostPlain},
		{ID: "9c", Group: 9, Name: "as 5, TCP_MAERTS, ns1 LER pushes 200 to ns0, ns0 pops", Test: netperf.TCPMaerts, Topo: TopoUserLSR, Client: ClientNode, Host: hostLSP, NS0Conf: ns0LabelBoth, NS1Conf: ns1LabelBoth},
		{ID: "9d", Group: 9, Name: "as 1, TCP_RR", Test: netperf.TCPRR, Topo: TopoKernel, Client: ClientKernel, Host: hostPlain},
		{ID: "9e", Group: 9, Name: "as 2, TCP_RR", Test: netperf.TCPRR, Topo: TopoKernelNoTSO, Client: ClientKernel, Host: hostPlain},
		{ID: "9f", Group: 9, Name: "as 5, TCP_RR", Test: netperf.TCPRR, Topo: TopoUserLSR, Client: ClientNode, Host: hostLSP, NS0Conf: ns0Label, NS1Conf: ns1Pop},
		{ID: "9g", Group: 9, Name: "as 4, TCP_RR: our host, ns1's kernel forwards plain IP", Test: netperf.TCPRR, Topo: TopoUserHost, Client: ClientNode, Host: hostPlain, NS0Conf: ns0Plain},
		{ID: "9h", Group: 9, Name: "TCP_RR: our host, our LSR forwards plain IP (forward/), same hosts as 9g", Test: netperf.TCPRR, Topo: TopoUserLSR, Client: ClientNode, Host: hostPlain, NS0Conf: ns0Label, NS1Conf: ns1Pop},
		{ID: "9i", Group: 9, Name: "as 9h, the LSR's links with busy-poll 50 (latency for CPU)", Test: netperf.TCPRR, Topo: TopoUserLSR, Client: ClientNode, Host: hostPlain, NS0Conf: ns0Label,
			NS1Conf: strings.ReplaceAll(ns1Pop, "type afpacket\n", "type afpacket busy-poll 50\n")},
		{ID: "9j", Group: 9, Name: "as 9h, the LSR's links with busy-poll 0 (a wake-up for every frame: 9h before the adaptive default)", Test: netperf.TCPRR, Topo: TopoUserLSR, Client: ClientNode, Host: hostPlain, NS0Conf: ns0Label,
			NS1Conf: strings.ReplaceAll(ns1Pop, "type afpacket\n", "type afpacket busy-poll 0\n")},
		{ID: "9k", Group: 9, Name: "as 9h, LSR in XDP mode (set forward xdp on; GRO on ns2's virt21): ns0->ns2 IP forwarded in the kernel program", Test: netperf.TCPRR, Topo: TopoUserLSRPeerGRO, Client: ClientNode, Host: hostPlain, NS0Conf: ns0Label, NS1Conf: ns1Pop + "set forward xdp on\n"},
	}
}

// LSRGroup is the number of the LSR forwarding-rate measurement,
// which is not a netperf Config.
const LSRGroup = 10

// Selection is the parsed -configs flag: which configurations run.
type Selection struct {
	// All is true when every configuration runs.
	All bool
	ids map[string]bool
}

// ParseSelection parses a comma-separated list of issue numbers (1..10: all
// rows of that number) and row IDs (6a, 9c); "" and "all" select
// everything. Unknown items are an error that lists the valid ones.
func ParseSelection(s string, cfgs []Config) (Selection, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "all" {
		return Selection{All: true}, nil
	}
	sel := Selection{ids: map[string]bool{}}
	for _, item := range strings.Split(s, ",") {
		item = strings.ToLower(strings.TrimSpace(item))
		if item == "" {
			return Selection{}, fmt.Errorf("-configs %q: empty item", s)
		}
		found := false
		if n, err := strconv.Atoi(item); err == nil {
			if n == LSRGroup {
				sel.ids[strconv.Itoa(LSRGroup)] = true
				found = true
			}
			for _, c := range cfgs {
				if c.Group == n {
					sel.ids[c.ID] = true
					found = true
				}
			}
		} else {
			for _, c := range cfgs {
				if c.ID == item {
					sel.ids[c.ID] = true
					found = true
				}
			}
		}
		if !found {
			return Selection{}, fmt.Errorf("-configs: unknown configuration %q; want numbers 1..%d or rows %s", item, LSRGroup, strings.Join(rowIDs(cfgs), ","))
		}
	}
	return sel, nil
}

func rowIDs(cfgs []Config) []string {
	var ids []string
	for _, c := range cfgs {
		if strconv.Itoa(c.Group) != c.ID {
			ids = append(ids, c.ID)
		}
	}
	sort.Strings(ids)
	return ids
}

// Has reports whether the row id (or "10" for the LSR rate) is selected.
func (s Selection) Has(id string) bool { return s.All || s.ids[id] }

// Filter returns the selected configurations, in order.
func (s Selection) Filter(cfgs []Config) []Config {
	var out []Config
	for _, c := range cfgs {
		if s.Has(c.ID) {
			out = append(out, c)
		}
	}
	return out
}

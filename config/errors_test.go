package config_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/config"
)

// prelude declares links and addresses that the error cases may refer to;
// its 5 lines shift a case with pre set to start at line 6.
const prelude = `link add virt01 type afpacket
link add virt12 type afpacket
addr add 172.16.20.20/24 dev virt01
addr add 172.16.21.21/24 dev virt12
addr add 2001:db8:1::1/64 dev virt01
`

// errorCases: positions were computed by Python's str.find on the intended
// token when the table was written, not by this package's lexer.
var errorCases = []struct {
	name string
	in   string
	pre  bool
	at   string // file:line:col
	tok  string
	msg  string // substring of Msg
}{
	{name: "push implicit null", in: "route add 10.10.10.10/32 encap mpls 100/3 via 172.16.20.21", pre: true, at: "node.conf:6:41", tok: "3", msg: "label 3 (implicit null) cannot be pushed; use a pop route at the previous hop"},
	{name: "explicit null not bottom", in: "route add 10.10.10.10/32 encap mpls 0/100 via 172.16.20.21", pre: true, at: "node.conf:6:37", tok: "0", msg: "label 0 (IPv4 explicit null) may only be the bottom label"},
	{name: "push router alert", in: "route add 10.10.10.10/32 encap mpls 1 via 172.16.20.21", pre: true, at: "node.conf:6:37", tok: "1", msg: "label 1 (router alert) cannot be pushed; use a label from 16 to 1048575"},
	{name: "push reserved 15", in: "route add 10.10.10.10/32 encap mpls 100/15 via 172.16.20.21", pre: true, at: "node.conf:6:41", tok: "15", msg: "label 15 (reserved) cannot be pushed"},
	{name: "label too big", in: "route add 10.10.10.10/32 encap mpls 1048576 via 172.16.20.21", pre: true, at: "node.conf:6:37", tok: "1048576", msg: "bad label \"1048576\"; expected a number from 16 to 1048575"},
	{name: "label not a number", in: "route add 10.10.10.10/32 encap mpls 100/x1 via 172.16.20.21", pre: true, at: "node.conf:6:41", tok: "x1", msg: "bad label \"x1\""},
	{name: "empty label", in: "route add 10.10.10.10/32 encap mpls 100//200 via 172.16.20.21", pre: true, at: "node.conf:6:37", tok: "100//200", msg: "empty label in stack"},
	{name: "stack too deep", in: "route add 10.10.10.10/32 encap mpls 100/101/102/103/104/105/106/107/108/109/110/111/112/113/114/115/116 via 172.16.20.21", pre: true, at: "node.conf:6:37", tok: "100/101/102/103/104/105/106/107/108/109/110/111/112/113/114/115/116", msg: "label stack of 17 labels is deeper than 16"},
	{name: "explicit null wrong family", in: "route add 2001:db8:9::/64 encap mpls 100/0 via inet6 2001:db8:1::2", pre: true, at: "node.conf:6:42", tok: "0", msg: "label 0 (IPv4 explicit null) cannot carry IPv6 packets; use 2"},
	{name: "IPv6 explicit null on IPv4", in: "route add 10.0.0.0/8 encap mpls 2 via 172.16.20.21", pre: true, at: "node.conf:6:33", tok: "2", msg: "label 2 (IPv6 explicit null) cannot carry IPv4 packets; use 0"},
	{name: "6PE without a label", in: "route add 2001:db8::/48 via inet 172.16.20.21", pre: true, at: "node.conf:6:34", tok: "172.16.20.21", msg: "next hop 172.16.20.21 is IPv4 but prefix 2001:db8::/48 is IPv6; only a labelled route may cross families (6PE, RFC 4798: add encap mpls LABEL)"},
	{name: "IPv6 next hop for IPv4", in: "route add 10.0.0.0/8 encap mpls 100 via inet6 2001:db8:1::2", pre: true, at: "node.conf:6:47", tok: "2001:db8:1::2", msg: "next hop 2001:db8:1::2 is IPv6 but prefix 10.0.0.0/8 is IPv4"},
	{name: "nexthop weight", in: "route add 10.1.0.0/16 nexthop via 172.16.20.21 weight 300", pre: true, at: "node.conf:6:55", tok: "300", msg: "bad nexthop weight \"300\"; expected a number from 1 to 256"},
	{name: "via before nexthop", in: "route add 10.2.0.0/16 via 172.16.20.21 nexthop via 172.16.21.22", pre: true, at: "node.conf:6:23", tok: "via", msg: "via belongs inside a nexthop in a multipath route"},
	{name: "mtu in nexthop", in: "route add 10.3.0.0/16 nexthop via 172.16.20.21 mtu 1400", pre: true, at: "node.conf:6:48", tok: "mtu", msg: "mtu is a route option: write it before the first nexthop"},
	{name: "empty nexthop", in: "route add 10.4.0.0/16 nexthop weight 2", pre: true, at: "node.conf:6:23", tok: "nexthop", msg: "nexthop of route 10.4.0.0/16 needs via ADDRESS or dev NAME"},
	{name: "nexthop word twice", in: "route add 10.5.0.0/16 nexthop via 172.16.20.21 via 172.16.20.22", pre: true, at: "node.conf:6:48", tok: "via", msg: "via given twice in one nexthop"},
	{name: "host bits", in: "route add 10.10.10.10/24 via 172.16.20.21", pre: true, at: "node.conf:6:11", tok: "10.10.10.10/24", msg: "prefix 10.10.10.10/24 has host bits set; did you mean 10.10.10.0/24?"},
	{name: "host bits v6", in: "route add 2001:db8::1/64 via inet6 2001:db8:1::2", pre: true, at: "node.conf:6:11", tok: "2001:db8::1/64", msg: "did you mean 2001:db8::/64?"},
	{name: "bad prefix", in: "route add 10.0.0.0/33 via 172.16.20.21", pre: true, at: "node.conf:6:11", tok: "10.0.0.0/33", msg: "bad prefix \"10.0.0.0/33\""},
	{name: "v4 prefix via inet6", in: "route add 10.0.0.0/8 via inet6 2001:db8:1::2", pre: true, at: "node.conf:6:32", tok: "2001:db8:1::2", msg: "next hop 2001:db8:1::2 is IPv6 but prefix 10.0.0.0/8 is IPv4"},
	{name: "via inet with v6 addr", in: "route add 2001:db8:9::/64 via inet 2001:db8:1::2", pre: true, at: "node.conf:6:36", tok: "2001:db8:1::2", msg: "is not IPv4, as \"via inet\" says"},
	{name: "-6 with v4 prefix", in: "ip -6 route add 10.0.0.0/8 via 172.16.20.21", pre: true, at: "node.conf:6:17", tok: "10.0.0.0/8", msg: "prefix 10.0.0.0/8 is not IPv6, as -6 (-f inet6) requires"},
	{name: "link-local without dev", in: "route add 2001:db8:9::/64 via inet6 fe80::1", pre: true, at: "node.conf:6:37", tok: "fe80::1", msg: "link-local next hop fe80::1 needs dev NAME"},
	{name: "zone", in: "route add 2001:db8:9::/64 via inet6 fe80::1%virt01", pre: true, at: "node.conf:6:37", tok: "fe80::1%virt01", msg: "zones are not allowed"},
	{name: "encap on lo", in: "route add 10.0.0.0/8 encap mpls 100 dev lo", pre: true, at: "node.conf:6:41", tok: "lo", msg: "a labelled route cannot leave on lo"},
	{name: "addr unspecified", in: "addr add 0.0.0.0/0 dev virt01", pre: true, at: "node.conf:6:10", tok: "0.0.0.0/0", msg: "0.0.0.0 is not a unicast address"},
	{name: "via multicast", in: "route add 10.0.0.0/8 via 224.0.0.1", pre: true, at: "node.conf:6:26", tok: "224.0.0.1", msg: "next hop 224.0.0.1 is not a unicast address"},
	{name: "no via no dev", in: "route add 10.0.0.0/8 mtu 1400", pre: true, at: "node.conf:6:30", tok: "", msg: "route 10.0.0.0/8 needs via ADDRESS or dev NAME"},
	{name: "missing prefix", in: "route add", pre: false, at: "node.conf:1:10", tok: "", msg: "missing a prefix or default after route add at end of line"},
	{name: "unknown route word", in: "route add 10.0.0.0/8 encpa mpls 100 via 172.16.20.21", pre: true, at: "node.conf:6:22", tok: "encpa", msg: "unknown word \"encpa\" in route; expected encap, via, dev, mtu or nexthop (did you mean \"encap\"?)"},
	{name: "unknown encap", in: "route add 10.0.0.0/8 encap ip 100 via 172.16.20.21", pre: true, at: "node.conf:6:28", tok: "ip", msg: "unknown encap \"ip\"; only encap mpls is supported"},
	{name: "via twice", in: "route add 10.0.0.0/8 via 172.16.20.21 via 172.16.20.22", pre: true, at: "node.conf:6:39", tok: "via", msg: "via given twice in one route"},
	{name: "mtu too small", in: "route add 10.0.0.0/8 via 172.16.20.21 mtu 67", pre: true, at: "node.conf:6:43", tok: "67", msg: "bad route mtu \"67\"; expected a number from 68 to 65535"},
	{name: "mtu lock too big", in: "route add 10.0.0.0/8 via 172.16.20.21 mtu lock 70000", pre: true, at: "node.conf:6:48", tok: "70000", msg: "expected a number from 68 to 65535"},
	{name: "ipv6 mtu below 1280", in: "route add 2001:db8:9::/64 via inet6 2001:db8:1::2 mtu 1200", pre: true, at: "node.conf:6:55", tok: "1200", msg: "mtu 1200 is below 1280, the IPv6 minimum"},
	{name: "encap ttl 0", in: "route add 10.0.0.0/8 encap mpls 100 ttl 0 via 172.16.20.21", pre: true, at: "node.conf:6:41", tok: "0", msg: "bad encap ttl \"0\"; expected a number from 1 to 255"},
	{name: "next hop off-link", in: "route add 10.0.0.0/8 via 192.168.1.1", pre: true, at: "node.conf:6:26", tok: "192.168.1.1", msg: "next hop 192.168.1.1 is on no connected subnet; add dev NAME"},
	{name: "next hop is own address", in: "route add 10.0.0.0/8 via 172.16.20.20", pre: true, at: "node.conf:6:26", tok: "172.16.20.20", msg: "next hop 172.16.20.20 is this node's own address (node.conf:3:1)"},
	{name: "duplicate route", in: "route add 10.0.0.0/8 via 172.16.20.21\nroute add 10.0.0.0/8 via 172.16.21.22", pre: true, at: "node.conf:7:11", tok: "10.0.0.0/8", msg: "route to 10.0.0.0/8 is already added at node.conf:6:1"},
	{name: "duplicate default", in: "route add default via 172.16.20.21\nip route add 0.0.0.0/0 dev virt12", pre: true, at: "node.conf:7:14", tok: "0.0.0.0/0", msg: "route to 0.0.0.0/0 is already added"},
	{name: "unknown route dev", in: "route add 10.0.0.0/8 via 172.16.20.21 dev virt02", pre: true, at: "node.conf:6:43", tok: "virt02", msg: "unknown device \"virt02\"; declare it with \"link add virt02 type afpacket\" (did you mean \"virt01\"?)"},
	{name: "unknown statement", in: "rout add 10.0.0.0/8 via 172.16.20.21", pre: false, at: "node.conf:1:1", tok: "rout", msg: "unknown statement \"rout\"; expected link, addr, route, sysctl, set or bgp (did you mean \"route\"?)"},
	{name: "route del", in: "ip route del 10.0.0.0/8", pre: false, at: "node.conf:1:10", tok: "del", msg: "unknown word \"del\" after route; expected add"},
	{name: "link set up", in: "ip link set virt01 up", pre: false, at: "node.conf:1:9", tok: "set", msg: "mplsnode brings its links up itself"},
	{name: "netns", in: "ip netns exec ns0 ip route add 10.0.0.0/8 via 172.16.20.21", pre: false, at: "node.conf:1:4", tok: "netns", msg: "write one config file per node"},
	{name: "unknown option", in: "ip -7 route add 10.0.0.0/8 via 172.16.20.21", pre: false, at: "node.conf:1:4", tok: "-7", msg: "unknown option \"-7\""},
	{name: "bad family", in: "ip -f ipx route add 10.0.0.0/8", pre: false, at: "node.conf:1:7", tok: "ipx", msg: "unknown word \"ipx\" after -f; expected inet, inet6 or mpls"},
	{name: "ip sysctl", in: "ip sysctl net.mpls.default_ttl=64", pre: false, at: "node.conf:1:4", tok: "sysctl", msg: "\"sysctl\" is not an ip subcommand"},
	{name: "family on link", in: "ip -6 link add virt01 type afpacket", pre: false, at: "node.conf:1:4", tok: "-6", msg: "option -6 does not apply to link"},
	{name: "veth", in: "ip link add virt01 type veth peer name virt10", pre: false, at: "node.conf:1:25", tok: "veth", msg: "mplsnode attaches to an existing veth; create the pair outside and write \"link add virt01 type afpacket\""},
	{name: "link type typo", in: "link add tap0 type tpa", pre: false, at: "node.conf:1:20", tok: "tpa", msg: "unknown link type \"tpa\"; expected afpacket, tap, xdp or udp (did you mean \"tap\"?)"},
	{name: "bridge on afpacket", in: "link add virt01 type afpacket bridge br0", pre: false, at: "node.conf:1:31", tok: "bridge", msg: "bridge applies only to type tap"},
	{name: "link name too long", in: "link add averyveryverylongname type tap", pre: false, at: "node.conf:1:10", tok: "averyveryverylongname", msg: "longer than 15 bytes"},
	{name: "link lo", in: "link add lo type afpacket", pre: false, at: "node.conf:1:10", tok: "lo", msg: "lo is the stack's own loopback; it needs no link add"},
	{name: "link missing type", in: "link add virt01 mtu 1500", pre: false, at: "node.conf:1:25", tok: "", msg: "missing \"type afpacket\", \"type tap\", \"type xdp\" or \"type udp\" in link virt01"},
	{name: "address on afpacket", in: "link add virt01 type afpacket address 02:00:00:00:00:01", pre: false, at: "node.conf:1:31", tok: "address", msg: "address applies only to type tap"},
	{name: "multicast address", in: "link add tap0 type tap address 03:00:00:00:00:01", pre: false, at: "node.conf:1:32", tok: "03:00:00:00:00:01", msg: "bad link address"},
	{name: "queues zero", in: "link add virt01 type xdp queues 0", pre: false, at: "node.conf:1:33", tok: "0", msg: "bad number of queues \"0\"; expected a number from 1 to 256"},
	{name: "link queues", in: "link add virt01 type afpacket queues 0", pre: false, at: "node.conf:1:38", tok: "0", msg: "bad number of queues \"0\"; expected a number from 1 to 256"},
	{name: "link queues big", in: "link add virt01 type afpacket queues 257", pre: false, at: "node.conf:1:38", tok: "257", msg: "bad number of queues \"257\"; expected a number from 1 to 256"},
	{name: "link mode typo", in: "link add virt01 type afpacket mode rign", pre: false, at: "node.conf:1:36", tok: "rign", msg: "unknown link mode \"rign\"; expected auto, mmsg or ring (did you mean \"ring\"?)"},
	{name: "mode on tap", in: "link add tap0 type tap mode ring", pre: false, at: "node.conf:1:24", tok: "mode", msg: "mode applies only to type afpacket"},
	{name: "busy-poll on xdp", in: "link add virt01 type xdp busy-poll 50", pre: false, at: "node.conf:1:26", tok: "busy-poll", msg: "busy-poll applies only to type afpacket"},
	{name: "busy-poll big", in: "link add virt01 type afpacket busy-poll 1001", pre: false, at: "node.conf:1:41", tok: "1001", msg: "bad busy-poll microseconds \"1001\"; expected a number from 0 to 1000"},
	{name: "busy-poll mmsg", in: "link add virt01 type afpacket mode mmsg busy-poll 50", pre: false, at: "node.conf:1:41", tok: "busy-poll", msg: "busy-poll polls the receive rings; a mode mmsg link has none (use mode ring or auto)"},
	{name: "busy-poll twice", in: "link add virt01 type afpacket busy-poll 5 busy-poll 5", pre: false, at: "node.conf:1:43", tok: "busy-poll", msg: "busy-poll given twice in one link"},
	{name: "rx-ring-frames small", in: "link add virt01 type afpacket rx-ring-frames 63", pre: false, at: "node.conf:1:46", tok: "63", msg: "bad receive ring slots \"63\"; expected a number from 64 to 32768"},
	{name: "rx-ring-frames big", in: "link add virt01 type afpacket rx-ring-frames 32769", pre: false, at: "node.conf:1:46", tok: "32769", msg: "bad receive ring slots \"32769\"; expected a number from 64 to 32768"},
	{name: "rx-ring-frames word", in: "link add virt01 type afpacket rx-ring-frames 4k", pre: false, at: "node.conf:1:46", tok: "4k", msg: "bad receive ring slots \"4k\""},
	{name: "rx-ring-frames missing", in: "link add virt01 type afpacket rx-ring-frames", pre: false, at: "node.conf:1:45", tok: "", msg: "receive ring slots"},
	{name: "rx-ring-frames on xdp", in: "link add virt01 type xdp rx-ring-frames 4096", pre: false, at: "node.conf:1:26", tok: "rx-ring-frames", msg: "rx-ring-frames applies only to type afpacket"},
	{name: "rx-ring-frames on tap", in: "link add virt01 type tap rx-ring-frames 4096", pre: false, at: "node.conf:1:26", tok: "rx-ring-frames", msg: "rx-ring-frames applies only to type afpacket"},
	{name: "rx-ring-frames mmsg", in: "link add virt01 type afpacket mode mmsg rx-ring-frames 4096", pre: false, at: "node.conf:1:41", tok: "rx-ring-frames", msg: "rx-ring-frames sizes the receive ring; a mode mmsg link has none (use mode ring or auto)"},
	{name: "rx-ring-frames twice", in: "link add virt01 type afpacket rx-ring-frames 64 rx-ring-frames 64", pre: false, at: "node.conf:1:49", tok: "rx-ring-frames", msg: "rx-ring-frames given twice in one link"},
	{name: "link mtu", in: "link add virt01 type afpacket mtu 10", pre: false, at: "node.conf:1:35", tok: "10", msg: "bad link mtu \"10\""},
	{name: "duplicate link", in: "link add virt01 type tap", pre: true, at: "node.conf:6:10", tok: "virt01", msg: "link virt01 is already added at node.conf:1:1"},
	{name: "addr missing dev", in: "addr add 172.16.30.1/24", pre: false, at: "node.conf:1:24", tok: "", msg: "missing dev NAME: the link that holds 172.16.30.1/24"},
	{name: "addr bad", in: "addr add 172.16.300.1/24 dev virt01", pre: true, at: "node.conf:6:10", tok: "172.16.300.1/24", msg: "bad prefix"},
	{name: "addr -6 v4", in: "ip -6 addr add 172.16.30.1/24 dev virt01", pre: true, at: "node.conf:6:16", tok: "172.16.30.1/24", msg: "address 172.16.30.1/24 is not IPv6"},
	{name: "addr -f mpls", in: "ip -f mpls addr add 172.16.30.1/24 dev virt01", pre: true, at: "node.conf:6:4", tok: "-f", msg: "addr takes -4 or -6, not the mpls family"},
	{name: "addr extra word", in: "addr add 172.16.30.1/24 dev virt01 scope link", pre: true, at: "node.conf:6:36", tok: "scope", msg: "unknown word \"scope\" in addr; expected dev"},
	{name: "addr duplicate", in: "addr add 172.16.20.20/16 dev virt01", pre: true, at: "node.conf:6:10", tok: "172.16.20.20/16", msg: "address 172.16.20.20 is already added at node.conf:3:1"},
	{name: "addr overlap", in: "addr add 172.16.20.99/24 dev virt12", pre: true, at: "node.conf:6:10", tok: "172.16.20.99/24", msg: "172.16.20.99/24 on virt12 overlaps 172.16.20.20/24 on virt01 (node.conf:3:1); a subnet belongs to one link"},
	{name: "addr unknown dev", in: "addr add 10.1.1.1/24 dev virt13", pre: true, at: "node.conf:6:26", tok: "virt13", msg: "unknown device \"virt13\""},
	{name: "ilm reserved label", in: "-f mpls route add 3 via inet 172.16.21.22", pre: true, at: "node.conf:6:19", tok: "3", msg: "incoming label 3 (implicit null) is reserved; label routes take 0, 2 or 16..1048575"},
	{name: "ilm label too big", in: "-f mpls route add 2000000 via inet 172.16.21.22", pre: true, at: "node.conf:6:19", tok: "2000000", msg: "bad label \"2000000\""},
	{name: "ilm missing via", in: "-f mpls route add 100 dev virt12", pre: true, at: "node.conf:6:33", tok: "", msg: "label route 100 needs via ADDRESS (pop or swap and forward) or dev lo (deliver locally)"},
	{name: "ilm lo with via", in: "-f mpls route add 100 via inet 172.16.21.22 dev lo", pre: true, at: "node.conf:6:32", tok: "172.16.21.22", msg: "dev lo delivers locally; drop via"},
	{name: "ilm lo with swap", in: "-M route add 100 as to 200 dev lo", pre: true, at: "node.conf:6:18", tok: "as", msg: "a swap (as to) needs a next hop on a link"},
	{name: "ilm to without as", in: "-f mpls route add 100 to 200 via inet 172.16.21.22", pre: true, at: "node.conf:6:23", tok: "to", msg: "\"to\" belongs after \"as\""},
	{name: "ilm swap to implicit null", in: "-f mpls route add 100 as to 3 via inet 172.16.21.22", pre: true, at: "node.conf:6:29", tok: "3", msg: "label 3 (implicit null) cannot be pushed"},
	{name: "ilm unknown word", in: "-f mpls route add 100 vai inet 172.16.21.22", pre: true, at: "node.conf:6:23", tok: "vai", msg: "unknown word \"vai\" in label route; expected as, via, dev or nexthop (did you mean \"via\"?)"},
	{name: "ilm weight outside a nexthop", in: "-f mpls route add 100 via inet 172.16.21.22 weight 2", pre: true, at: "node.conf:6:45", tok: "weight", msg: "unknown word \"weight\" in label route; expected as, via, dev or nexthop"},
	{name: "ilm multipath hop without via", in: "-f mpls route add 100 nexthop as 200 dev virt12 nexthop via inet 172.16.20.21", pre: true, at: "node.conf:6:23", tok: "nexthop", msg: "nexthop of label route 100 needs via ADDRESS"},
	{name: "ilm multipath hop dev lo", in: "-f mpls route add 100 nexthop via inet 172.16.21.22 dev lo nexthop via inet 172.16.20.21", pre: true, at: "node.conf:6:57", tok: "lo", msg: "dev lo delivers locally; a nexthop of a multipath label route needs a link toward its via"},
	{name: "ilm multipath word before nexthop", in: "-f mpls route add 100 via inet 172.16.21.22 nexthop via inet 172.16.20.21", pre: true, at: "node.conf:6:23", tok: "via", msg: "via belongs inside a nexthop in a multipath label route"},
	{name: "ilm multipath word after nexthop", in: "-f mpls route add 100 nexthop via inet 172.16.21.22 mtu 1400", pre: true, at: "node.conf:6:53", tok: "mtu", msg: "unknown word \"mtu\" in nexthop; expected as, via, dev, weight or nexthop"},
	{name: "ilm multipath weight 0", in: "-f mpls route add 100 nexthop via inet 172.16.21.22 weight 0 nexthop via inet 172.16.20.21", pre: true, at: "node.conf:6:60", tok: "0", msg: "bad nexthop weight \"0\"; expected a number from 1 to 256"},
	{name: "ilm multipath weight 257", in: "-f mpls route add 100 nexthop via inet 172.16.21.22 weight 257 nexthop via inet 172.16.20.21", pre: true, at: "node.conf:6:60", tok: "257", msg: "bad nexthop weight \"257\"; expected a number from 1 to 256"},
	{name: "ilm multipath via twice", in: "-f mpls route add 100 nexthop via inet 172.16.21.22 via inet 172.16.20.21", pre: true, at: "node.conf:6:53", tok: "via", msg: "via given twice in one nexthop"},
	{name: "ilm multipath swaps explicit null", in: "-f mpls route add 0 nexthop as 200 via inet 172.16.21.22 nexthop via inet 172.16.20.21", pre: true, at: "node.conf:6:32", tok: "200", msg: "label 0 (IPv4 explicit null) can only be popped; drop as"},
	{name: "ilm multipath swap to implicit null", in: "-f mpls route add 100 nexthop as to 3 via inet 172.16.21.22 nexthop via inet 172.16.20.21", pre: true, at: "node.conf:6:37", tok: "3", msg: "label 3 (implicit null) cannot be pushed"},
	{name: "ilm multipath unknown dev", in: "-f mpls route add 100 nexthop via inet 172.16.21.22 dev virt13 nexthop via inet 172.16.20.21", pre: true, at: "node.conf:6:57", tok: "virt13", msg: "unknown device \"virt13\""},
	{name: "ilm multipath via off-link", in: "-f mpls route add 100 nexthop via inet 172.16.21.22 nexthop via inet 10.9.9.9", pre: true, at: "node.conf:6:70", tok: "10.9.9.9", msg: "next hop 10.9.9.9 is on no connected subnet"},
	{name: "ilm above platform labels", in: "-f mpls route add 1000 via inet 172.16.21.22\nsysctl net.mpls.platform_labels=1000", pre: true, at: "node.conf:6:19", tok: "1000", msg: "label 1000 is not below net.mpls.platform_labels=1000 (set at node.conf:7:1)"},
	{name: "ilm duplicate", in: "-f mpls route add 100 via inet 172.16.21.22\n-f mpls route add 100 dev lo", pre: true, at: "node.conf:7:19", tok: "100", msg: "label route for 100 is already added at node.conf:6:1"},
	{name: "ilm unknown dev", in: "-f mpls route add 100 via inet 172.16.21.22 dev virt13", pre: true, at: "node.conf:6:49", tok: "virt13", msg: "unknown device \"virt13\"; declare it with \"link add virt13 type afpacket\" (did you mean \"virt12\"?)"},
	{name: "ilm via off-link", in: "-f mpls route add 100 via inet 10.9.9.9", pre: true, at: "node.conf:6:32", tok: "10.9.9.9", msg: "next hop 10.9.9.9 is on no connected subnet"},
	{name: "sysctl unknown", in: "sysctl net.mpls.default_tll=64", pre: true, at: "node.conf:6:8", tok: "net.mpls.default_tll", msg: "unknown sysctl \"net.mpls.default_tll\"; expected"},
	{name: "sysctl suggestion", in: "sysctl net.mpls.default_tll=64", pre: true, at: "node.conf:6:8", tok: "net.mpls.default_tll", msg: "(did you mean \"net.mpls.default_ttl\"?)"},
	{name: "sysctl ttl 0", in: "sysctl net.mpls.default_ttl=0", pre: true, at: "node.conf:6:29", tok: "0", msg: "bad value \"0\" for net.mpls.default_ttl; expected a number from 1 to 255"},
	{name: "sysctl bool 2", in: "sysctl -w net.mpls.ip_ttl_propagate=2", pre: true, at: "node.conf:6:37", tok: "2", msg: "bad value \"2\" for net.mpls.ip_ttl_propagate; expected 0 or 1"},
	{name: "sysctl platform too big", in: "sysctl net.mpls.platform_labels = 1048577", pre: true, at: "node.conf:6:35", tok: "1048577", msg: "expected a number from 0 to 1048576"},
	{name: "sysctl rp_filter", in: "sysctl -w net.ipv4.conf.all.rp_filter=0", pre: true, at: "node.conf:6:11", tok: "net.ipv4.conf.all.rp_filter", msg: "mplsnode has no reverse-path filter; delete this"},
	{name: "sysctl twice", in: "sysctl net.mpls.default_ttl=64\nsysctl net/mpls/default_ttl=65", pre: true, at: "node.conf:7:8", tok: "net/mpls/default_ttl", msg: "net.mpls.default_ttl is already set at node.conf:6:1"},
	{name: "sysctl no equals", in: "sysctl net.mpls.default_ttl 64", pre: true, at: "node.conf:6:8", tok: "net.mpls.default_ttl", msg: "expected NAME=VALUE after sysctl"},
	{name: "sysctl missing value", in: "sysctl net.mpls.default_ttl=", pre: true, at: "node.conf:6:29", tok: "", msg: "missing a value after net.mpls.default_ttl="},
	{name: "sysctl input unknown dev", in: "sysctl net.mpls.conf.virt99.input=1", pre: true, at: "node.conf:6:22", tok: "virt99", msg: "unknown device \"virt99\""},
	{name: "sysctl trailing word", in: "sysctl net.mpls.default_ttl=64 extra", pre: true, at: "node.conf:6:32", tok: "extra", msg: "unexpected \"extra\" at end of sysctl statement"},
	{name: "set forward xdp value", in: "set forward xdp maybe", pre: false, at: "node.conf:1:17", tok: "maybe", msg: "expected on, off or auto"},
	{name: "set typo", in: "set gos off", pre: false, at: "node.conf:1:5", tok: "gos", msg: "unknown word \"gos\" after set; expected gso, tcp or forward (did you mean \"gso\"?)"},
	{name: "set gso value", in: "set gso on", pre: false, at: "node.conf:1:9", tok: "on", msg: "expected endpoint, stack or off"},
	{name: "set cc bbr", in: "set tcp cc bbr", pre: false, at: "node.conf:1:12", tok: "bbr", msg: "unknown word \"bbr\" after set tcp cc; expected reno or cubic"},
	{name: "set sack yes", in: "set tcp sack yes", pre: false, at: "node.conf:1:14", tok: "yes", msg: "expected on or off"},
	{name: "set twice", in: "set tcp sack off\nset tcp sack on", pre: false, at: "node.conf:2:9", tok: "sack", msg: "set tcp sack is already set at node.conf:1:1"},
	{name: "set missing", in: "set tcp", pre: false, at: "node.conf:1:8", tok: "", msg: "missing cc, sack or rack after set tcp at end of line"},
}

func TestParseErrors(t *testing.T) {
	for _, tc := range errorCases {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.in
			if tc.pre {
				src = prelude + tc.in
			}
			cfg, err := config.Parse("node.conf", strings.NewReader(src))
			if err == nil {
				t.Fatalf("Parse succeeded, want error at %s containing %q; config:\n%s", tc.at, tc.msg, cfg.Format())
			}
			if cfg != nil {
				t.Errorf("got config %v with an error, want nil", cfg)
			}
			var list config.ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("got error type %T, want config.ErrorList", err)
			}
			if len(list) != 1 {
				t.Fatalf("got %d errors, want 1:\n%v", len(list), err)
			}
			e := list[0]
			if got := fmt.Sprintf("%s:%d:%d", e.File, e.Line, e.Col); got != tc.at {
				t.Errorf("got position %s, want %s (error: %v)", got, tc.at, e)
			}
			if e.Token != tc.tok {
				t.Errorf("got token %q, want %q (error: %v)", e.Token, tc.tok, e)
			}
			if !strings.Contains(e.Msg, tc.msg) {
				t.Errorf("got message %q, want it to contain %q", e.Msg, tc.msg)
			}
			if want := tc.at + ": " + e.Msg; e.Error() != want {
				t.Errorf("got Error() %q, want %q", e.Error(), want)
			}
			// The token must be what the file holds at that position.
			lines := strings.Split(src, "\n")
			line := lines[e.Line-1]
			if e.Token != "" && !strings.HasPrefix(line[e.Col-1:], e.Token) {
				t.Errorf("line %d col %d holds %q, not the token %q", e.Line, e.Col, line[e.Col-1:], e.Token)
			}
		})
	}
}

func TestParseReportsEveryError(t *testing.T) {
	src := "link add virt01 type afpacket\n" +
		"route add 10.0.0.1/8 via 172.16.20.21\n" + // host bits
		"# fine\n" +
		"addr add 172.16.20.20/24 dev virt01\n" +
		"route add 10.1.0.0/16 encap mpls 3 via 172.16.20.21\n" + // implicit null
		"-f mpls route add 100 via inet 172.16.20.21 dev virt9\n" + // unknown dev
		"set tcp cc bbr\n"
	_, err := config.Parse("n.conf", strings.NewReader(src))
	var list config.ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("got error %v (%T), want config.ErrorList", err, err)
	}
	want := []string{"n.conf:2:11", "n.conf:5:34", "n.conf:6:49", "n.conf:7:12"}
	if len(list) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(list), len(want), err)
	}
	for i, e := range list {
		if got := e.Pos().String(); got != want[i] {
			t.Errorf("error %d: got position %s, want %s (%v)", i, got, want[i], e)
		}
	}
	var first *config.Error
	if !errors.As(err, &first) || first != list[0] {
		t.Errorf("errors.As(*config.Error) got %v, want the first error %v", first, list[0])
	}
	if got := strings.Count(err.Error(), "\n") + 1; got != len(want) {
		t.Errorf("got %d lines in Error(), want %d", got, len(want))
	}
}

func TestParseBoundsErrors(t *testing.T) {
	src := strings.Repeat("bogus\n", 3*config.MaxErrors)
	_, err := config.Parse("n.conf", strings.NewReader(src))
	var list config.ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("got error %v (%T), want config.ErrorList", err, err)
	}
	if got, want := len(list), config.MaxErrors+1; got != want {
		t.Fatalf("got %d errors, want %d", got, want)
	}
	last := list[len(list)-1]
	if last.Msg != "too many errors" || last.Line != config.MaxErrors+1 {
		t.Errorf("got last error %v, want \"too many errors\" at line %d", last, config.MaxErrors+1)
	}
}

package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mplsnode/mplsnode/gso"
)

// Limits of the language. Each carries its reason.
const (
	// MaxLabel is the largest MPLS label value: labels are 20 bits (RFC 3032 §2.1).
	MaxLabel = 1<<20 - 1
	// MinUnreservedLabel is the first label not reserved by IANA (RFC 3032
	// §2.1, RFC 7274): incoming and pushed labels start here, except explicit
	// null (0, 2).
	MinUnreservedLabel = 16
	// MaxLabelDepth is the deepest label stack a route may push; it matches
	// mpls.DefaultMaxDepth, the depth the data path parses and reserves
	// header room for.
	MaxLabelDepth = 16
	// MinMTU is the smallest MTU accepted: the IPv4 minimum datagram every
	// link must carry unfragmented (RFC 791).
	MinMTU = 68
	// MinIPv6MTU is the smallest MTU of an IPv6 route (RFC 8200 §5).
	MinIPv6MTU = 1280
	// MaxMTU is the largest MTU accepted: the 16-bit IPv4 total length.
	MaxMTU = 65535
	// MaxIfNameLen is the longest interface name Linux accepts
	// (IFNAMSIZ 16 including the terminating NUL).
	MaxIfNameLen = 15
	// MaxErrors bounds the errors one Parse reports, as go/scanner does, so a
	// wrong file (a binary, a shell script) does not flood the terminal.
	MaxErrors = 20
	// DefaultPlatformLabels is net.mpls.platform_labels when the file does
	// not set it: the whole label space. (Linux defaults to 0, which turns
	// MPLS input off; mplsnode has no other use for the setting.)
	DefaultPlatformLabels = MaxLabel + 1
	// DefaultTTL is net.mpls.default_ttl when unset, as on Linux.
	DefaultTTL = 255
	// LoopbackDev is the device name that needs no `link add`: the stack's
	// own loopback. A label route with `dev lo` delivers locally.
	LoopbackDev = "lo"
)

// Pos is a position in a config file. Line and Col count from 1; Col counts
// bytes (a tab is one column).
type Pos struct {
	File string
	Line int
	Col  int
}

// String returns "file:line:col".
func (p Pos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// IsValid reports whether p was set by the parser.
func (p Pos) IsValid() bool { return p.Line > 0 }

// Errorf returns an *Error at p about token, for callers (the node) that
// find semantic problems after parsing.
// A string argument longer than MaxQuoted bytes is shortened in the
// message (ShortToken), so that a 2 MB word gives a one-line message;
// Token keeps the word whole.
func (p Pos) Errorf(token, format string, args ...any) *Error {
	for i, a := range args {
		if s, ok := a.(string); ok && len(s) > MaxQuoted {
			args[i] = ShortToken(s)
		}
	}
	return &Error{File: p.File, Line: p.Line, Col: p.Col, Token: token, Msg: fmt.Sprintf(format, args...)}
}

// MaxQuoted is the most bytes of a token an error message quotes.
const MaxQuoted = 60

// ShortToken returns s when it is at most MaxQuoted bytes long, else its
// first bytes (cut at a UTF-8 boundary) followed by "...(N bytes)".
func ShortToken(s string) string {
	if len(s) <= MaxQuoted {
		return s
	}
	cut := MaxQuoted - 16
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "...(" + strconv.Itoa(len(s)) + " bytes)"
}

// Config is a parsed node config file. Slices keep file order.
type Config struct {
	// File is the name passed to Parse.
	File string
	// Links are the interfaces the node attaches to (`link add`).
	Links []Link
	// Addrs are the node's interface addresses (`addr add`).
	Addrs []Addr
	// Routes are IP routes, labelled (FTN entries) or plain (`route add`).
	Routes []Route
	// LabelRoutes are MPLS routes on an incoming label (ILM entries,
	// `-f mpls route add`).
	LabelRoutes []LabelRoute
	// Sysctl holds the net.* sysctls, with defaults where a line is absent.
	Sysctl Sysctl
	// Settings holds mplsnode's own `set` words, with defaults.
	Settings Settings
	// BGP holds the `bgp` lines; nil when the file has none.
	BGP *BGP
	// Where maps each sysctl name ("net.mpls.default_ttl") and setting
	// ("set gso", "set tcp cc") given in the file to its line's position.
	Where map[string]Pos
}

// LinkType is the kind of lower link.
type LinkType uint8

// Link types.
const (
	// LinkAFPacket attaches to an existing interface (a veth) with AF_PACKET.
	LinkAFPacket LinkType = iota + 1
	// LinkTAP creates (or opens) a TAP device.
	LinkTAP
	// LinkXDP attaches to an existing interface (a veth) with AF_XDP
	// sockets and an XDP program that redirects its frames to them.
	LinkXDP
	// LinkUDP carries MPLS packets in UDP datagrams to one peer (RFC
	// 7510) over ordinary UDP sockets; it has no interface.
	LinkUDP
)

// MaxBusyPoll is the longest busy-poll a link may have, in microseconds
// (a millisecond: longer only burns CPU; the kernel's own block timeout
// is that long).
const MaxBusyPoll = 1000

// Receive ring slots an afpacket link may ask for (`rx-ring-frames N`):
// each slot holds one frame of up to the MTU, so the memory per queue is
// N times the slot size (2 KiB for a 1500-byte MTU: 64 MiB at the most).
const (
	MinRXRingFrames = 64
	MaxRXRingFrames = 32768
)

// DefaultBusyPoll is the busy-poll of an afpacket link without the word
// on a node that forwards (more than one link, or ip_forward or IPv6
// forwarding on): adaptive (afpacket.Options.BusyPollAdaptive), it spins
// only after a batch that was followed within it by another the last time
// (a request forwarded, whose response comes back through the node), so
// frames further apart than it (under 10,000 a second) never start a
// spin. 100 us covers a transaction through a neighbour and back on the
// 2-core bench machine (TCP_RR at 10,000 to 14,000 a second: bench row
// 9h). Nodes that do not forward default to 0.
const DefaultBusyPoll = 100 * time.Microsecond

// MaxQueues is the most queues a link may have.
const MaxQueues = 256

// String returns the config word for t.
func (t LinkType) String() string { return word(linkTypeWords, t, "LinkType") }

// LinkMode is how an afpacket link moves frames: `mode auto|mmsg|ring`.
type LinkMode uint8

// Link modes.
const (
	// LinkModeAuto (the default) uses memory-mapped packet rings where the
	// kernel sets them up, recvmmsg/sendmmsg otherwise.
	LinkModeAuto LinkMode = iota
	// LinkModeMMsg uses recvmmsg/sendmmsg.
	LinkModeMMsg
	// LinkModeRing uses packet rings or fails.
	LinkModeRing
)

// String returns the config word for m.
func (m LinkMode) String() string { return word(linkModes, m, "LinkMode") }

// Link is `link add NAME type afpacket|tap|xdp [bridge BR] [address MAC]
// [mtu N] [queues N] [mode auto|mmsg|ring] [qdisc-bypass on|off]
// [busy-poll USEC] [rx-ring-frames N]`, or `link add NAME type udp ...`
// (UDPLink).
type Link struct {
	Pos     Pos
	Name    string
	NamePos Pos
	Type    LinkType
	// Bridge is the Linux bridge a TAP device is added to; "" for none.
	// Only for LinkTAP.
	Bridge string
	// MTU is the link MTU; 0 means take the interface's own.
	MTU uint32
	// MTUPos is where the MTU value is written; zero without mtu.
	MTUPos Pos
	// Address, for LinkTAP, is the MAC of mplsnode's end of the TAP;
	// nil means a random locally administered one.
	Address net.HardwareAddr
	// Queues is the number of queues; 0 means one. afpacket: AF_PACKET
	// sockets in one PACKET_FANOUT group (hash: a flow stays on one), each
	// read by its own goroutine; tap: IFF_MULTI_QUEUE files; xdp: the
	// interface's RX queues, one AF_XDP socket each.
	Queues int
	// Mode is how an afpacket link moves frames. Only for LinkAFPacket.
	Mode LinkMode
	// QdiscBypass is `qdisc-bypass on`: frames sent skip the interface's
	// queueing discipline (PACKET_QDISC_BYPASS), and captures on the
	// interface no longer see them. Only for LinkAFPacket.
	QdiscBypass bool
	// BusyPoll is `busy-poll USEC`: after a receive batch, the node keeps
	// checking its busy-polled links' receive rings for that long before
	// it sleeps (afpacket.Options.BusyPoll); 0 sleeps at once. Only for
	// LinkAFPacket.
	BusyPoll time.Duration
	// RXRingFrames is `rx-ring-frames N`: the slots of each queue's
	// receive ring (afpacket.Options.RXRingFrames); 0 (not given) means
	// the default. Only for LinkAFPacket, not in mode mmsg.
	RXRingFrames int
	// RXRingFramesPos is where N is written; zero without rx-ring-frames.
	RXRingFramesPos Pos
	// BusyPollSet says the link has the busy-poll word. Without it a node
	// that forwards busy-polls adaptively (DefaultBusyPoll), any other
	// node not at all.
	BusyPollSet bool
	// MPLSInput reports whether labelled frames are accepted on this link.
	// True unless `sysctl net.mpls.conf.NAME.input=0`.
	MPLSInput bool
	// UDP is a udp link's sockets and RFC 7510 policy. Only for LinkUDP,
	// whose MTU is the largest outer IP packet (0: 1500).
	UDP UDPLink
}

// DefaultUDPPort is the port of a udp link's local or remote written
// without one: MPLS-in-UDP's (RFC 7510 §3).
const DefaultUDPPort = 6635

// UDPLink is the udp part of `link add NAME type udp local ADDR[:PORT]
// remote ADDR[:PORT] [source-ports MIN-MAX] [flows N] [checksum
// compute|zero] [ttl N] [dscp N] [gso on|off] [gro on|off]`.
type UDPLink struct {
	// Local is the address and port the link receives on; Remote the
	// peer's. A port not written is DefaultUDPPort.
	Local, Remote       netip.AddrPort
	LocalPos, RemotePos Pos
	// SourcePortMin and SourcePortMax bound the source ports; both 0
	// means RFC 7510's 49152-65535.
	SourcePortMin, SourcePortMax uint16
	// Flows is the number of source ports flows are spread over; 0 means
	// the default (16).
	Flows int
	// ZeroChecksum is `checksum zero` (IPv4 only).
	ZeroChecksum bool
	// TTL is the outer TTL or hop limit; 0 means the kernel's default.
	TTL uint8
	// DSCP is the outer DSCP, 0..63.
	DSCP uint8
	// NoGSO is `gso off`, NoGRO `gro off`.
	NoGSO, NoGRO bool
}

// Addr is `addr add ADDR/LEN dev NAME`.
type Addr struct {
	Pos Pos
	// Prefix is the address with its prefix length; host bits are kept
	// (172.16.20.20/24). Prefix.Masked() is the connected subnet.
	Prefix    netip.Prefix
	PrefixPos Pos
	Dev       string
	DevPos    Pos
}

// Route is `route add PREFIX [encap mpls STACK [ttl N]] [via [inet|inet6] ADDR]
// [dev NAME] [mtu [lock] N]`: an FTN entry when Labels is not empty. A
// multipath route (`nexthop ... nexthop ...`) has NextHops instead of
// Labels, Via and Dev.
//
// A config may hold a million routes, so a Route keeps one Pos (its line)
// and the columns of its items, which PrefixPos, LabelsPos, ViaPos and
// DevPos turn into positions.
type Route struct {
	Pos Pos
	// Prefix is canonical (host bits zero); `default` is 0.0.0.0/0 or ::/0.
	Prefix netip.Prefix
	// Labels is the pushed stack, outermost first; nil for a plain IP route.
	Labels []uint32
	// TTL is the `encap mpls ... ttl N` value; 0 means follow the TTL model.
	TTL uint8
	// Via is the next hop; invalid (zero) for a directly connected route.
	Via netip.Addr
	// Dev is the egress link. When the line omits it, Parse fills it with
	// the link whose connected subnet holds Via.
	Dev string
	// Columns of the prefix, label stack, next hop and device words; 0
	// when absent.
	PrefixCol, LabelsCol, ViaCol, DevCol int32
	// MTU is the route's IP MTU; 0 means link MTU minus label overhead.
	MTU uint32
	// MTULock is true for `mtu lock N` (PMTU discovery may not lower it).
	MTULock bool
	// NextHops are the hops of a multipath (ECMP) route, each written
	// `nexthop [encap mpls STACK] [via [inet|inet6] ADDR] [dev NAME]
	// [weight N]`; empty for a one-hop route.
	NextHops []NextHop
}

// PrefixPos returns the position of the prefix word.
func (r *Route) PrefixPos() Pos { return r.col(r.PrefixCol) }

// LabelsPos returns the position of the label stack (invalid if none).
func (r *Route) LabelsPos() Pos { return r.col(r.LabelsCol) }

// ViaPos returns the position of the next hop address (invalid if none).
func (r *Route) ViaPos() Pos { return r.col(r.ViaCol) }

// DevPos returns the position of the device name (invalid if none was
// written).
func (r *Route) DevPos() Pos { return r.col(r.DevCol) }

func (r *Route) col(c int32) Pos {
	if c == 0 {
		return Pos{}
	}
	return Pos{File: r.Pos.File, Line: r.Pos.Line, Col: int(c)}
}

// Hop is what a nexthop of a multipath route and one of a multipath label
// route both have.
type Hop struct {
	// Pos is the position of the nexthop word.
	Pos Pos
	// Via is the hop's neighbour: required in a LabelNextHop, invalid in
	// a NextHop for an on-link hop (dev only).
	Via    netip.Addr
	ViaPos Pos
	// Dev is the hop's link, filled from the connected subnet of Via
	// when the line omits it.
	Dev    string
	DevPos Pos
	// Weight is the hop's share of flows, 1..256 (ip-route(8)); 0 when
	// not given, which means 1.
	Weight uint16
}

// words returns h's via, dev and weight words, each left out when not
// given.
func (h *Hop) words() string {
	s := ""
	if h.Via.IsValid() {
		s += " " + viaWords(h.Via)
	}
	if h.Dev != "" {
		s += " dev " + h.Dev
	}
	if h.Weight != 0 {
		s += " weight " + strconv.Itoa(int(h.Weight))
	}
	return s
}

// NextHop is one `nexthop` of a multipath route.
type NextHop struct {
	Hop
	// Labels is the stack this hop pushes, outermost first; nil for plain
	// IP.
	Labels    []uint32
	LabelsPos Pos
	// TTL is the hop's `encap mpls ... ttl N`; 0 means follow the TTL
	// model.
	TTL uint8
}

// String returns h in config words, from the nexthop word on.
func (h NextHop) String() string {
	s := "nexthop"
	if h.Labels != nil {
		s += " encap mpls " + FormatStack(h.Labels)
		if h.TTL != 0 {
			s += " ttl " + strconv.Itoa(int(h.TTL))
		}
	}
	return s + h.words()
}

// LabelAction is what a label route does with the incoming top label.
type LabelAction uint8

// Label actions, named as in mpls.ILMAction.
const (
	// LabelPopForward pops the label and forwards to Via (as IP at the
	// bottom of the stack, else still labelled): `LABEL via inet ADDR`.
	LabelPopForward LabelAction = iota + 1
	// LabelSwap replaces the label with OutLabels: `LABEL as to STACK via ...`.
	LabelSwap
	// LabelPopLocal pops and delivers to the node's own stack: `LABEL dev lo`.
	LabelPopLocal
	// LabelMultipath spreads the label's flows over NextHops (ECMP):
	// `LABEL nexthop [as [to] STACK] via ADDR [dev NAME] [weight N] nexthop ...`.
	LabelMultipath
)

// String returns a short name for a.
func (a LabelAction) String() string { return word(labelActionNames, a, "LabelAction") }

// LabelRoute is `-f mpls route add LABEL [as [to] STACK] [via [inet|inet6]
// ADDR] [dev NAME]`: an ILM entry. A multipath label route (`LABEL nexthop
// ... nexthop ...`, LabelMultipath) has NextHops instead of OutLabels, Via
// and Dev.
type LabelRoute struct {
	Pos      Pos
	Label    uint32
	LabelPos Pos
	Action   LabelAction
	// OutLabels replace the incoming label for LabelSwap, outermost first.
	OutLabels    []uint32
	OutLabelsPos Pos
	Via          netip.Addr
	ViaPos       Pos
	// Dev is the egress link ("lo" for LabelPopLocal). Filled from the
	// connected subnet of Via when the line omits it.
	Dev    string
	DevPos Pos
	// NextHops are the hops of a LabelMultipath route, two or more (one
	// `nexthop` is parsed as the one-hop route it is); nil otherwise.
	NextHops []LabelNextHop
}

// LabelNextHop is one `nexthop [as [to] STACK] via [inet|inet6] ADDR [dev
// NAME] [weight N]` of a multipath label route: a swap to OutLabels, or
// without them a pop (to implicit null) and forward.
type LabelNextHop struct {
	Hop
	// OutLabels replace the incoming label, outermost first; nil to pop.
	OutLabels    []uint32
	OutLabelsPos Pos
}

// String returns h in config words, from the nexthop word on.
func (h LabelNextHop) String() string {
	s := "nexthop"
	if h.OutLabels != nil {
		s += " as to " + FormatStack(h.OutLabels)
	}
	return s + h.words()
}

// GSOMode chooses where large TCP segments are cut to the link MTU: the
// one definition in package gso, shared with link/mplsendpoint.
type GSOMode = gso.Mode

// GSO modes (`set gso endpoint|stack|off`).
const (
	// GSOEndpoint (default): the MPLS link endpoint advertises GSO and
	// segments after pushing the labels, knowing the inner protocol.
	GSOEndpoint = gso.ModeEndpoint
	// GSOStack: gVisor's own software GSO segments before the link.
	GSOStack = gso.ModeStack
	// GSOOff: no GSO; TCP emits MSS-sized segments.
	GSOOff = gso.ModeOff
)

// XDPMode is `set forward xdp on|off|auto`: whether the label switch's
// decisions also run as an XDP program in the kernel (package forward/xdp).
type XDPMode uint8

// XDP modes.
const (
	// XDPDefault (no `set forward xdp` line): auto on a forwarding node
	// (one with label routes, or IP forwarding on), off on any other.
	XDPDefault XDPMode = iota
	// XDPOff: every transit frame takes the userspace path.
	XDPOff
	// XDPOn: the program must attach to every link; the node refuses to
	// start otherwise.
	XDPOn
	// XDPAuto: the program runs where it attaches; where it cannot, the
	// node logs why once and runs without it.
	XDPAuto
)

// String returns the config word for m.
func (m XDPMode) String() string { return word(xdpModeWords, m, "XDPMode") }

// Sysctl holds the supported net.* sysctls.
type Sysctl struct {
	// IPTTLPropagate is net.mpls.ip_ttl_propagate: true (1, default) is the
	// uniform TTL model, false (0) the pipe model (RFC 3443).
	IPTTLPropagate bool
	// DefaultTTL is net.mpls.default_ttl (1..255, default 255): the TTL
	// pushed when it is not copied from IP.
	DefaultTTL uint8
	// PlatformLabels is net.mpls.platform_labels: incoming labels must be
	// below it. Default DefaultPlatformLabels.
	PlatformLabels uint32
	// IPv4Forward is net.ipv4.ip_forward (default false): forward IPv4
	// packets not addressed to the node.
	IPv4Forward bool
	// IPv6Forward is net.ipv6.conf.all.forwarding (default false).
	IPv6Forward bool
	// MultipathHashSeed is net.ipv4.fib_multipath_hash_seed (Linux 6.11's
	// words): the seed of the flow hash that picks a multipath route's hop,
	// for IPv4 and IPv6. 0 (default) means a random seed per start; a fixed
	// seed makes the placement of flows repeatable across restarts.
	MultipathHashSeed uint32
}

// Settings holds mplsnode's own `set` words.
type Settings struct {
	// GSO is `set gso endpoint|stack|off` (default endpoint).
	GSO GSOMode
	// TCPCongestion is `set tcp cc reno|cubic` (default cubic, as the stack and Linux).
	TCPCongestion string
	// TCPSACK is `set tcp sack on|off` (default on: loss recovery without
	// SACK collapses throughput on any loss).
	TCPSACK bool
	// TCPRACK is `set tcp rack on|off` (default on): RACK-TLP loss detection.
	TCPRACK bool
	// ForwardXDP is `set forward xdp on|off|auto` (XDPDefault without the
	// line: auto on a forwarding node).
	ForwardXDP XDPMode
}

// defaults returns a Config with every default filled in.
func defaults(name string) *Config {
	return &Config{
		File: name,
		Sysctl: Sysctl{
			IPTTLPropagate: true,
			DefaultTTL:     DefaultTTL,
			PlatformLabels: DefaultPlatformLabels,
		},
		Settings: Settings{GSO: GSOEndpoint, TCPCongestion: "cubic", TCPSACK: true, TCPRACK: true},
		Where:    map[string]Pos{},
	}
}

// FormatStack writes a label stack as the language does: 100/200.
func FormatStack(labels []uint32) string {
	var b strings.Builder
	for i, l := range labels {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(strconv.FormatUint(uint64(l), 10))
	}
	return b.String()
}

func viaWords(a netip.Addr) string {
	if a.Is4() {
		return "via inet " + a.String()
	}
	return "via inet6 " + a.String()
}

// String returns l as a canonical config line.
func (l Link) String() string {
	s := "link add " + l.Name + " type " + l.Type.String()
	if l.Bridge != "" {
		s += " bridge " + l.Bridge
	}
	if l.Address != nil {
		s += " address " + l.Address.String()
	}
	if l.MTU != 0 {
		s += " mtu " + strconv.FormatUint(uint64(l.MTU), 10)
	}
	if l.Queues > 1 {
		s += " queues " + strconv.Itoa(l.Queues)
	}
	if l.Mode != LinkModeAuto {
		s += " mode " + l.Mode.String()
	}
	if l.QdiscBypass {
		s += " qdisc-bypass on"
	}
	if l.BusyPoll != 0 || l.BusyPollSet {
		s += " busy-poll " + strconv.FormatInt(l.BusyPoll.Microseconds(), 10)
	}
	if l.RXRingFrames != 0 {
		s += " rx-ring-frames " + strconv.Itoa(l.RXRingFrames)
	}
	if l.Type == LinkUDP {
		s += l.UDP.words()
	}
	return s
}

// words returns the udp words of a link line, canonical.
func (u UDPLink) words() string {
	s := " local " + u.Local.String() + " remote " + u.Remote.String()
	if u.SourcePortMin != 0 {
		s += " source-ports " + strconv.Itoa(int(u.SourcePortMin)) + "-" + strconv.Itoa(int(u.SourcePortMax))
	}
	if u.Flows != 0 {
		s += " flows " + strconv.Itoa(u.Flows)
	}
	if u.ZeroChecksum {
		s += " checksum zero"
	}
	if u.TTL != 0 {
		s += " ttl " + strconv.Itoa(int(u.TTL))
	}
	if u.DSCP != 0 {
		s += " dscp " + strconv.Itoa(int(u.DSCP))
	}
	if u.NoGSO {
		s += " gso off"
	}
	if u.NoGRO {
		s += " gro off"
	}
	return s
}

// String returns a as a canonical config line.
func (a Addr) String() string { return "addr add " + a.Prefix.String() + " dev " + a.Dev }

// String returns r as a canonical config line.
func (r Route) String() string {
	s := "route add " + r.Prefix.String()
	if r.Labels != nil {
		s += " encap mpls " + FormatStack(r.Labels)
		if r.TTL != 0 {
			s += " ttl " + strconv.Itoa(int(r.TTL))
		}
	}
	if r.Via.IsValid() {
		s += " " + viaWords(r.Via)
	}
	if r.Dev != "" {
		s += " dev " + r.Dev
	}
	if r.MTU != 0 {
		s += " mtu "
		if r.MTULock {
			s += "lock "
		}
		s += strconv.FormatUint(uint64(r.MTU), 10)
	}
	for _, h := range r.NextHops {
		s += " " + h.String()
	}
	return s
}

// String returns r as a canonical config line.
func (r LabelRoute) String() string {
	s := "-f mpls route add " + strconv.FormatUint(uint64(r.Label), 10)
	if r.Action == LabelSwap {
		s += " as to " + FormatStack(r.OutLabels)
	}
	if r.Via.IsValid() {
		s += " " + viaWords(r.Via)
	}
	if r.Dev != "" {
		s += " dev " + r.Dev
	}
	for _, h := range r.NextHops {
		s += " " + h.String()
	}
	return s
}

// Format returns c as a config file in canonical form: links, addrs,
// sysctls, settings, routes, label routes. Parsing the result yields the
// same values (positions aside).
func (c *Config) Format() string {
	var b strings.Builder
	for _, l := range c.Links {
		b.WriteString(l.String() + "\n")
		if !l.MPLSInput {
			b.WriteString("sysctl net.mpls.conf." + l.Name + ".input=0\n")
		}
	}
	for _, a := range c.Addrs {
		b.WriteString(a.String() + "\n")
	}
	s := c.Sysctl
	fmt.Fprintf(&b, "sysctl net.mpls.ip_ttl_propagate=%d\n", b2i(s.IPTTLPropagate))
	fmt.Fprintf(&b, "sysctl net.mpls.default_ttl=%d\n", s.DefaultTTL)
	fmt.Fprintf(&b, "sysctl net.mpls.platform_labels=%d\n", s.PlatformLabels)
	fmt.Fprintf(&b, "sysctl net.ipv4.ip_forward=%d\n", b2i(s.IPv4Forward))
	fmt.Fprintf(&b, "sysctl net.ipv6.conf.all.forwarding=%d\n", b2i(s.IPv6Forward))
	if s.MultipathHashSeed != 0 {
		fmt.Fprintf(&b, "sysctl net.ipv4.fib_multipath_hash_seed=%d\n", s.MultipathHashSeed)
	}
	st := c.Settings
	fmt.Fprintf(&b, "set gso %s\nset tcp cc %s\nset tcp sack %s\nset tcp rack %s\n",
		st.GSO, st.TCPCongestion, onOff(st.TCPSACK), onOff(st.TCPRACK))
	if st.ForwardXDP != XDPDefault {
		fmt.Fprintf(&b, "set forward xdp %s\n", st.ForwardXDP)
	}
	for _, r := range c.Routes {
		b.WriteString(r.String() + "\n")
	}
	for _, r := range c.LabelRoutes {
		b.WriteString(r.String() + "\n")
	}
	if c.BGP != nil {
		c.BGP.format(&b)
	}
	return b.String()
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

func onOff(v bool) string {
	if v {
		return "on"
	}
	return "off"
}

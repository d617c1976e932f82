package config

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

var linkWords = []string{"type", "bridge", "mtu", "queues", "address", "mode", "qdisc-bypass", "busy-poll", "rx-ring-frames",
	"local", "remote", "source-ports", "flows", "checksum", "ttl", "dscp", "gso", "gro"}

// udpMinMTU is the smallest mtu of a udp link (the outer IP packet):
// IPv6's minimum link MTU, which leaves room for either family inside.
const udpMinMTU = 1280

// udpMaxFlows bounds a udp link's flows (link/udp's MaxFlows).
const udpMaxFlows = 256

// udpAddrPort parses a udp link's ADDR[:PORT] ([ADDR]:PORT for IPv6).
func (p *parser) udpAddrPort(what string) (netip.AddrPort, Pos) {
	t := p.next(what + " address such as 172.16.20.20:6635 or [2001:db8::20]:6635")
	pos := p.at(t)
	if ap, err := netip.ParseAddrPort(t.s); err == nil {
		a := ap.Addr()
		if a.Zone() != "" {
			p.fail(t, "zones are not allowed in %q; a udp link's socket picks its interface by route", t.s)
		}
		if a.Is4In6() {
			p.fail(t, "%q is an IPv4-mapped IPv6 address; write the IPv4 form", t.s)
		}
		if ap.Port() == 0 {
			p.fail(t, "bad %s %q: port 0; give the port peers use (%d by default)", what, t.s, DefaultUDPPort)
		}
		return netip.AddrPortFrom(a, ap.Port()), pos
	}
	if strings.HasPrefix(t.s, "[") || strings.Count(t.s, ":") == 1 {
		p.fail(t, "bad %s %q; expected ADDRESS:PORT such as 172.16.20.20:6635 or [2001:db8::20]:6635", what, t.s)
	}
	return netip.AddrPortFrom(p.address(t, what+" address"), DefaultUDPPort), pos
}

func (p *parser) link(pos Pos) {
	l := Link{Pos: pos, MPLSInput: true}
	l.Name, l.NamePos = p.ifName("link name")
	if l.Name == LoopbackDev {
		p.addAt(l.NamePos, "lo is the stack's own loopback; it needs no link add")
		panic(abort{})
	}
	seen := map[string]bool{}
	var k linkToks
	for p.more() {
		t := p.next("")
		p.once(seen, t, "link")
		if !p.linkWord(t, &l, &k) && !p.afpacketWord(t, &l, &k) && !p.udpWord(t, &l, &k) {
			p.fail(t, "unknown word %q in link; expected %s%s", t.s, oneOf(linkWords), suggest(t.s, linkWords))
		}
	}
	p.checkLinkWords(&l, &k)
	p.cfg.Links = append(p.cfg.Links, l)
}

// linkToks are the words of a link line that apply to some link types
// only, kept to point an error at them.
type linkToks struct{ bridge, addr, af, busy, ring, udp, mtu token }

// linkWord parses a word every link type takes (type, bridge, mtu,
// address, queues); false if t is none of them.
func (p *parser) linkWord(t token, l *Link, k *linkToks) bool {
	switch t.s {
	case "type":
		tt := p.next("link type afpacket, tap, xdp or udp")
		v, ok := wordValue[LinkType](linkTypeWords, tt.s)
		switch {
		case ok:
			l.Type = v
		case tt.s == "veth":
			p.fail(tt, "mplsnode attaches to an existing veth; create the pair outside and write \"link add %s type afpacket\"", l.Name)
		default:
			p.fail(tt, "unknown link type %q; expected afpacket, tap, xdp or udp%s", tt.s, suggest(tt.s, linkTypeWords[LinkAFPacket:]))
		}
	case "bridge":
		k.bridge = t
		l.Bridge, _ = p.ifName("bridge name")
	case "mtu":
		v, vt := p.number("link mtu", MinMTU, MaxMTU)
		l.MTU, l.MTUPos, k.mtu = uint32(v), p.at(vt), vt
	case "address":
		k.addr = t
		mt := p.next("a MAC address such as 02:00:00:00:00:01")
		mac, err := net.ParseMAC(mt.s)
		if err != nil || len(mac) != 6 || mac[0]&1 != 0 {
			p.fail(mt, "bad link address %q; expected a unicast Ethernet MAC such as 02:00:00:00:00:01", mt.s)
		}
		l.Address = mac
	case "queues":
		v, _ := p.number("number of queues", 1, MaxQueues)
		l.Queues = int(v)
	default:
		return false
	}
	return true
}

// afpacketWord parses a word of type afpacket (qdisc-bypass, busy-poll,
// rx-ring-frames, mode); false if t is none of them.
func (p *parser) afpacketWord(t token, l *Link, k *linkToks) bool {
	switch t.s {
	case "qdisc-bypass":
		k.af = t
		l.QdiscBypass = p.onOff("qdisc-bypass")
	case "busy-poll":
		k.af, k.busy = t, t
		v, _ := p.number("busy-poll microseconds", 0, MaxBusyPoll)
		l.BusyPoll = time.Duration(v) * time.Microsecond
		l.BusyPollSet = true
	case "rx-ring-frames":
		k.af, k.ring = t, t
		v, vt := p.number("receive ring slots", MinRXRingFrames, MaxRXRingFrames)
		l.RXRingFrames, l.RXRingFramesPos = int(v), p.at(vt)
	case "mode":
		k.af = t
		mt := p.next("link mode auto, mmsg or ring")
		v, ok := wordValue[LinkMode](linkModes, mt.s)
		if !ok {
			p.fail(mt, "unknown link mode %q; expected auto, mmsg or ring%s", mt.s, suggest(mt.s, linkModes))
		}
		l.Mode = v
	default:
		return false
	}
	return true
}

// udpWord parses a word of type udp (local, remote, source-ports, flows,
// checksum, ttl, dscp, gso, gro); false if t is none of them.
func (p *parser) udpWord(t token, l *Link, k *linkToks) bool {
	switch t.s {
	case "local":
		k.udp = t
		l.UDP.Local, l.UDP.LocalPos = p.udpAddrPort("local")
	case "remote":
		k.udp = t
		l.UDP.Remote, l.UDP.RemotePos = p.udpAddrPort("remote")
		if a := l.UDP.Remote.Addr(); a.IsUnspecified() || a.IsMulticast() {
			p.failAt(l.UDP.RemotePos, "remote %s is not a unicast address; a udp link has one peer", a)
		}
	case "source-ports":
		k.udp = t
		rt := p.next("source port range such as 49152-65535")
		lo, hi, ok := strings.Cut(rt.s, "-")
		a, err1 := strconv.ParseUint(lo, 10, 16)
		b, err2 := strconv.ParseUint(hi, 10, 16)
		if !ok || err1 != nil || err2 != nil || a == 0 || a > b {
			p.fail(rt, "bad source port range %q; expected MIN-MAX such as 49152-65535", rt.s)
		}
		l.UDP.SourcePortMin, l.UDP.SourcePortMax = uint16(a), uint16(b)
	case "flows":
		k.udp = t
		v, _ := p.number("number of source ports", 1, udpMaxFlows)
		l.UDP.Flows = int(v)
	case "checksum":
		k.udp = t
		ct := p.next("checksum compute or zero")
		switch ct.s {
		case "compute":
			l.UDP.ZeroChecksum = false
		case "zero":
			l.UDP.ZeroChecksum = true
		default:
			p.fail(ct, "unknown checksum %q; expected compute or zero%s", ct.s, suggest(ct.s, []string{"compute", "zero"}))
		}
	case "ttl":
		k.udp = t
		v, _ := p.number("outer ttl", 1, 255)
		l.UDP.TTL = uint8(v)
	case "dscp":
		k.udp = t
		v, _ := p.number("outer dscp", 0, 63)
		l.UDP.DSCP = uint8(v)
	case "gso":
		k.udp = t
		l.UDP.NoGSO = !p.onOff("gso")
	case "gro":
		k.udp = t
		l.UDP.NoGRO = !p.onOff("gro")
	default:
		return false
	}
	return true
}

// checkLinkWords refuses a link without a type and words its type does not
// take, and checks a udp link's words together.
func (p *parser) checkLinkWords(l *Link, k *linkToks) {
	if l.Type == 0 {
		p.failEnd("missing \"type afpacket\", \"type tap\", \"type xdp\" or \"type udp\" in link %s", l.Name)
	}
	if k.udp.s != "" && l.Type != LinkUDP {
		p.fail(k.udp, "%s applies only to type udp", k.udp.s)
	}
	if l.Type == LinkUDP {
		p.udpLink(l, k.mtu)
	}
	if l.Bridge != "" && l.Type != LinkTAP {
		p.fail(k.bridge, "bridge applies only to type tap; an %s link is already an interface", l.Type)
	}
	if l.Address != nil && l.Type != LinkTAP {
		p.fail(k.addr, "address applies only to type tap (the MAC of mplsnode's end of the TAP); an %s link uses its interface's", l.Type)
	}
	if k.af.s != "" && l.Type != LinkAFPacket {
		p.fail(k.af, "%s applies only to type afpacket", k.af.s)
	}
	if l.BusyPoll > 0 && l.Mode == LinkModeMMsg {
		p.fail(k.busy, "busy-poll polls the receive rings; a mode mmsg link has none (use mode ring or auto)")
	}
	if l.RXRingFrames > 0 && l.Mode == LinkModeMMsg {
		p.fail(k.ring, "rx-ring-frames sizes the receive ring; a mode mmsg link has none (use mode ring or auto)")
	}
}

// udpLink checks a udp link's words together: local and remote given, of
// one family, a zero checksum over IPv4 only, the mtu an outer IP packet,
// and no other udp link receiving on the same local address and port.
func (p *parser) udpLink(l *Link, mtuTok token) {
	u := &l.UDP
	if !u.Local.IsValid() || !u.Remote.IsValid() {
		p.failEnd("a udp link needs local ADDR[:PORT] and remote ADDR[:PORT]: link add %s type udp local 172.16.20.20:6635 remote 172.16.20.21:6635", l.Name)
	}
	if u.Local.Addr().Is4() != u.Remote.Addr().Is4() {
		p.failAt(u.RemotePos, "remote %s is not of local %s's family", u.Remote.Addr(), u.Local.Addr())
	}
	if u.ZeroChecksum && u.Remote.Addr().Is6() {
		p.failAt(u.RemotePos, "checksum zero is for IPv4 only: over IPv6 the UDP checksum is computed (RFC 6935/6936 conditions are not assumed)")
	}
	if l.MTU != 0 && l.MTU < udpMinMTU {
		p.fail(mtuTok, "a udp link's mtu is the outer IP packet: %d..%d", udpMinMTU, MaxMTU)
	}
	if u.SourcePortMin != 0 {
		flows := u.Flows
		if flows == 0 {
			flows = 16
		}
		if n := int(u.SourcePortMax-u.SourcePortMin) + 1; n < flows {
			p.failEnd("source-ports %d-%d holds %d ports, fewer than the link's %d flows; widen the range or lower flows", u.SourcePortMin, u.SourcePortMax, n, flows)
		}
	}
	for _, o := range p.cfg.Links {
		if o.Type == LinkUDP && o.UDP.Local == u.Local {
			p.failAt(u.LocalPos, "udp link %s already receives on %s; give each udp link its own local address or port", o.Name, u.Local)
		}
	}
}

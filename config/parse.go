package config

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// maxFileSize bounds what Parse reads: far above any real node config
// (a million routes) and far below what would hurt the process.
const maxFileSize = 64 << 20

// Parse reads a node config from r. name is used in positions and errors
// (usually the file's path). On any error it returns a nil *Config and an
// ErrorList of every problem found (at most MaxErrors, plus a final "too
// many errors"). It does no I/O beyond reading r.
func Parse(name string, r io.Reader) (*Config, error) {
	src, err := io.ReadAll(io.LimitReader(r, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("config: reading %s: %w", name, err)
	}
	if len(src) > maxFileSize {
		return nil, ErrorList{{File: name, Line: 1, Col: 1, Msg: fmt.Sprintf("file is larger than %d bytes; this is not a node config", maxFileSize)}}
	}
	text := string(src)
	src = nil
	p := &parser{file: name, cfg: defaults(name), src: text, names: map[string]string{}}
	// Size the route list once (a million routes would otherwise be
	// copied as it grows): there are at most as many as "route" words.
	p.cfg.Routes = make([]Route, 0, strings.Count(text, "route"))
	for n, rest := 1, text; rest != ""; n++ {
		line := rest
		if i := strings.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		if len(p.errs) > MaxErrors {
			break
		}
		p.parseLine(n, line)
	}
	p.cfg.Routes = slices.Clip(p.cfg.Routes)
	p.validate()
	if len(p.errs) > 0 {
		sort.SliceStable(p.errs, func(i, j int) bool {
			a, b := p.errs[i], p.errs[j]
			if a.Line != b.Line {
				return a.Line < b.Line
			}
			return a.Col < b.Col
		})
		if len(p.errs) > MaxErrors {
			e := *p.errs[MaxErrors]
			e.Msg = "too many errors"
			p.errs = append(p.errs[:MaxErrors:MaxErrors], &e)
		}
		return nil, p.errs
	}
	return p.cfg, nil
}

// ParseFile parses the config file at path; positions name path as given.
func ParseFile(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	return Parse(path, f)
}

type token struct {
	s   string
	col int
}

// lex splits a line into words at blanks, appended to toks; '#' starts a
// comment anywhere. It also returns the column just past the last word.
func lex(line string, toks []token) ([]token, int) {
	if i := strings.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	end := 1
	i := 0
	for i < len(line) {
		if isBlank(line[i]) {
			i++
			continue
		}
		j := i
		for j < len(line) && !isBlank(line[j]) {
			j++
		}
		toks = append(toks, token{s: line[i:j], col: i + 1})
		end = j + 1
		i = j
	}
	return toks, end
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' }

// abort unwinds the parse of one line after its first error, so that one
// mistake gives one message, not a cascade.
type abort struct{}

type parser struct {
	file string
	cfg  *Config
	errs ErrorList

	// the line being parsed
	line int
	toks []token
	i    int
	end  int

	// net.mpls.conf.DEV.input lines, checked once all links are known
	inputs []devSetting
	// src is the whole file: errors found after parsing quote the token
	// at their position from it (see tokenAt).
	src string
	// names interns device names, so that a million routes share a few
	// strings (and none keeps src alive).
	names map[string]string
	// bgpNets maps each bgp network to its line, to find duplicates
	bgpNets map[netip.Prefix]Pos
}

type devSetting struct {
	dev string
	pos Pos
	on  bool
}

func (p *parser) pos(col int) Pos { return Pos{File: p.file, Line: p.line, Col: col} }

// at returns t's position; errors found after parsing quote the token
// written there (tokenAt), not its canonical form.
func (p *parser) at(t token) Pos { return p.pos(t.col) }

// addAt records an error found after parsing at a position from at.
func (p *parser) addAt(pos Pos, format string, args ...any) {
	p.add(pos, p.tokenAt(pos), format, args...)
}

// tokenAt returns the word of the file that starts at pos ("" if none).
// It scans the file, so it serves errors only.
func (p *parser) tokenAt(pos Pos) string {
	rest := p.src
	for n := 1; n < pos.Line; n++ {
		i := strings.IndexByte(rest, '\n')
		if i < 0 {
			return ""
		}
		rest = rest[i+1:]
	}
	if i := strings.IndexByte(rest, '\n'); i >= 0 {
		rest = rest[:i]
	}
	toks, _ := lex(rest, nil)
	for _, t := range toks {
		switch {
		case t.col == pos.Col:
			return strings.Clone(t.s)
		case t.col < pos.Col && pos.Col < t.col+len(t.s):
			// A part of a word: a device inside a sysctl name.
			part := t.s[pos.Col-t.col:]
			if i := strings.IndexAny(part, "./="); i >= 0 {
				part = part[:i]
			}
			return strings.Clone(part)
		}
	}
	return ""
}

// intern returns a copy of s shared by every equal name.
func (p *parser) intern(s string) string {
	if v, ok := p.names[s]; ok {
		return v
	}
	v := strings.Clone(s)
	p.names[v] = v
	return v
}

func (p *parser) add(pos Pos, tok, format string, args ...any) {
	p.errs = append(p.errs, pos.Errorf(tok, format, args...))
}

// fail records an error at t and abandons the line.
func (p *parser) fail(t token, format string, args ...any) {
	p.add(p.pos(t.col), t.s, format, args...)
	panic(abort{})
}

// failAt records an error at a position from at and aborts the line.
func (p *parser) failAt(pos Pos, format string, args ...any) {
	p.addAt(pos, format, args...)
	panic(abort{})
}

// failEnd records an error just past the line's last word.
func (p *parser) failEnd(format string, args ...any) {
	p.add(p.pos(p.end), "", format, args...)
	panic(abort{})
}

func (p *parser) more() bool { return p.i < len(p.toks) }

func (p *parser) peek() string {
	if p.more() {
		return p.toks[p.i].s
	}
	return ""
}

// next returns the next word; at the end of the line it fails saying
// `missing <what>`.
func (p *parser) next(what string) token {
	if !p.more() {
		p.failEnd("missing %s at end of line", what)
	}
	t := p.toks[p.i]
	p.i++
	return t
}

// word returns the next word, which must be one of valid.
func (p *parser) word(ctx string, valid ...string) token {
	t := p.next(oneOf(valid) + " after " + ctx)
	for _, v := range valid {
		if t.s == v {
			return t
		}
	}
	p.fail(t, "unknown word %q after %s; expected %s%s", t.s, ctx, oneOf(valid), suggest(t.s, valid))
	return t
}

func (p *parser) parseLine(n int, line string) {
	p.line, p.i = n, 0
	p.toks, p.end = lex(line, p.toks[:0])
	if len(p.toks) == 0 {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(abort); !ok {
				panic(r)
			}
		}
	}()
	p.statement()
}

// statements are the words a line may start with (after an optional `ip`).
var statements = []string{"link", "addr", "route", "sysctl", "set", "bgp"}

func (p *parser) statement() {
	start := p.toks[0]
	ip := false
	if start.s == "ip" {
		ip = true
		p.i++
	}
	family := "" // "", "inet", "inet6", "mpls"
	var famTok token
	for p.more() && strings.HasPrefix(p.peek(), "-") {
		t := p.next("")
		famTok = t
		switch t.s {
		case "-4":
			family = "inet"
		case "-6":
			family = "inet6"
		case "-M":
			family = "mpls"
		case "-f", "-family":
			f := p.word(t.s, "inet", "inet6", "mpls")
			family = f.s
		default:
			p.fail(t, "unknown option %q; expected -f inet|inet6|mpls, -4, -6 or -M%s", t.s, suggest(t.s, []string{"-f", "-4", "-6", "-M", "-family"}))
		}
	}
	t := p.next("a statement: " + oneOf(statements))
	if (ip || family != "") && (t.s == "sysctl" || t.s == "set" || t.s == "bgp") {
		p.fail(t, "%q is not an ip subcommand; write the line without \"ip\" or options", t.s)
	}
	if family != "" && t.s == "link" {
		p.fail(famTok, "option %s does not apply to link", famTok.s)
	}
	switch t.s {
	case "link":
		p.command(t, "link")
		p.link(p.pos(start.col))
	case "addr", "address":
		if family == "mpls" {
			p.fail(famTok, "addr takes -4 or -6, not the mpls family")
		}
		p.command(t, "addr")
		p.addr(p.pos(start.col), family)
	case "route":
		p.command(t, "route")
		if family == "mpls" {
			p.labelRoute(p.pos(start.col))
		} else {
			p.route(p.pos(start.col), family)
		}
	case "sysctl":
		p.sysctl(p.pos(start.col))
	case "set":
		p.set(p.pos(start.col))
	case "bgp":
		p.bgp(p.pos(start.col))
	case "netns":
		p.fail(t, "ip netns selects a namespace; write one config file per node and drop the \"ip netns exec NAME\" prefix")
	default:
		p.fail(t, "unknown statement %q; expected %s%s", t.s, oneOf(statements), suggest(t.s, append(statements, "address")))
	}
	if p.more() {
		t := p.next("")
		p.fail(t, "unexpected %q at end of %s statement", t.s, start.s)
	}
}

// command reads the verb after an object word; only `add` exists, since a
// config file describes a state, not changes to it.
func (p *parser) command(obj token, ctx string) {
	t := p.next("add after " + ctx)
	if t.s == "add" {
		return
	}
	if ctx == "link" && t.s == "set" {
		p.fail(t, "mplsnode brings its links up itself; delete this \"link set\" line")
	}
	p.fail(t, "unknown word %q after %s; expected add (a config file lists what to add)%s", t.s, ctx, suggest(t.s, []string{"add"}))
}

// ifName reads and checks an interface name.
func (p *parser) ifName(what string) (string, Pos) {
	t := p.next(what)
	if msg := checkIfName(t.s); msg != "" {
		p.fail(t, "bad %s %q: %s", what, t.s, msg)
	}
	return p.intern(t.s), p.at(t)
}

func checkIfName(s string) string {
	if len(s) > MaxIfNameLen {
		return fmt.Sprintf("longer than %d bytes (the Linux limit)", MaxIfNameLen)
	}
	if s == "." || s == ".." {
		return "not a valid interface name"
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '/' || c == ':' || c < 0x21 || c > 0x7e {
			return fmt.Sprintf("byte %q is not allowed in an interface name", c)
		}
	}
	return ""
}

// number reads a decimal in lo..hi.
func (p *parser) number(what string, lo, hi uint64) (uint64, token) {
	t := p.next(what)
	v, err := strconv.ParseUint(t.s, 10, 64)
	if err != nil || v < lo || v > hi {
		p.fail(t, "bad %s %q; expected a number from %d to %d", what, t.s, lo, hi)
	}
	return v, t
}

func (p *parser) once(seen map[string]bool, t token, ctx string) {
	if seen[t.s] {
		p.fail(t, "%s given twice in one %s", t.s, ctx)
	}
	seen[t.s] = true
}

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

var linkModes = []string{"auto", "mmsg", "ring"}

func (p *parser) link(pos Pos) {
	l := Link{Pos: pos, MPLSInput: true}
	l.Name, l.NamePos = p.ifName("link name")
	if l.Name == LoopbackDev {
		p.addAt(l.NamePos, "lo is the stack's own loopback; it needs no link add")
		panic(abort{})
	}
	seen := map[string]bool{}
	var bridgeTok, addrTok, afTok, busyTok, ringTok, udpTok, mtuTok token
	for p.more() {
		t := p.next("")
		p.once(seen, t, "link")
		switch t.s {
		case "type":
			tt := p.next("link type afpacket, tap, xdp or udp")
			switch tt.s {
			case "afpacket":
				l.Type = LinkAFPacket
			case "tap":
				l.Type = LinkTAP
			case "xdp":
				l.Type = LinkXDP
			case "udp":
				l.Type = LinkUDP
			case "veth":
				p.fail(tt, "mplsnode attaches to an existing veth; create the pair outside and write \"link add %s type afpacket\"", l.Name)
			default:
				p.fail(tt, "unknown link type %q; expected afpacket, tap, xdp or udp%s", tt.s, suggest(tt.s, []string{"afpacket", "tap", "xdp", "udp"}))
			}
		case "bridge":
			bridgeTok = t
			l.Bridge, _ = p.ifName("bridge name")
		case "mtu":
			v, vt := p.number("link mtu", MinMTU, MaxMTU)
			l.MTU, l.MTUPos, mtuTok = uint32(v), p.at(vt), vt
		case "address":
			addrTok = t
			mt := p.next("a MAC address such as 02:00:00:00:00:01")
			mac, err := net.ParseMAC(mt.s)
			if err != nil || len(mac) != 6 || mac[0]&1 != 0 {
				p.fail(mt, "bad link address %q; expected a unicast Ethernet MAC such as 02:00:00:00:00:01", mt.s)
			}
			l.Address = mac
		case "queues":
			v, _ := p.number("number of queues", 1, MaxQueues)
			l.Queues = int(v)
		case "qdisc-bypass":
			afTok = t
			l.QdiscBypass = p.onOff("qdisc-bypass")
		case "busy-poll":
			afTok, busyTok = t, t
			v, _ := p.number("busy-poll microseconds", 0, MaxBusyPoll)
			l.BusyPoll = time.Duration(v) * time.Microsecond
			l.BusyPollSet = true
		case "rx-ring-frames":
			afTok, ringTok = t, t
			v, vt := p.number("receive ring slots", MinRXRingFrames, MaxRXRingFrames)
			l.RXRingFrames, l.RXRingFramesPos = int(v), p.at(vt)
		case "mode":
			afTok = t
			mt := p.next("link mode auto, mmsg or ring")
			switch mt.s {
			case "auto":
				l.Mode = LinkModeAuto
			case "mmsg":
				l.Mode = LinkModeMMsg
			case "ring":
				l.Mode = LinkModeRing
			default:
				p.fail(mt, "unknown link mode %q; expected auto, mmsg or ring%s", mt.s, suggest(mt.s, linkModes))
			}
		case "local":
			udpTok = t
			l.UDP.Local, l.UDP.LocalPos = p.udpAddrPort("local")
		case "remote":
			udpTok = t
			l.UDP.Remote, l.UDP.RemotePos = p.udpAddrPort("remote")
			if a := l.UDP.Remote.Addr(); a.IsUnspecified() || a.IsMulticast() {
				p.failAt(l.UDP.RemotePos, "remote %s is not a unicast address; a udp link has one peer", a)
			}
		case "source-ports":
			udpTok = t
			rt := p.next("source port range such as 49152-65535")
			lo, hi, ok := strings.Cut(rt.s, "-")
			a, err1 := strconv.ParseUint(lo, 10, 16)
			b, err2 := strconv.ParseUint(hi, 10, 16)
			if !ok || err1 != nil || err2 != nil || a == 0 || a > b {
				p.fail(rt, "bad source port range %q; expected MIN-MAX such as 49152-65535", rt.s)
			}
			l.UDP.SourcePortMin, l.UDP.SourcePortMax = uint16(a), uint16(b)
		case "flows":
			udpTok = t
			v, _ := p.number("number of source ports", 1, udpMaxFlows)
			l.UDP.Flows = int(v)
		case "checksum":
			udpTok = t
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
			udpTok = t
			v, _ := p.number("outer ttl", 1, 255)
			l.UDP.TTL = uint8(v)
		case "dscp":
			udpTok = t
			v, _ := p.number("outer dscp", 0, 63)
			l.UDP.DSCP = uint8(v)
		case "gso":
			udpTok = t
			l.UDP.NoGSO = !p.onOff("gso")
		case "gro":
			udpTok = t
			l.UDP.NoGRO = !p.onOff("gro")
		default:
			p.fail(t, "unknown word %q in link; expected %s%s", t.s, oneOf(linkWords), suggest(t.s, linkWords))
		}
	}
	if l.Type == 0 {
		p.failEnd("missing \"type afpacket\", \"type tap\", \"type xdp\" or \"type udp\" in link %s", l.Name)
	}
	if udpTok.s != "" && l.Type != LinkUDP {
		p.fail(udpTok, "%s applies only to type udp", udpTok.s)
	}
	if l.Type == LinkUDP {
		p.udpLink(&l, mtuTok)
	}
	if l.Bridge != "" && l.Type != LinkTAP {
		p.fail(bridgeTok, "bridge applies only to type tap; an %s link is already an interface", l.Type)
	}
	if l.Address != nil && l.Type != LinkTAP {
		p.fail(addrTok, "address applies only to type tap (the MAC of mplsnode's end of the TAP); an %s link uses its interface's", l.Type)
	}
	if afTok.s != "" && l.Type != LinkAFPacket {
		p.fail(afTok, "%s applies only to type afpacket", afTok.s)
	}
	if l.BusyPoll > 0 && l.Mode == LinkModeMMsg {
		p.fail(busyTok, "busy-poll polls the receive rings; a mode mmsg link has none (use mode ring or auto)")
	}
	if l.RXRingFrames > 0 && l.Mode == LinkModeMMsg {
		p.fail(ringTok, "rx-ring-frames sizes the receive ring; a mode mmsg link has none (use mode ring or auto)")
	}
	p.cfg.Links = append(p.cfg.Links, l)
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

// addr parses `addr add ADDR[/LEN] dev NAME`.
func (p *parser) addr(pos Pos, family string) {
	a := Addr{Pos: pos}
	t := p.next("an address such as 172.16.20.20/24")
	a.PrefixPos = p.at(t)
	a.Prefix = p.prefix(t, false)
	if ip := a.Prefix.Addr(); ip.IsUnspecified() || ip.IsMulticast() || ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		p.fail(t, "%s is not a unicast address; an interface needs one", ip)
	}
	if !p.familyOK(family, a.Prefix.Addr()) {
		p.fail(t, "address %s is not %s, as %s requires", t.s, famName(family), optFor(family))
	}
	if !p.more() {
		p.failEnd("missing dev NAME: the link that holds %s", t.s)
	}
	for p.more() {
		w := p.next("")
		if w.s != "dev" {
			p.fail(w, "unknown word %q in addr; expected dev%s", w.s, suggest(w.s, []string{"dev"}))
		}
		if a.Dev != "" {
			p.fail(w, "dev given twice in one addr")
		}
		a.Dev, a.DevPos = p.ifName("device name")
	}
	p.cfg.Addrs = append(p.cfg.Addrs, a)
}

// prefix parses ADDR[/LEN]; a bare address is a host prefix. canonical
// requires zero host bits (a route); an addr keeps them.
func (p *parser) prefix(t token, canonical bool) netip.Prefix {
	var pfx netip.Prefix
	if strings.Contains(t.s, "/") {
		var err error
		pfx, err = netip.ParsePrefix(t.s)
		if err != nil {
			p.fail(t, "bad prefix %q; expected ADDRESS/LENGTH such as 10.0.0.0/8 or 2001:db8::/32", t.s)
		}
	} else {
		a := p.address(t, "address")
		pfx = netip.PrefixFrom(a, a.BitLen())
	}
	if strings.Contains(t.s, "%") {
		p.fail(t, "zones are not allowed in %q; write dev NAME", t.s)
	}
	if pfx.Addr().Is4In6() {
		p.fail(t, "%q is an IPv4-mapped IPv6 address; write the IPv4 form", t.s)
	}
	if canonical && pfx != pfx.Masked() {
		p.fail(t, "prefix %s has host bits set; did you mean %s?", t.s, pfx.Masked())
	}
	return pfx
}

func (p *parser) address(t token, what string) netip.Addr {
	a, err := netip.ParseAddr(t.s)
	if err != nil {
		p.fail(t, "bad %s %q; expected an IPv4 or IPv6 address", what, t.s)
	}
	if a.Zone() != "" {
		p.fail(t, "zones are not allowed in %q; write dev NAME", t.s)
	}
	if a.Is4In6() {
		p.fail(t, "%q is an IPv4-mapped IPv6 address; write the IPv4 form", t.s)
	}
	return a
}

func (p *parser) familyOK(family string, a netip.Addr) bool {
	switch family {
	case "inet":
		return a.Is4()
	case "inet6":
		return a.Is6()
	}
	return true
}

func famName(family string) string {
	if family == "inet6" {
		return "IPv6"
	}
	return "IPv4"
}

func optFor(family string) string {
	if family == "inet6" {
		return "-6 (-f inet6)"
	}
	return "-4 (-f inet)"
}

// via parses `via [inet|inet6] ADDR` after the via word.
func (p *parser) via() (netip.Addr, token) {
	t := p.next("a next-hop address after via")
	fam := ""
	if t.s == "inet" || t.s == "inet6" {
		fam = t.s
		t = p.next("a next-hop address after via " + fam)
	} else if t.s == "mpls" {
		p.fail(t, "via mpls is not supported; the next hop is an inet or inet6 address")
	}
	a := p.address(t, "next-hop address")
	if a.IsUnspecified() || a.IsMulticast() {
		p.fail(t, "next hop %s is not a unicast address", a)
	}
	if !p.familyOK(fam, a) {
		p.fail(t, "next hop %s is not %s, as \"via %s\" says", t.s, famName(fam), fam)
	}
	return a, t
}

var reservedNames = map[uint64]string{
	0: "IPv4 explicit null", 1: "router alert", 2: "IPv6 explicit null",
	3: "implicit null", 7: "entropy label indicator", 13: "GAL", 14: "OAM alert",
}

func labelName(v uint64) string {
	if n, ok := reservedNames[v]; ok {
		return fmt.Sprintf("label %d (%s)", v, n)
	}
	return fmt.Sprintf("label %d (reserved)", v)
}

// stack parses a pushed label stack 100/200 (outermost first) and checks
// every label: 16..MaxLabel, or explicit null (0, 2) as the bottom label.
// It returns each label's token for later errors.
func (p *parser) stack(t token) ([]uint32, []token) {
	parts := strings.Split(t.s, "/")
	if len(parts) > MaxLabelDepth {
		p.fail(t, "label stack of %d labels is deeper than %d", len(parts), MaxLabelDepth)
	}
	labels := make([]uint32, 0, len(parts))
	toks := make([]token, 0, len(parts))
	col := t.col
	for i, s := range parts {
		lt := token{s: s, col: col}
		col += len(s) + 1
		if s == "" {
			p.fail(t, "empty label in stack %q; write labels as 100/200, outermost first", t.s)
		}
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil || v > MaxLabel {
			p.fail(lt, "bad label %q; expected a number from 16 to %d", s, MaxLabel)
		}
		bottom := i == len(parts)-1
		switch {
		case v == 3:
			p.fail(lt, "label 3 (implicit null) cannot be pushed; use a pop route at the previous hop")
		case (v == 0 || v == 2) && !bottom:
			p.fail(lt, "%s may only be the bottom label of a stack", labelName(v))
		case v < MinUnreservedLabel && v != 0 && v != 2:
			p.fail(lt, "%s cannot be pushed; use a label from %d to %d", labelName(v), MinUnreservedLabel, MaxLabel)
		}
		labels = append(labels, uint32(v))
		toks = append(toks, lt)
	}
	return labels, toks
}

var routeWords = []string{"encap", "via", "dev", "mtu", "nexthop"}

var hopWords = []string{"encap", "via", "dev", "weight", "nexthop"}

// encap parses `mpls STACK [ttl N]` after encap.
func (p *parser) encap() (labels []uint32, labelToks []token, pos Pos, ttl uint8) {
	et := p.next("mpls after encap")
	if et.s != "mpls" {
		p.fail(et, "unknown encap %q; only encap mpls is supported%s", et.s, suggest(et.s, []string{"mpls"}))
	}
	st := p.next("a label stack such as 100/200 after encap mpls")
	pos = p.at(st)
	labels, labelToks = p.stack(st)
	if p.peek() == "ttl" {
		p.i++
		v, _ := p.number("encap ttl", 1, 255)
		ttl = uint8(v)
	}
	return labels, labelToks, pos, ttl
}

// route parses `route add PREFIX|default [encap mpls STACK [ttl N]]
// [via [inet|inet6] ADDR] [dev NAME] [mtu [lock] N]`, options in any order,
// or a multipath route: `route add PREFIX [mtu [lock] N] nexthop HOP
// [nexthop HOP ...]`, each HOP `[encap mpls STACK [ttl N]] [via [inet|inet6]
// ADDR] [dev NAME] [weight N]`.
func (p *parser) route(pos Pos, family string) {
	r := Route{Pos: pos}
	pt := p.next("a prefix or default after route add")
	r.PrefixCol = int32(pt.col)
	isDefault := pt.s == "default"
	if !isDefault {
		r.Prefix = p.prefix(pt, true)
		if !p.familyOK(family, r.Prefix.Addr()) {
			p.fail(pt, "prefix %s is not %s, as %s requires", pt.s, famName(family), optFor(family))
		}
	}
	var labelToks []token
	var hopLabelToks [][]token
	var mtuTok, firstHopWord token
	var seen wordSet
	for p.more() {
		t := p.next("")
		if t.s == "nexthop" {
			if firstHopWord.s != "" {
				p.fail(firstHopWord, "%s belongs inside a nexthop in a multipath route: write it after the nexthop word", firstHopWord.s)
			}
			h, toks := p.nextHop(t)
			r.NextHops = append(r.NextHops, h)
			hopLabelToks = append(hopLabelToks, toks)
			continue
		}
		if len(r.NextHops) > 0 {
			p.fail(t, "%q after a nexthop: route options (mtu) come before the first nexthop; expected %s%s", t.s, oneOf(hopWords), suggest(t.s, hopWords))
		}
		seen.once(p, t, "route", routeWords)
		switch t.s {
		case "encap":
			var lp Pos
			r.Labels, labelToks, lp, r.TTL = p.encap()
			r.LabelsCol = int32(lp.Col)
			firstHopWord = t
		case "via":
			var vt token
			r.Via, vt = p.via()
			r.ViaCol = int32(vt.col)
			firstHopWord = t
		case "dev":
			var dp Pos
			r.Dev, dp = p.ifName("device name")
			r.DevCol = int32(dp.Col)
			firstHopWord = t
		case "mtu":
			if p.peek() == "lock" {
				p.i++
				r.MTULock = true
			}
			var v uint64
			v, mtuTok = p.number("route mtu", MinMTU, MaxMTU)
			r.MTU = uint32(v)
		default:
			p.fail(t, "unknown word %q in route; expected %s%s", t.s, oneOf(routeWords), suggest(t.s, routeWords))
		}
	}
	if isDefault {
		via := r.Via
		if len(r.NextHops) > 0 {
			via = r.NextHops[0].Via
		}
		switch {
		case family == "inet6" || (family == "" && via.Is6()):
			r.Prefix = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		default:
			r.Prefix = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		}
	}
	v6 := r.Prefix.Addr().Is6()
	if r.MTU != 0 && v6 && r.MTU < MinIPv6MTU {
		p.fail(mtuTok, "mtu %d is below %d, the IPv6 minimum", r.MTU, MinIPv6MTU)
	}
	if len(r.NextHops) > 0 {
		for i := range r.NextHops {
			h := &r.NextHops[i]
			p.checkHop(r.Prefix, h.Labels, hopLabelToks[i], h.Via, h.ViaPos, h.Dev, h.DevPos)
			if !h.Via.IsValid() && h.Dev == "" {
				p.add(h.Pos, "nexthop", "nexthop of route %s needs via ADDRESS or dev NAME", r.Prefix)
				panic(abort{})
			}
		}
		p.cfg.Routes = append(p.cfg.Routes, r)
		return
	}
	p.checkHop(r.Prefix, r.Labels, labelToks, r.Via, r.ViaPos(), r.Dev, r.DevPos())
	if !r.Via.IsValid() && r.Dev == "" {
		p.failEnd("route %s needs via ADDRESS or dev NAME", r.Prefix)
	}
	p.cfg.Routes = append(p.cfg.Routes, r)
}

// nextHop parses one HOP after the nexthop word t.
func (p *parser) nextHop(t token) (NextHop, []token) {
	h := NextHop{Pos: p.pos(t.col)}
	var labelToks []token
	var seen wordSet
	for p.more() && p.peek() != "nexthop" {
		w := p.next("")
		seen.once(p, w, "nexthop", hopWords)
		switch w.s {
		case "encap":
			h.Labels, labelToks, h.LabelsPos, h.TTL = p.encap()
		case "via":
			var vt token
			h.Via, vt = p.via()
			h.ViaPos = p.at(vt)
		case "dev":
			h.Dev, h.DevPos = p.ifName("device name")
		case "weight":
			v, _ := p.number("nexthop weight", 1, 256)
			h.Weight = uint16(v)
		case "mtu":
			p.fail(w, "mtu is a route option: write it before the first nexthop")
		default:
			p.fail(w, "unknown word %q in nexthop; expected %s%s", w.s, oneOf(hopWords), suggest(w.s, hopWords))
		}
	}
	return h, labelToks
}

// checkHop checks one next hop of a route to prefix: families (an IPv6
// prefix may take an IPv4 next hop when labelled: 6PE, RFC 4798), the
// bottom label against the payload, link-local next hops, lo.
func (p *parser) checkHop(prefix netip.Prefix, labels []uint32, labelToks []token, via netip.Addr, viaPos Pos, dev string, devPos Pos) {
	v6 := prefix.Addr().Is6()
	if via.IsValid() && via.Is6() != v6 {
		switch {
		case !v6:
			p.addAt(viaPos, "next hop %s is IPv6 but prefix %s is IPv4; an IPv4 route needs an IPv4 next hop", via, prefix)
			panic(abort{})
		case labels == nil:
			p.addAt(viaPos, "next hop %s is IPv4 but prefix %s is IPv6; only a labelled route may cross families (6PE, RFC 4798: add encap mpls LABEL)", via, prefix)
			panic(abort{})
		}
	}
	if n := len(labels); n > 0 {
		bottom := labels[n-1]
		if (bottom == 0 && v6) || (bottom == 2 && !v6) {
			p.fail(labelToks[n-1], "%s cannot carry %s packets; use %d",
				labelName(uint64(bottom)), fam(v6), map[bool]int{false: 0, true: 2}[v6])
		}
	}
	if via.IsValid() && via.Is6() && via.IsLinkLocalUnicast() && dev == "" {
		p.addAt(viaPos, "link-local next hop %s needs dev NAME", via)
		panic(abort{})
	}
	if labels != nil && dev == LoopbackDev {
		p.addAt(devPos, "a labelled route cannot leave on lo; name the link toward the next hop")
		panic(abort{})
	}
}

// wordSet records which of a statement's words were seen (at most 64).
type wordSet uint64

// once fails if t, one of words, was seen before in this statement.
func (s *wordSet) once(p *parser, t token, ctx string, words []string) {
	for i, w := range words {
		if w == t.s {
			if *s&(1<<i) != 0 {
				p.fail(t, "%s given twice in one %s", t.s, ctx)
			}
			*s |= 1 << i
			return
		}
	}
}

func fam(v6 bool) string {
	if v6 {
		return "IPv6"
	}
	return "IPv4"
}

var labelRouteWords = []string{"as", "via", "dev", "nexthop"}

var labelHopWords = []string{"as", "via", "dev", "weight", "nexthop"}

// labelRoute parses `-f mpls route add LABEL [as [to] STACK]
// [via [inet|inet6] ADDR] [dev NAME]`, or a multipath label route:
// `-f mpls route add LABEL nexthop HOP [nexthop HOP ...]`, each HOP
// `[as [to] STACK] via [inet|inet6] ADDR [dev NAME] [weight N]`.
func (p *parser) labelRoute(pos Pos) {
	r := LabelRoute{Pos: pos}
	lt := p.next("an incoming label after -f mpls route add")
	r.LabelPos = p.at(lt)
	v, err := strconv.ParseUint(lt.s, 10, 64)
	if err != nil || v > MaxLabel {
		p.fail(lt, "bad label %q; expected a number from %d to %d (or 0, 2)", lt.s, MinUnreservedLabel, MaxLabel)
	}
	if v < MinUnreservedLabel && v != 0 && v != 2 {
		p.fail(lt, "incoming %s is reserved; label routes take 0, 2 or %d..%d", labelName(v), MinUnreservedLabel, MaxLabel)
	}
	r.Label = uint32(v)
	seen := map[string]bool{}
	var asTok token
	var firstHopWord token
	var hop LabelNextHop // the single hop's words (labelHopWord)
	for p.more() {
		t := p.next("")
		if t.s == "nexthop" {
			if firstHopWord.s != "" {
				p.fail(firstHopWord, "%s belongs inside a nexthop in a multipath label route: write it after the nexthop word", firstHopWord.s)
			}
			r.NextHops = append(r.NextHops, p.labelNextHop(t))
			continue
		}
		if len(r.NextHops) > 0 {
			p.fail(t, "%q after a nexthop; expected %s%s", t.s, oneOf(labelHopWords), suggest(t.s, labelHopWords))
		}
		p.once(seen, t, "label route")
		firstHopWord = t
		if p.labelHopWord(t, &hop) {
			if t.s == "as" {
				asTok = t
			}
			continue
		}
		switch t.s {
		case "to":
			p.fail(t, "\"to\" belongs after \"as\": write as to 300/400")
		default:
			p.fail(t, "unknown word %q in label route; expected %s%s", t.s, oneOf(labelRouteWords), suggest(t.s, labelRouteWords))
		}
	}
	if len(r.NextHops) > 0 {
		p.labelMultipath(&r)
		return
	}
	r.OutLabels, r.OutLabelsPos = hop.OutLabels, hop.OutLabelsPos
	r.Via, r.ViaPos, r.Dev, r.DevPos = hop.Via, hop.ViaPos, hop.Dev, hop.DevPos
	switch {
	case r.Dev == LoopbackDev && r.OutLabels != nil:
		p.fail(asTok, "dev lo delivers locally; a swap (as to) needs a next hop on a link")
	case r.Dev == LoopbackDev && r.Via.IsValid():
		p.addAt(r.ViaPos, "dev lo delivers locally; drop via, or name the link that reaches %s", r.Via)
		panic(abort{})
	case r.Dev == LoopbackDev:
		r.Action = LabelPopLocal
	case !r.Via.IsValid():
		p.failEnd("label route %d needs via ADDRESS (pop or swap and forward) or dev lo (deliver locally)", r.Label)
	case r.OutLabels != nil:
		r.Action = LabelSwap
	default:
		r.Action = LabelPopForward
	}
	if r.Via.IsValid() && r.Via.Is6() && r.Via.IsLinkLocalUnicast() && r.Dev == "" {
		p.addAt(r.ViaPos, "link-local next hop %s needs dev NAME", r.Via)
		panic(abort{})
	}
	p.cfg.LabelRoutes = append(p.cfg.LabelRoutes, r)
}

// labelMultipath checks the hops of the multipath label route r and adds
// it; one hop makes the one-hop route (swap or pop-forward) it is.
func (p *parser) labelMultipath(r *LabelRoute) {
	for i := range r.NextHops {
		h := &r.NextHops[i]
		switch {
		case h.Dev == LoopbackDev:
			p.addAt(h.DevPos, "dev lo delivers locally; a nexthop of a multipath label route needs a link toward its via")
			panic(abort{})
		case !h.Via.IsValid():
			p.add(h.Pos, "nexthop", "nexthop of label route %d needs via ADDRESS", r.Label)
			panic(abort{})
		case h.OutLabels != nil && (r.Label == 0 || r.Label == 2):
			p.addAt(h.OutLabelsPos, "%s can only be popped; drop as", labelName(uint64(r.Label)))
			panic(abort{})
		case h.Via.Is6() && h.Via.IsLinkLocalUnicast() && h.Dev == "":
			p.addAt(h.ViaPos, "link-local next hop %s needs dev NAME", h.Via)
			panic(abort{})
		}
	}
	if len(r.NextHops) == 1 {
		h := r.NextHops[0]
		r.NextHops = nil
		r.OutLabels, r.OutLabelsPos = h.OutLabels, h.OutLabelsPos
		r.Via, r.ViaPos, r.Dev, r.DevPos = h.Via, h.ViaPos, h.Dev, h.DevPos
		r.Action = LabelPopForward
		if r.OutLabels != nil {
			r.Action = LabelSwap
		}
	} else {
		r.Action = LabelMultipath
	}
	p.cfg.LabelRoutes = append(p.cfg.LabelRoutes, *r)
}

// labelHopWord parses the word w of a label route's hop that a one-hop
// and a multipath label route share (as [to] STACK, via ADDR, dev NAME)
// into h, and reports whether w was one of them.
func (p *parser) labelHopWord(w token, h *LabelNextHop) bool {
	switch w.s {
	case "as":
		if p.peek() == "to" {
			p.i++
		}
		st := p.next("a label stack such as 300/400 after as to")
		h.OutLabelsPos = p.at(st)
		h.OutLabels, _ = p.stack(st)
	case "via":
		var vt token
		h.Via, vt = p.via()
		h.ViaPos = p.at(vt)
	case "dev":
		h.Dev, h.DevPos = p.ifName("device name")
	default:
		return false
	}
	return true
}

// labelNextHop parses one HOP of a multipath label route after the
// nexthop word t.
func (p *parser) labelNextHop(t token) LabelNextHop {
	h := LabelNextHop{Pos: p.pos(t.col)}
	var seen wordSet
	for p.more() && p.peek() != "nexthop" {
		w := p.next("")
		seen.once(p, w, "nexthop", labelHopWords)
		if p.labelHopWord(w, &h) {
			continue
		}
		switch w.s {
		case "weight":
			v, _ := p.number("nexthop weight", 1, 256)
			h.Weight = uint16(v)
		default:
			p.fail(w, "unknown word %q in nexthop; expected %s%s", w.s, oneOf(labelHopWords), suggest(w.s, labelHopWords))
		}
	}
	return h
}

package config

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
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

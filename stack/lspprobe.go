package stack

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"time"

	"github.com/mplsnode/mplsnode/lspping"
	"github.com/mplsnode/mplsnode/mpls"
)

// LSPProbeOptions configures PingLSP and TraceLSP: the FEC probed and how
// the probes are sent.
type LSPProbeOptions struct {
	// FEC is the Target FEC; its prefix (a Nil FEC's: NilPrefix) is
	// looked up in the node's FIB for the label stack and next hop.
	FEC lspping.FEC `json:"-"`
	// NilPrefix is the prefix whose route a Nil FEC probe follows.
	NilPrefix netip.Prefix `json:"-"`
	// Count is the number of pings (0: 5).
	Count int `json:"count,omitempty"`
	// Interval is the time between pings (0: 1 s).
	Interval time.Duration `json:"interval,omitempty"`
	// Timeout is how long a probe waits for its reply (0: 2 s).
	Timeout time.Duration `json:"timeout,omitempty"`
	// Size pads the echo message to this many bytes (a Pad TLV; 0: no
	// padding).
	Size int `json:"size,omitempty"`
	// TC is the traffic class of the labels (--exp).
	TC uint8 `json:"tc,omitempty"`
	// TTL is the label TTL of pings (0: 255).
	TTL uint8 `json:"ttl,omitempty"`
	// MaxTTL is the largest label TTL a traceroute tries (0: 30).
	MaxTTL uint8 `json:"max_ttl,omitempty"`
	// ReplyMode is the reply mode asked for (0: 2, IPv4/IPv6 UDP).
	ReplyMode lspping.ReplyMode `json:"reply_mode,omitempty"`
	// Multipath: a traceroute follows every next hop (of the node's route
	// and of each multipath label), asking each LSR which 127/8
	// destinations take which hop (RFC 8029 §3.4.1.1).
	Multipath bool `json:"multipath,omitempty"`
}

// LSPDownstream is one downstream an LSR named in its reply (a DDMAP).
type LSPDownstream struct {
	// Address is the downstream router's address.
	Address string `json:"address"`
	// MTU is the downstream link's MTU.
	MTU uint16 `json:"mtu"`
	// Labels are the labels the packet leaves with, outermost first (3:
	// implicit null, the label popped).
	Labels []uint32 `json:"labels"`
	// Destinations counts the 127/8 destinations (of those asked about)
	// that take this downstream; 0 when not asked.
	Destinations int `json:"destinations,omitempty"`
}

// LSPProbe is one probe's outcome.
type LSPProbe struct {
	// Seq is the probe's sequence number; TTL its label TTL.
	Seq int   `json:"seq"`
	TTL uint8 `json:"ttl"`
	// Replied says a reply came; the other fields are its.
	Replied bool `json:"replied"`
	// Code and Subcode are the return code, Name its short name, Words
	// the RFC's words.
	Code    uint8  `json:"code"`
	Subcode uint8  `json:"subcode"`
	Name    string `json:"name"`
	Words   string `json:"words"`
	// Replier is the address the reply came from.
	Replier string `json:"replier,omitempty"`
	// RTTMillis is the round-trip time.
	RTTMillis float64 `json:"rtt_ms"`
	// Downstreams are the DDMAPs of the reply.
	Downstreams []LSPDownstream `json:"downstreams,omitempty"`
	// Error says why the probe could not be sent.
	Error string `json:"error,omitempty"`
}

// LSPPath is how a probe leaves the node: the route's hop.
type LSPPath struct {
	// Device and Via are the egress link and next hop.
	Device string `json:"device"`
	Via    string `json:"via"`
	// Labels are pushed, outermost first.
	Labels []uint32 `json:"labels"`
}

// LSPPingResult is PingLSP's answer.
type LSPPingResult struct {
	// FEC is the Target FEC in words.
	FEC string `json:"fec"`
	// Path is how the probes left.
	Path LSPPath `json:"path"`
	// Probes are the probes in order.
	Probes []LSPProbe `json:"probes"`
	// Sent, Replies and Egress count probes, replies, and replies with
	// return code 3 (the expected answer).
	Sent    int `json:"sent"`
	Replies int `json:"replies"`
	Egress  int `json:"egress"`
}

// LSPTrace is one traced path: the hops in order.
type LSPTrace struct {
	// Path is how the probes left the node.
	Path LSPPath `json:"path"`
	// Destination is the 127/8 destination the probes had.
	Destination string `json:"destination"`
	// Hops are the probes by label TTL.
	Hops []LSPProbe `json:"hops"`
	// Reached says the egress answered (return code 3).
	Reached bool `json:"reached"`
	// BrokenAt is the TTL of the hop whose return code says the LSP
	// breaks there (0: none did).
	BrokenAt uint8 `json:"broken_at,omitempty"`
}

// LSPTraceResult is TraceLSP's answer: one path, or with Multipath every
// path found.
type LSPTraceResult struct {
	FEC   string     `json:"fec"`
	Paths []LSPTrace `json:"paths"`
}

// Errors of PingLSP and TraceLSP.
var (
	ErrNoLSP = errors.New("no labelled route for the FEC")
)

// prober sends requests down one hop of a route and reads the replies.
type prober struct {
	s      *Stack
	opts   *LSPProbeOptions
	fec    lspping.FEC
	hop    mpls.NextHop
	src    netip.Addr
	conn   net.PacketConn
	port   uint16
	handle uint32
	// lastReply holds the DDMAPs of the last reply probe read.
	lastReply []lspping.DDMap
}

// lspRoute returns the FIB route the FEC's probes follow.
func (s *Stack) lspRoute(opts *LSPProbeOptions) (*mpls.FIBEntry, error) {
	p := opts.FEC.Prefix
	if opts.FEC.Type == lspping.FECNil {
		p = opts.NilPrefix
	}
	if !p.IsValid() {
		return nil, fmt.Errorf("FEC %v: no prefix to route by", opts.FEC)
	}
	e, ok := s.tables.FIB().Lookup(p.Addr())
	if !ok {
		return nil, fmt.Errorf("%w %v: no route", ErrNoLSP, p)
	}
	for _, h := range e.Group.Hops {
		if len(h.Labels) > 0 {
			return e, nil
		}
	}
	return nil, fmt.Errorf("%w %v: the route %v pushes no labels", ErrNoLSP, p, e.Prefix)
}

func (s *Stack) newProber(opts *LSPProbeOptions, hop mpls.NextHop) (*prober, error) {
	if len(hop.Labels) == 0 {
		return nil, fmt.Errorf("%w: hop via %v pushes no labels", ErrNoLSP, hop.Via)
	}
	src := s.probeSource(hop.Device, opts.FEC.Type.IPv6())
	if !src.IsValid() {
		return nil, fmt.Errorf("no address of the FEC's family to send from")
	}
	conn, err := s.ListenUDP(netip.AddrPortFrom(src, 0))
	if err != nil {
		return nil, err
	}
	ap, _ := netip.ParseAddrPort(conn.LocalAddr().String())
	return &prober{s: s, opts: opts, fec: opts.FEC, hop: hop, src: src, conn: conn, port: ap.Port(), handle: rand.Uint32()}, nil
}

// probeSource is the address requests leave from: the stack's on link
// dev of the FEC's family, else any of that family.
func (s *Stack) probeSource(dev string, v6 bool) netip.Addr {
	ok := func(a netip.Addr) bool { return a.Is4() != v6 && !a.IsLoopback() && !a.IsLinkLocalUnicast() }
	if l, found := s.byName[dev]; found {
		for _, p := range l.addrs {
			if ok(p.Addr()) {
				return p.Addr()
			}
		}
	}
	for _, l := range s.links {
		for _, p := range l.addrs {
			if ok(p.Addr()) {
				return p.Addr()
			}
		}
	}
	return netip.Addr{}
}

func (p *prober) path() LSPPath {
	return LSPPath{Device: p.hop.Device, Via: p.hop.Via.String(), Labels: labelInts(p.hop.Labels)}
}

func labelInts(l []mpls.Label) []uint32 {
	out := make([]uint32, len(l))
	for i, x := range l {
		out[i] = uint32(x)
	}
	return out
}

// dest127 is the i-th 127/8 destination: 127.0.0.1 and up
// (::ffff:127.0.0.1 and up for IPv6).
func dest127(v6 bool, i int) netip.Addr {
	n := uint32(127<<24|1) + uint32(i)
	a := netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
	if v6 {
		return netip.AddrFrom16(a.As16())
	}
	return a
}

// probe sends one request with label TTL ttl to dst, carrying ds (a
// DDMAP, nil for none), and waits for its reply.
func (p *prober) probe(ctx context.Context, seq int, ttl uint8, dst netip.Addr, ds *lspping.DDMap) LSPProbe {
	pr := LSPProbe{Seq: seq, TTL: ttl}
	mode := p.opts.ReplyMode
	if mode == 0 {
		mode = lspping.ReplyUDP
	}
	m := &lspping.Message{Version: lspping.Version, Flags: lspping.FlagValidateFEC, Type: lspping.Request,
		ReplyMode: mode, Handle: p.handle, Seq: uint32(seq), Sent: lspping.NTPTime(time.Now()),
		HasFECStack: true, FECs: []lspping.FEC{p.fec}}
	if ds != nil {
		m.DDMaps = []lspping.DDMap{*ds}
	}
	if p.opts.Size > 0 {
		if n := p.opts.Size - len(m.Marshal()) - 4; n > 0 {
			m.Pad = &lspping.Pad{Action: lspping.PadDrop, Len: (n + 3) &^ 3}
		}
	}
	ip := lspping.BuildIP(&lspping.Packet{Src: p.src, Dst: dst, SrcPort: p.port, DstPort: lspping.Port,
		TTL: 1, TOS: p.opts.TC << 5, RouterAlert: true, Payload: m.Marshal()})
	entries := make([]mpls.Entry, len(p.hop.Labels))
	for i, l := range p.hop.Labels {
		entries[i] = mpls.Entry{Label: l, TC: p.opts.TC, TTL: ttl, S: i == len(p.hop.Labels)-1}
	}
	timeout := p.opts.Timeout
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	// The wait and the round trip start once the request is on the link:
	// the next hop's MAC may take a resolution first.
	if err := p.s.originate(ctx, p.hop.Device, p.hop.Via, entries, ip); err != nil {
		pr.Error = err.Error()
		return pr
	}
	start := time.Now()
	deadline := start.Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = p.conn.SetReadDeadline(deadline)
	p.lastReply = nil
	buf := make([]byte, 9216)
	for {
		n, from, err := p.conn.ReadFrom(buf)
		if err != nil {
			return pr // timed out
		}
		rep, err := lspping.Decode(buf[:n])
		if err != nil || rep.Type != lspping.Reply || rep.Handle != p.handle || rep.Seq != uint32(seq) {
			continue
		}
		pr.Replied = true
		pr.RTTMillis = float64(time.Since(start).Microseconds()) / 1000
		pr.Code, pr.Subcode = uint8(rep.Code), rep.Subcode
		pr.Name, pr.Words = rep.Code.String(), rep.Code.Describe(rep.Subcode)
		if ua, ok := from.(*net.UDPAddr); ok {
			pr.Replier = ua.AddrPort().Addr().Unmap().String()
		} else {
			pr.Replier = from.String()
		}
		p.lastReply = rep.DDMaps
		for _, d := range rep.DDMaps {
			dsx := LSPDownstream{Address: d.Downstream.String(), MTU: d.MTU}
			for _, l := range d.Labels {
				dsx.Labels = append(dsx.Labels, uint32(l.Entry.Label))
			}
			if d.Multipath != nil {
				if a, ok := d.Multipath.Addresses(p.fec.Type.IPv6()); ok {
					dsx.Destinations = len(a)
				}
			}
			pr.Downstreams = append(pr.Downstreams, dsx)
		}
		return pr
	}
}

// PingLSP sends MPLS echo requests (LSP ping, RFC 8029) for the FEC down
// the label stack the stack's FIB gives its prefix (the first labelled hop
// of the route), from the stack's own address to a 127/8 destination, and
// collects the replies: a service can check the LSP it is about to use.
// Every request waits at most opts.Timeout for its reply, and ctx ends the
// whole early.
func (s *Stack) PingLSP(ctx context.Context, opts LSPProbeOptions) (*LSPPingResult, error) {
	e, err := s.lspRoute(&opts)
	if err != nil {
		return nil, err
	}
	var hop mpls.NextHop
	for _, h := range e.Group.Hops {
		if len(h.Labels) > 0 {
			hop = h
			break
		}
	}
	p, err := s.newProber(&opts, hop)
	if err != nil {
		return nil, err
	}
	defer p.conn.Close()
	count, interval, ttl := opts.Count, opts.Interval, opts.TTL
	if count <= 0 {
		count = 5
	}
	if interval <= 0 {
		interval = time.Second
	}
	if ttl == 0 {
		ttl = 255
	}
	res := &LSPPingResult{FEC: opts.FEC.String(), Path: p.path()}
	for i := 1; i <= count; i++ {
		if i > 1 {
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(interval):
			}
		}
		pr := p.probe(ctx, i, ttl, dest127(opts.FEC.Type.IPv6(), 0), nil)
		res.Probes = append(res.Probes, pr)
		res.Sent++
		if pr.Replied {
			res.Replies++
			if lspping.ReturnCode(pr.Code) == lspping.CodeEgress {
				res.Egress++
			}
		}
	}
	return res, nil
}

// MaxLSPTracePaths bounds the paths a multipath TraceLSP follows.
const MaxLSPTracePaths = 16

// multipathAddrs is how many 127/8 destinations a multipath traceroute
// asks each LSR about (one bit-masked set, RFC 8029 §3.4.1.1).
const multipathAddrs = 32

// TraceLSP traces the LSP of the FEC hop by hop (LSP traceroute, RFC
// 8029 §4.6): label TTL 1, 2, ... each request carrying the downstream
// mapping the previous hop answered, until the egress answers (return code
// 3), a hop answers a code that says the LSP breaks there, three hops in a
// row do not answer, or MaxTTL. With Multipath every next hop is followed
// (at most 16 paths).
func (s *Stack) TraceLSP(ctx context.Context, opts LSPProbeOptions) (*LSPTraceResult, error) {
	e, err := s.lspRoute(&opts)
	if err != nil {
		return nil, err
	}
	hops := e.Group.Hops
	if !opts.Multipath {
		hops = hops[:1]
		for _, h := range e.Group.Hops {
			if len(h.Labels) > 0 {
				hops = []mpls.NextHop{h}
				break
			}
		}
	}
	res := &LSPTraceResult{FEC: opts.FEC.String()}
	for _, h := range hops {
		if len(h.Labels) == 0 {
			continue
		}
		p, err := s.newProber(&opts, h)
		if err != nil {
			return nil, err
		}
		var mtu uint32
		if l, ok := s.byName[h.Device]; ok {
			mtu = l.endpoint.LinkMTU()
		}
		ds := lspping.NewDDMap(uint16(min(mtu, 0xffff)), h.Via, nil)
		for i, l := range h.Labels {
			ds.Labels = append(ds.Labels, lspping.DSLabel{Entry: mpls.Entry{Label: l, S: i == len(h.Labels)-1}, Protocol: lspping.ProtoStatic})
		}
		ds.HasLabels = true
		var addrs []netip.Addr
		for i := range multipathAddrs {
			addrs = append(addrs, dest127(opts.FEC.Type.IPv6(), i))
		}
		p.trace(ctx, res, 1, addrs, ds, nil)
		p.conn.Close()
	}
	return res, nil
}

// trace follows one path from label TTL ttl: addrs are the 127/8
// destinations that take it so far, ds the downstream mapping the last
// hop answered, done the hops probed before.
func (p *prober) trace(ctx context.Context, res *LSPTraceResult, ttl int, addrs []netip.Addr, ds lspping.DDMap, done []LSPProbe) {
	maxTTL := int(p.opts.MaxTTL)
	if maxTTL == 0 {
		maxTTL = 30
	}
	v6 := p.fec.Type.IPv6()
	t := LSPTrace{Path: p.path(), Destination: addrs[0].String(), Hops: done}
	misses := 0
	for ; ttl <= maxTTL && ctx.Err() == nil; ttl++ {
		req := ds
		if p.opts.Multipath {
			mp := multipathMask(addrs)
			req.Multipath = &mp
		}
		pr := p.probe(ctx, ttl, uint8(ttl), addrs[0], &req)
		t.Hops = append(t.Hops, pr)
		if !pr.Replied {
			if misses++; misses >= 3 {
				break
			}
			continue
		}
		misses = 0
		if !t.transit(pr, ttl) {
			break
		}
		rep := p.lastReply
		if len(rep) == 0 {
			t.BrokenAt = uint8(ttl)
			break
		}
		if p.opts.Multipath && len(rep) > 1 {
			p.branch(ctx, res, ttl+1, addrs, rep[1:], t.Hops)
		}
		d := rep[0]
		if p.opts.Multipath && d.Multipath != nil {
			if a, ok := d.Multipath.Addresses(v6); ok && len(a) > 0 {
				addrs = a
			}
		}
		d.Multipath, d.Code, d.Subcode = nil, 0, 0
		ds = d
	}
	if len(res.Paths) < MaxLSPTracePaths {
		res.Paths = append(res.Paths, t)
	}
}

// multipathMask returns the multipath data that asks a hop which of
// addrs, a subset of the multipathAddrs destinations from addrs[0] on,
// take each of its next hops.
func multipathMask(addrs []netip.Addr) lspping.Multipath {
	base := addrs[0]
	in := map[netip.Addr]bool{}
	for _, a := range addrs {
		in[a] = true
	}
	return lspping.Bitmask(base, multipathAddrs, func(i int) bool {
		x := base
		for range i {
			x = x.Next()
		}
		return in[x]
	})
}

// transit reads the reply pr to the probe of label TTL ttl: false ends
// the path, marking it reached at the egress or broken at a hop whose
// code says the LSP does not go on; true means the hop switched it.
func (t *LSPTrace) transit(pr LSPProbe, ttl int) bool {
	code := lspping.ReturnCode(pr.Code)
	if code == lspping.CodeEgress {
		t.Reached = true
		return false
	}
	if code != lspping.CodeLabelSwitched && code != lspping.CodeLabelSwitchedFECChange {
		t.BrokenAt = uint8(ttl)
		return false
	}
	return true
}

// branch traces, from label TTL ttl, each of the further next hops a hop
// answered (others), each with the destinations of addrs that its
// multipath data names (all of addrs without one; none: skipped), while
// the result has room; hops are the probes so far, copied per branch.
func (p *prober) branch(ctx context.Context, res *LSPTraceResult, ttl int, addrs []netip.Addr, others []lspping.DDMap, hops []LSPProbe) {
	v6 := p.fec.Type.IPv6()
	for _, d := range others {
		sub := addrs
		if d.Multipath != nil {
			if a, ok := d.Multipath.Addresses(v6); ok && len(a) > 0 {
				sub = a
			} else {
				continue
			}
		}
		d.Multipath, d.Code, d.Subcode = nil, 0, 0
		if len(res.Paths) < MaxLSPTracePaths {
			p.trace(ctx, res, ttl, sub, d, append([]LSPProbe(nil), hops...))
		}
	}
}

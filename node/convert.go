package node

import (
	"errors"
	"slices"

	"github.com/mplsnode/mplsnode/bgp"
	"github.com/mplsnode/mplsnode/config"
	"github.com/mplsnode/mplsnode/forward"
	"github.com/mplsnode/mplsnode/link/afpacket"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/link/udp"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/stack"
	"gvisor.dev/gvisor/pkg/tcpip"
)

// Check runs the node's semantic checks on a parsed config without touching
// the network: everything New would reject before opening a link, with the
// position of the offending line. It returns nil or a config.ErrorList.
func Check(cfg *config.Config) error {
	c, err := convert(cfg)
	if err != nil {
		return err
	}
	if _, err := mpls.NewFIBFunc(len(c.fibPos), c.fibRoute(cfg)); err != nil {
		return config.ErrorList{c.fibError(cfg, err)}
	}
	return nil
}

// converted is a config in stack and mpls terms.
type converted struct {
	links []stack.Link
	addrs []stack.Address
	// fibPos holds the index in the config's Routes of each route the FIB
	// gets (fibRoute writes them, one at a time).
	fibPos []int32
	ilm    []mpls.ILMEntry
	ttl    mpls.TTLModel
	pipe   uint8
	gso    mplsendpoint.GSOMode
	fwd    bool
	tcp    stack.TCPOptions
	// bgp is the speaker's config; nil without bgp lines.
	bgp *bgp.Config
}

// convert turns cfg into stack and mpls values and validates what can be
// validated without the network: the ILM and FIB tables and the features
// the node does not support.
func convert(cfg *config.Config) (*converted, error) {
	var errs config.ErrorList
	c := &converted{
		ttl:  mpls.TTLUniform,
		pipe: cfg.Sysctl.DefaultTTL,
		fwd:  cfg.ForwardsIP(),
		tcp: stack.TCPOptions{
			CongestionControl: cfg.Settings.TCPCongestion,
			DisableSACK:       !cfg.Settings.TCPSACK,
			DisableRACK:       !cfg.Settings.TCPRACK,
		},
	}
	if !cfg.Sysctl.IPTTLPropagate {
		c.ttl = mpls.TTLPipe
	}
	c.gso = cfg.Settings.GSO // one type: gso.Mode
	for _, l := range cfg.Links {
		c.links = append(c.links, stackLink(l, c.fwd))
	}
	for _, a := range cfg.Addrs {
		if a.Dev == config.LoopbackDev && !a.Prefix.IsSingleIP() {
			errs = append(errs, a.PrefixPos.Errorf(a.Prefix.String(), "an address on lo must be a host address: %s/%d", a.Prefix.Addr(), a.Prefix.Addr().BitLen()))
			continue
		}
		c.addrs = append(c.addrs, stack.Address{Link: a.Dev, Prefix: a.Prefix})
	}
	c.fibPos = make([]int32, 0, len(cfg.Routes))
	for i, r := range cfg.Routes {
		if r.Dev == config.LoopbackDev {
			errs = append(errs, r.DevPos().Errorf(r.Dev, "routes via lo are not supported; the stack delivers its own addresses itself"))
			continue
		}
		ok := true
		for _, h := range r.NextHops {
			if h.Dev == config.LoopbackDev {
				errs = append(errs, h.DevPos.Errorf(h.Dev, "routes via lo are not supported; the stack delivers its own addresses itself"))
				ok = false
			}
		}
		if ok {
			c.fibPos = append(c.fibPos, int32(i))
		}
	}
	for _, lr := range cfg.LabelRoutes {
		e, err := ilmEntry(lr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.ilm = append(c.ilm, e)
	}
	if _, err := mpls.NewILM(c.ilm); err != nil {
		errs = append(errs, tableError(err, func(i int) config.Pos {
			if i < len(cfg.LabelRoutes) {
				return cfg.LabelRoutes[i].LabelPos
			}
			return config.Pos{File: cfg.File, Line: 1, Col: 1}
		}))
	}
	if cfg.BGP != nil {
		bc, err := bgpConfig(cfg)
		var list config.ErrorList
		if errors.As(err, &list) {
			errs = append(errs, list...)
		}
		c.bgp = &bc
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return c, nil
}

// fibRoute returns the function that writes the i-th FIB route of cfg
// into r (for mpls.NewFIBFunc and Tables.ReplaceRoutesFunc), reusing r's
// hops and one label buffer: the FIB copies what it keeps.
func (c *converted) fibRoute(cfg *config.Config) func(i int, r *mpls.Route) {
	var labels []mpls.Label
	toLabels := func(ls []uint32) []mpls.Label {
		if ls == nil {
			return nil
		}
		start := len(labels)
		for _, l := range ls {
			labels = append(labels, mpls.Label(l))
		}
		return labels[start:len(labels):len(labels)]
	}
	return func(i int, r *mpls.Route) {
		cr := &cfg.Routes[c.fibPos[i]]
		labels = labels[:0]
		hops := r.NextHops[:0]
		*r = mpls.Route{Prefix: cr.Prefix, MTU: cr.MTU, TTL: cr.TTL}
		if len(cr.NextHops) == 0 {
			hops = append(hops, mpls.NextHop{Via: cr.Via, Device: cr.Dev, Labels: toLabels(cr.Labels)})
		}
		for _, h := range cr.NextHops {
			hops = append(hops, mpls.NextHop{Via: h.Via, Device: h.Dev, Labels: toLabels(h.Labels), Weight: h.Weight})
			r.TTL = max(r.TTL, h.TTL)
		}
		r.NextHops = hops
	}
}

// fibError positions an error of the FIB built from cfg (an
// mpls.TableError, wrapped or not) at its route's line.
func (c *converted) fibError(cfg *config.Config, err error) *config.Error {
	var te *mpls.TableError
	if errors.As(err, &te) && te.Index >= 0 && te.Index < len(c.fibPos) {
		r := &cfg.Routes[c.fibPos[te.Index]]
		return r.PrefixPos().Errorf(te.Key, "route %s: %v", te.Key, te.Err)
	}
	return config.Pos{File: cfg.File, Line: 1, Col: 1}.Errorf("", "%v", err)
}

// tableError positions an mpls table error at the entry it names.
func tableError(err error, pos func(i int) config.Pos) *config.Error {
	var te *mpls.TableError
	if errors.As(err, &te) {
		return pos(te.Index).Errorf(te.Key, "%v", te.Err)
	}
	return pos(0).Errorf("", "%v", err)
}

// routes returns the config's FIB routes as fibRoute writes them, each
// with hops and labels of its own (for a writer that keeps them: BGP's
// tables hold the static routes to write them again with BGP's).
func (c *converted) routes(cfg *config.Config) []mpls.Route {
	write := c.fibRoute(cfg)
	out := make([]mpls.Route, len(c.fibPos))
	for i := range out {
		var r mpls.Route
		write(i, &r)
		r.NextHops = slices.Clone(r.NextHops)
		for j := range r.NextHops {
			r.NextHops[j].Labels = slices.Clone(r.NextHops[j].Labels)
		}
		out[i] = r
	}
	return out
}

// connectedRoutes are the forwarding plane's on-link routes: one for each
// connected subnet (the FIB holds none; see forward.FIBRouter).
func connectedRoutes(c *converted) []forward.Route {
	var rs []forward.Route
	for _, a := range c.addrs {
		if a.Link != config.LoopbackDev {
			rs = append(rs, forward.Route{Prefix: a.Prefix.Masked(), Device: a.Link})
		}
	}
	return rs
}

// stackLink is the stack's link for config link l; fwd says the node
// forwards, which gives its afpacket links the busy-poll default.
func stackLink(l config.Link, fwd bool) stack.Link {
	sl := stack.Link{Name: l.Name, MTU: l.MTU, Bridge: l.Bridge, Queues: l.Queues, LinkAddress: tcpip.LinkAddress(l.Address)}
	switch l.Type {
	case config.LinkTAP:
		sl.Kind = stack.LinkTAP
	case config.LinkXDP:
		sl.Kind = stack.LinkXDP
	case config.LinkUDP:
		sl.Kind = stack.LinkUDP
		u := l.UDP
		sl.UDP = udp.Options{Local: u.Local, Remote: u.Remote, SourcePortMin: u.SourcePortMin, SourcePortMax: u.SourcePortMax,
			Flows: u.Flows, ZeroChecksum: u.ZeroChecksum, TTL: u.TTL, DSCP: u.DSCP, NoGSO: u.NoGSO, NoGRO: u.NoGRO}
	default:
		sl.Kind = stack.LinkAFPacket
		sl.QdiscBypass = l.QdiscBypass
		sl.BusyPoll = l.BusyPoll
		sl.RXRingFrames = l.RXRingFrames
		if !l.BusyPollSet && fwd && l.Mode != config.LinkModeMMsg {
			// A forwarding node spins for the response to what it
			// forwarded (config.DefaultBusyPoll).
			sl.BusyPoll, sl.BusyPollAdaptive = config.DefaultBusyPoll, true
		}
		sl.Mode, _ = afpacket.ParseMode(l.Mode.String()) // same words
		// The node owns the interface (its kernel holds no address
		// there): the kernel need not process what it receives.
		sl.DropKernelRX = true
	}
	sl.RejectMPLS = !l.MPLSInput
	return sl
}

// ilmEntry is the ILM entry of a label route.
func ilmEntry(lr config.LabelRoute) (mpls.ILMEntry, *config.Error) {
	e := mpls.ILMEntry{Label: mpls.Label(lr.Label), NextHop: lr.Via, Device: lr.Dev}
	switch lr.Action {
	case config.LabelSwap:
		e.Action = mpls.ILMSwap
		for _, l := range lr.OutLabels {
			e.OutLabels = append(e.OutLabels, mpls.Label(l))
		}
	case config.LabelPopForward:
		e.Action = mpls.ILMPopForward
	case config.LabelPopLocal:
		e.Action = mpls.ILMPopLocal
		e.Device = ""
	case config.LabelMultipath:
		e = mpls.ILMEntry{Label: e.Label, Action: mpls.ILMMultipath}
		for _, h := range lr.NextHops {
			nh := mpls.NextHop{Via: h.Via, Device: h.Dev, Weight: h.Weight}
			for _, l := range h.OutLabels {
				nh.Labels = append(nh.Labels, mpls.Label(l))
			}
			e.NextHops = append(e.NextHops, nh)
		}
	default:
		return e, lr.Pos.Errorf("", "unknown label action %s", lr.Action)
	}
	return e, nil
}

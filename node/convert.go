package node

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/mplsnode/mplsnode/link/afpacket"
	"strings"

	"github.com/mplsnode/mplsnode/bgp"
	"github.com/mplsnode/mplsnode/config"
	"github.com/mplsnode/mplsnode/forward"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/stack"
	"gvisor.dev/gvisor/pkg/tcpip"
)

// Check runs the node's semantic checks on a parsed config without touching
// the network: everything New would reject before opening a link, with the
// position of the offending line. It returns nil or a config.ErrorList.
func Check(cfg *config.Config) error {
	_, err := convert(cfg)
	return err
}

// converted is a config in stack and mpls terms.
type converted struct {
	links  []stack.Link
	addrs  []stack.Address
	routes []stack.Route
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
// validated without the network: the ILM and FTN tables and the features
// the node does not support.
func convert(cfg *config.Config) (*converted, error) {
	var errs config.ErrorList
	c := &converted{
		ttl:  mpls.TTLUniform,
		pipe: cfg.Sysctl.DefaultTTL,
		fwd:  len(cfg.Links) > 1 || cfg.Sysctl.IPv4Forward || cfg.Sysctl.IPv6Forward,
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
		sl := stack.Link{Name: l.Name, MTU: l.MTU, Bridge: l.Bridge, Queues: l.Queues, LinkAddress: tcpip.LinkAddress(l.Address)}
		switch l.Type {
		case config.LinkTAP:
			sl.Kind = stack.LinkTAP
		case config.LinkXDP:
			sl.Kind = stack.LinkXDP
		default:
			sl.Kind = stack.LinkAFPacket
			sl.QdiscBypass = l.QdiscBypass
			sl.Mode, _ = afpacket.ParseMode(l.Mode.String()) // same words
			// The node owns the interface (its kernel holds no address
			// there): the kernel need not process what it receives.
			sl.DropKernelRX = true
		}
		sl.RejectMPLS = !l.MPLSInput
		c.links = append(c.links, sl)
	}
	for _, a := range cfg.Addrs {
		if a.Dev == config.LoopbackDev && !a.Prefix.IsSingleIP() {
			errs = append(errs, a.PrefixPos.Errorf(a.Prefix.String(), "an address on lo must be a host address: %s/%d", a.Prefix.Addr(), a.Prefix.Addr().BitLen()))
			continue
		}
		c.addrs = append(c.addrs, stack.Address{Link: a.Dev, Prefix: a.Prefix})
	}
	var ftn []mpls.FTNEntry
	for _, r := range cfg.Routes {
		if r.Dev == config.LoopbackDev {
			errs = append(errs, r.DevPos.Errorf(r.Dev, "routes via lo are not supported; the stack delivers its own addresses itself"))
			continue
		}
		sr := stack.Route{Prefix: r.Prefix, Via: r.Via, Link: r.Dev, MTU: r.MTU, TTL: r.TTL}
		for _, l := range r.Labels {
			sr.Labels = append(sr.Labels, mpls.Label(l))
		}
		c.routes = append(c.routes, sr)
		if len(sr.Labels) > 0 {
			ftn = append(ftn, mpls.FTNEntry{Prefix: r.Prefix, Labels: sr.Labels, NextHop: r.Via, Device: r.Dev, MTU: r.MTU, TTL: r.TTL})
		}
	}
	if _, err := mpls.NewFTN(ftn); err != nil {
		errs = append(errs, tableError(err, func(i int) config.Pos {
			j := 0
			for _, r := range cfg.Routes {
				if len(r.Labels) > 0 && r.Dev != config.LoopbackDev {
					if j == i {
						return r.LabelsPos
					}
					j++
				}
			}
			return config.Pos{File: cfg.File, Line: 1, Col: 1}
		}))
	}
	for _, lr := range cfg.LabelRoutes {
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
		default:
			errs = append(errs, lr.Pos.Errorf("", "unknown label action %s", lr.Action))
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

// tableError positions an mpls table error at the entry it names.
func tableError(err error, pos func(i int) config.Pos) *config.Error {
	var te *mpls.TableError
	if errors.As(err, &te) {
		return pos(te.Index).Errorf(te.Key, "%v", te.Err)
	}
	return pos(0).Errorf("", "%v", err)
}

// routeError positions a stack route error ("route PREFIX: ...") at the
// route it names, or at the file when none matches.
func routeError(cfg *config.Config, err error) error {
	msg := err.Error()
	for _, r := range cfg.Routes {
		if strings.HasPrefix(msg, "route "+r.Prefix.String()+" ") || strings.HasPrefix(msg, "route "+r.Prefix.String()+":") {
			return config.ErrorList{r.PrefixPos.Errorf(r.Prefix.String(), "%s", msg)}
		}
	}
	return fmt.Errorf("%s: %w", cfg.File, err)
}

// transitRoutes is the forwarding plane's route table for transit IP: the
// configured routes (the egress link filled from the connected subnet of
// the next hop when the route names none, as the stack does) and an
// on-link route for each connected subnet. In the pipe model pushed labels
// get the configured pipe TTL, as the stack's own pushes do.
func transitRoutes(c *converted) *forward.Table { return transitRoutesOf(c.routes, c) }

// transitRoutesOf is transitRoutes with routes in place of the config's
// (the static routes and BGP's, as the BGP tables write them).
func transitRoutesOf(routes []stack.Route, c *converted) *forward.Table {
	addrs := c.addrs
	linkOf := func(via netip.Addr) string {
		for _, a := range addrs {
			if a.Link != config.LoopbackDev && a.Prefix.Masked().Contains(via) {
				return a.Link
			}
		}
		return ""
	}
	var rs []forward.Route
	for _, r := range routes {
		dev := r.Link
		if dev == "" && r.Via.IsValid() {
			dev = linkOf(r.Via)
		}
		ttl := r.TTL
		if ttl == 0 && c.ttl == mpls.TTLPipe {
			ttl = c.pipe // 0: mpls.DefaultPipeTTL
		}
		rs = append(rs, forward.Route{Prefix: r.Prefix, Device: dev, Via: r.Via, Labels: r.Labels, MTU: r.MTU, TTL: ttl})
	}
	for _, a := range addrs {
		if a.Link != config.LoopbackDev {
			rs = append(rs, forward.Route{Prefix: a.Prefix.Masked(), Device: a.Link})
		}
	}
	return forward.NewTable(rs)
}

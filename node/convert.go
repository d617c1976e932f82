package node

import (
	"errors"

	"github.com/mplsnode/mplsnode/config"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/stack"
)

// Check runs the node's semantic checks on a parsed config without touching
// the network: everything New would reject before opening a link, with the
// position of the offending line. It returns nil or a config.ErrorList.
func Check(cfg *config.Config) error {
	c, err := convert(cfg)
	if err != nil {
		return err
	}
	if _, err := mpls.NewFIB(c.fibRoutes); err != nil {
		return config.ErrorList{c.fibError(cfg, err)}
	}
	return nil
}

// converted is a config in stack and mpls terms.
type converted struct {
	links []stack.Link
	addrs []stack.Address
	// fibRoutes are the routes, written to the stack's tables
	// (mpls.Tables.ReplaceRoutes) once it runs; fibPos[i] is the index in
	// the config's Routes of fibRoutes[i].
	fibRoutes []mpls.Route
	fibPos    []int32
	ilm       []mpls.ILMEntry
	ttl       mpls.TTLModel
	pipe      uint8
	gso       mplsendpoint.GSOMode
	fwd       bool
	tcp       stack.TCPOptions
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
	switch cfg.Settings.GSO {
	case config.GSOStack:
		c.gso = mplsendpoint.GSOStack
	case config.GSOOff:
		c.gso = mplsendpoint.GSOOff
	default:
		c.gso = mplsendpoint.GSOEndpoint
	}
	for _, l := range cfg.Links {
		sl := stack.Link{Name: l.Name, MTU: l.MTU, Bridge: l.Bridge}
		switch l.Type {
		case config.LinkTAP:
			sl.Kind = stack.LinkTAP
		default:
			sl.Kind = stack.LinkAFPacket
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
	c.fibRoutes = make([]mpls.Route, 0, len(cfg.Routes))
	c.fibPos = make([]int32, 0, len(cfg.Routes))
	// One backing array for the one-hop routes' hops: a million routes
	// make one allocation, not a million.
	oneHop := make([]mpls.NextHop, len(cfg.Routes))
	for i, r := range cfg.Routes {
		if r.Dev == config.LoopbackDev {
			errs = append(errs, r.DevPos.Errorf(r.Dev, "routes via lo are not supported; the stack delivers its own addresses itself"))
			continue
		}
		mr := mpls.Route{Prefix: r.Prefix, MTU: r.MTU, TTL: r.TTL}
		if len(r.NextHops) > 0 {
			for _, h := range r.NextHops {
				if h.Dev == config.LoopbackDev {
					errs = append(errs, h.DevPos.Errorf(h.Dev, "routes via lo are not supported; the stack delivers its own addresses itself"))
					continue
				}
				mr.NextHops = append(mr.NextHops, mpls.NextHop{Via: h.Via, Device: h.Dev, Labels: toLabels(h.Labels), Weight: h.Weight})
				mr.TTL = max(mr.TTL, h.TTL)
			}
		} else {
			oneHop[i] = mpls.NextHop{Via: r.Via, Device: r.Dev, Labels: toLabels(r.Labels)}
			mr.NextHops = oneHop[i : i+1 : i+1]
		}
		c.fibRoutes = append(c.fibRoutes, mr)
		c.fibPos = append(c.fibPos, int32(i))
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
	if len(errs) > 0 {
		return nil, errs
	}
	return c, nil
}

// toLabels converts config labels to mpls labels (nil for none).
func toLabels(ls []uint32) []mpls.Label {
	if ls == nil {
		return nil
	}
	out := make([]mpls.Label, len(ls))
	for i, l := range ls {
		out[i] = mpls.Label(l)
	}
	return out
}

// fibError positions an error of the FIB built from c.fibRoutes (an
// mpls.TableError, wrapped or not) at its route's line.
func (c *converted) fibError(cfg *config.Config, err error) *config.Error {
	return tableError(err, func(i int) config.Pos {
		if i >= 0 && i < len(c.fibPos) {
			r := cfg.Routes[c.fibPos[i]]
			if r.LabelsPos.IsValid() {
				return r.LabelsPos
			}
			return r.PrefixPos
		}
		return config.Pos{File: cfg.File, Line: 1, Col: 1}
	})
}

// tableError positions an mpls table error at the entry it names.
func tableError(err error, pos func(i int) config.Pos) *config.Error {
	var te *mpls.TableError
	if errors.As(err, &te) {
		return pos(te.Index).Errorf(te.Key, "%v", te.Err)
	}
	return pos(0).Errorf("", "%v", err)
}

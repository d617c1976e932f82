// Package node assembles a running mplsnode from a parsed config: the links
// (AF_PACKET or TAP), the userspace stack with its addresses and routes, the
// MPLS tables (FIB and ILM) and the forwarding plane (package forward)
// that forwards labelled frames from link to link. It also owns reload: routes and label routes
// are swapped while connections run.
//
// A node plays every role its config asks for: host (TCP endpoints in the
// userspace stack), LER (IP packets forwarded through the stack get labels
// per the FIB), LSR (swap, swap and push, pop and forward, local pop), and
// plain IP router between its links. Every node answers MPLS echo requests
// (LSP ping and traceroute, RFC 8029) in both forwarding planes, and sends
// them for the control socket (lspping.go).
//
// Typical use:
//
//	cfg, err := config.ParseFile("node.conf")
//	n, err := node.New(cfg, node.Options{Logger: logger})
//	go n.Run(ctx)
//	err = n.Reload(newCfg) // on SIGHUP
//
// Protocol logic lives below: package mpls (tables, TTL rules),
// link/mplsendpoint (push, pop, GSO), stack (the netstack), forward (the
// label switch); the node wires them.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/mplsnode/mplsnode/bgp"
	"github.com/mplsnode/mplsnode/config"
	"github.com/mplsnode/mplsnode/forward"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/link/pcap"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/stack"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Options configures a Node beyond its config file. The zero value is
// valid.
type Options struct {
	// Logger receives the node's logs; nil means slog.Default().
	Logger *slog.Logger
	// Endpoints, keyed by link name, replaces the lower link of the
	// configured links of that name (instead of opening an AF_PACKET socket
	// or a TAP device): tests and embedders use gVisor channel or pipe
	// endpoints carrying whole Ethernet frames.
	Endpoints map[string]gstack.LinkEndpoint
	// Capture, if set, records every frame on the wire of the links named
	// in CaptureLinks (all links when it is empty) to a pcap file. The
	// caller closes it after the node.
	Capture *pcap.Writer
	// CaptureLinks names the captured links; each must be a link of the
	// config.
	CaptureLinks []string
}

// Node is a running mplsnode. Its methods are safe for concurrent use.
type Node struct {
	log   *slog.Logger
	stack *stack.Stack
	ls    *forward.Switch
	xdp   *xdpPlane // the XDP plane; without the program (prog nil) its neighbour watch alone
	// bgp is the BGP speaker and bgpTab the tables it writes through;
	// both nil without bgp lines.
	bgp    *bgp.Speaker
	bgpTab *bgpTables
	// echo is the MPLS echo responder (lspping.go).
	echo *responder

	mu     sync.Mutex // serialises Reload and Close
	cfg    *config.Config
	closed bool
	claims linkClaims // released by Close
}

// Stats is a snapshot of the node's counters.
type Stats struct {
	// Switch holds the label switch counters.
	Switch forward.Stats
	// Links holds each link endpoint's counters, keyed by link name.
	Links map[string]mplsendpoint.Stats
}

// New builds and starts the node that cfg describes: links are opened and
// frames flow when New returns. An interface another node of this network
// namespace holds is an *InUseError (errors.Is ErrInUse) naming its pid,
// returned before any link is opened. Semantic errors are a config.ErrorList
// positioned at the offending line; runtime errors (an interface that does
// not exist) name the link. On error nothing is left open.
func New(cfg *config.Config, opts Options) (*Node, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	c, err := convert(cfg)
	if err != nil {
		return nil, err
	}
	claims, err := prepareLinks(cfg, c, opts)
	if err != nil {
		return nil, err
	}
	ls := forward.New(c.ttl, logger)
	// The node forwards IP (net.ipv4.ip_forward, or more than one link)
	// through the forwarding plane; otherwise transit is dropped by the
	// stack, as a host does.
	var ipForwarder mplsendpoint.IPForwarder
	if c.fwd {
		ipForwarder = ls
	}
	// One seed for the node's own traffic and for transit, as Linux's one
	// net.ipv4.fib_multipath_hash_seed.
	seed := stack.MultipathSeed(cfg.Sysctl.MultipathHashSeed)
	ls.SetMultipathSeed(seed)
	s, err := stack.New(stack.Config{
		Links:     c.links,
		Addresses: c.addrs,
		ILM:       c.ilm,
		Forwarder: ls,
		// Transit IP is routed by the forwarding plane, never by gVisor.
		IPForwarder:       ipForwarder,
		TTLModel:          c.ttl,
		PipeTTL:           c.pipe,
		MultipathHashSeed: seed,
		GSO:               c.gso,
		// The links finish partial checksums and split large TCP packets
		// for what they forward (the LER role and plain transit: the
		// seed's return path needs no kernel routing).
		Forwarding: c.fwd,
		TCP:        c.tcp,
		Logger:     logger,
	})
	if err != nil {
		claims.Close()
		return nil, err
	}
	// The routes go to the stack's tables, the one API that writes routes
	// (reload and BGP write there too).
	if err := s.Tables().ReplaceRoutesFunc(len(c.fibPos), c.fibRoute(cfg)); err != nil {
		s.Close()
		claims.Close()
		return nil, config.ErrorList{c.fibError(cfg, err)}
	}
	ls.Attach(s.Netstack())
	// Transit IP follows the FIB the stack's own traffic follows, the
	// same snapshot at every instant, whoever writes it.
	var pipeTTL uint8
	if c.ttl == mpls.TTLPipe {
		pipeTTL = c.pipe // 0: mpls.DefaultPipeTTL
	}
	ls.SetRouter(forward.NewFIBRouter(forward.FIBRouterOptions{
		Tables: s.Tables(), Connected: connectedRoutes(c),
		Seed: seed, PipeTTL: pipeTTL,
	}))
	mode, dflt := xdpMode(cfg)
	x, err := startXDP(mode, dflt, c, s, logger)
	if err != nil {
		s.Close()
		claims.Close()
		return nil, err
	}
	n := &Node{log: logger, stack: s, ls: ls, xdp: x, cfg: withoutRoutes(cfg), claims: claims}
	if n.echo, err = startResponder(n, seed, logger); err != nil {
		x.close()
		s.Close()
		claims.Close()
		return nil, fmt.Errorf("lsp ping responder: %w", err)
	}
	if c.bgp != nil {
		n.bgpTab = newBGPTables(s, cfg, c)
		sp, err := bgp.New(*c.bgp, n.bgpTab, s, logger)
		if err != nil {
			n.echo.close()
			x.close()
			s.Close()
			claims.Close()
			return nil, err
		}
		n.bgp = sp
	}
	logger.Info("node started", "config", cfg.File, "links", len(c.links), "routes", len(c.fibPos),
		"label_routes", len(c.ilm), "ttl_model", c.ttl.String(), "forwarding", c.fwd)
	return n, nil
}

// ErrUnknownLink is returned by New when Options name a link the config
// does not declare.
var ErrUnknownLink = errors.New("no link named")

// prepareLinks checks the interfaces the links name, sets their capture
// and the endpoints opts brings in their place, and claims the interfaces
// the node opens itself, so that no second node takes them.
func prepareLinks(cfg *config.Config, c *converted, opts Options) (linkClaims, error) {
	replaced := make(map[string]bool, len(opts.Endpoints))
	for name := range opts.Endpoints {
		replaced[name] = true
	}
	if err := CheckInterfaces(cfg, replaced); err != nil {
		return nil, err
	}
	if opts.Capture != nil {
		if err := setCapture(c.links, opts.Capture, opts.CaptureLinks); err != nil {
			return nil, err
		}
	}
	var own []string // the interfaces this node opens
	for i := range c.links {
		if ep, ok := opts.Endpoints[c.links[i].Name]; ok {
			c.links[i].Kind = stack.LinkEndpoint
			c.links[i].Endpoint = ep
			continue
		}
		own = append(own, c.links[i].Name)
	}
	return claimLinks(own)
}

// CheckCaptureLinks reports a name in names that is not a link of cfg
// (ErrUnknownLink, listing the links), as New does for
// Options.CaptureLinks, without building anything.
func CheckCaptureLinks(cfg *config.Config, names []string) error {
	links := make([]stack.Link, len(cfg.Links))
	for i, l := range cfg.Links {
		links[i].Name = l.Name
	}
	return setCapture(links, nil, names)
}

// xdpMode is the XDP plane's mode for cfg: its `set forward xdp` line,
// or without one (dflt) auto on a forwarding node
// (config.Config.IsForwardingNode) and off on any other.
func xdpMode(cfg *config.Config) (mode config.XDPMode, dflt bool) {
	m := cfg.Settings.ForwardXDP
	if m != config.XDPDefault {
		return m, false
	}
	if cfg.IsForwardingNode() {
		return config.XDPAuto, true
	}
	return config.XDPOff, true
}

// setCapture sets w as the capture of the links named (all when names is
// empty); a name that is not a link is an error that lists the links.
func setCapture(links []stack.Link, w *pcap.Writer, names []string) error {
	if len(names) == 0 {
		for i := range links {
			links[i].Capture = w
		}
		return nil
	}
	for _, name := range names {
		i := slices.IndexFunc(links, func(l stack.Link) bool { return l.Name == name })
		if i < 0 {
			have := make([]string, len(links))
			for j, l := range links {
				have[j] = l.Name
			}
			return fmt.Errorf("capture: %w %q in the config (links: %s)", ErrUnknownLink, name, strings.Join(have, ", "))
		}
		links[i].Capture = w
	}
	return nil
}

// Stack returns the node's userspace stack (for dialing and listening from
// the node's addresses).
func (n *Node) Stack() *stack.Stack { return n.stack }

// LabelSwitch returns the node's label switch (the forwarding plane).
func (n *Node) LabelSwitch() *forward.Switch { return n.ls }

// Stats returns a snapshot of the node's counters.
func (n *Node) Stats() Stats {
	st := Stats{Switch: n.ls.Stats(), Links: map[string]mplsendpoint.Stats{}}
	for _, name := range n.stack.LinkNames() {
		st.Links[name] = n.stack.Endpoint(name).Stats()
	}
	return st
}

// Run blocks until ctx is done, then closes the node. It returns the
// error of Close.
func (n *Node) Run(ctx context.Context) error {
	<-ctx.Done()
	return n.Close()
}

// ErrRestartNeeded is wrapped by Reload's error when the new config changes
// what only a restart can change (links, addresses, sysctls, settings).
var ErrRestartNeeded = errors.New("restart needed")

// restartError is a positioned config error that also matches
// ErrRestartNeeded.
type restartError struct{ err *config.Error }

func (e *restartError) Error() string   { return e.err.Error() }
func (e *restartError) Unwrap() []error { return []error{e.err, ErrRestartNeeded} }

// Reload replaces the node's routes and label routes with newCfg's without
// dropping established connections. A config that fails the checks, or that
// changes links, addresses, sysctls or settings (which need a restart), is
// rejected with its error and the old tables stay.
func (n *Node) Reload(newCfg *config.Config) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return errors.New("node: reload after close")
	}
	c, err := convert(newCfg)
	if err != nil {
		return err
	}
	if err := restartNeeded(n.cfg, newCfg); err != nil {
		return err
	}
	old, err := convert(n.cfg) // n.cfg holds no routes: cheap
	if err != nil {
		return err
	}
	oldFIB := n.stack.Tables().FIB()
	if n.bgpTab != nil {
		if err := n.bgpTab.setStatic(c.routes(newCfg), c.ilm); err != nil {
			return config.ErrorList{c.fibError(newCfg, err)}
		}
		logChanges(n.log, oldFIB, n.stack.Tables().FIB(), n.cfg, newCfg)
		n.cfg = withoutRoutes(newCfg)
		if n.xdp != nil {
			n.xdp.sync()
		}
		n.bgp.Reresolve()
		if err := n.bgp.SetNetworks(c.bgp.Networks); err != nil {
			return err
		}
		n.log.Info("node reloaded", "config", newCfg.File, "routes", len(c.fibPos), "label_routes", len(c.ilm))
		return nil
	}
	if err := n.stack.SetILM(c.ilm); err != nil {
		return err
	}
	// The FIB is replaced in one atomic step: packets of running flows see
	// the old table or the new one, never none.
	if err := n.stack.Tables().ReplaceRoutesFunc(len(c.fibPos), c.fibRoute(newCfg)); err != nil {
		// Keep routes and label routes from the same file.
		_ = n.stack.SetILM(old.ilm)
		return config.ErrorList{c.fibError(newCfg, err)}
	}
	logChanges(n.log, oldFIB, n.stack.Tables().FIB(), n.cfg, newCfg)
	n.cfg = withoutRoutes(newCfg)
	if n.xdp != nil {
		n.xdp.sync()
	}
	n.log.Info("node reloaded", "config", newCfg.File, "routes", len(c.fibPos), "label_routes", len(c.ilm))
	return nil
}

// withoutRoutes returns a copy of cfg without its routes, which the node
// does not need once they are in the FIB (a million of them would double
// its memory).
func withoutRoutes(cfg *config.Config) *config.Config {
	c := *cfg
	c.Routes = nil
	return &c
}

// restartNeeded returns an error positioned at the first statement of
// newCfg that differs from old in what Reload cannot change.
func restartNeeded(old, newCfg *config.Config) error {
	restart := func(p config.Pos, tok, what string) error {
		if !p.IsValid() {
			p = config.Pos{File: newCfg.File, Line: 1, Col: 1}
		}
		return &restartError{p.Errorf(tok, "%s changed: a restart is needed (reload changes routes, label routes and bgp networks only)", what)}
	}
	sameLink := func(a, b config.Link) bool {
		ua, ub := a.UDP, b.UDP
		ua.LocalPos, ua.RemotePos, ub.LocalPos, ub.RemotePos = config.Pos{}, config.Pos{}, config.Pos{}, config.Pos{}
		return a.Name == b.Name && a.Type == b.Type && a.Bridge == b.Bridge && a.MTU == b.MTU && a.MPLSInput == b.MPLSInput && ua == ub
	}
	if len(old.Links) != len(newCfg.Links) || !slices.EqualFunc(old.Links, newCfg.Links, sameLink) {
		for i, l := range newCfg.Links {
			if i >= len(old.Links) || !sameLink(old.Links[i], l) {
				return restart(l.Pos, l.Name, "link "+l.Name)
			}
		}
		return restart(config.Pos{}, "", "the set of links")
	}
	sameAddr := func(a, b config.Addr) bool { return a.Prefix == b.Prefix && a.Dev == b.Dev }
	if !slices.EqualFunc(old.Addrs, newCfg.Addrs, sameAddr) {
		for i, a := range newCfg.Addrs {
			if i >= len(old.Addrs) || !sameAddr(old.Addrs[i], a) {
				return restart(a.Pos, a.Prefix.String(), "address "+a.Prefix.String())
			}
		}
		return restart(config.Pos{}, "", "the set of addresses")
	}
	if old.Sysctl != newCfg.Sysctl {
		return restart(firstWhere(newCfg, "sysctl"), "", "a sysctl")
	}
	if old.Settings != newCfg.Settings {
		return restart(firstWhere(newCfg, "set"), "", "a setting")
	}
	if (old.BGP == nil) != (newCfg.BGP == nil) || old.BGP != nil && bgpText(old.BGP) != bgpText(newCfg.BGP) {
		var p config.Pos
		if newCfg.BGP != nil {
			p = newCfg.BGP.Pos
		}
		return restart(p, "bgp", "the bgp configuration")
	}
	return nil
}

// firstWhere returns the earliest position of a sysctl or setting line.
func firstWhere(cfg *config.Config, prefix string) config.Pos {
	var best config.Pos
	for k, p := range cfg.Where {
		if (prefix == "set" && len(k) > 4 && k[:4] == "set ") || (prefix == "sysctl" && len(k) > 4 && k[:4] == "net.") {
			if !best.IsValid() || p.Line < best.Line {
				best = p
			}
		}
	}
	return best
}

// Close shuts the node down: connections are aborted, links closed, frames
// waiting for a neighbour dropped. It is idempotent.
func (n *Node) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	if n.bgp != nil {
		if err := n.bgp.Close(); err != nil {
			n.log.Warn("bgp: removing its routes at close", "err", err)
		}
	}
	n.echo.close()
	xerr := n.xdp.close()
	err := errors.Join(n.stack.Close(), xerr)
	n.ls.Flush()
	n.claims.Close()
	n.log.Info("node stopped", "config", n.cfg.File)
	return err
}

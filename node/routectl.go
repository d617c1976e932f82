package node

import (
	"errors"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/mplsnode/mplsnode/config"
	"github.com/mplsnode/mplsnode/mpls"
)

// ControlFile is the file name in the positions of errors about a route
// given on the control socket: `control:1:COL`, COL counting from the
// first byte of the command.
const ControlFile = "control"

// RouteChange is the control socket's answer to an accepted route change.
type RouteChange struct {
	// Change is "added", "replaced" (route replace of a route that was
	// there) or "removed".
	Change string `json:"change"`
	// Route is the route added or removed, in the config file's words.
	Route string `json:"route"`
}

// Command prefixes of the control socket's route changes.
const (
	cmdRouteAdd         = "route add "
	cmdRouteReplace     = "route replace "
	cmdRouteDel         = "route del "
	cmdMPLSRouteAdd     = "mpls route add "
	cmdMPLSRouteReplace = "mpls route replace "
	cmdMPLSRouteDel     = "mpls route del "
)

// replaceShift is how many columns "replace" is longer than "add": a
// replace command is parsed as the add line it stands for.
const replaceShift = len("replace") - len("add")

// controlChange carries out a route change command of the control socket:
// `route add LINE`, `route replace LINE`, `route del PREFIX`, `mpls route
// add LINE`, `mpls route replace LINE`, `mpls route del LABEL`. ok is
// false when cmd is none of these.
func controlChange(n *Node, cmd string) (answer any, ok bool, err error) {
	var ch *RouteChange
	switch {
	case strings.HasPrefix(cmd, cmdRouteAdd):
		ch, err = n.AddRoute(cmd)
	case strings.HasPrefix(cmd, cmdRouteReplace):
		ch, err = n.ReplaceRoute(cmd)
	case strings.HasPrefix(cmd, cmdMPLSRouteReplace):
		ch, err = n.ReplaceLabelRoute(cmd)
	case strings.HasPrefix(cmd, cmdRouteDel):
		ch, err = n.DelRoute(cmd[len(cmdRouteDel):])
	case strings.HasPrefix(cmd, cmdMPLSRouteAdd):
		ch, err = n.AddLabelRoute(cmd)
	case strings.HasPrefix(cmd, cmdMPLSRouteDel):
		ch, err = n.DelLabelRoute(cmd[len(cmdMPLSRouteDel):])
	default:
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	return ch, true, nil
}

// parseInContext parses line (one config statement) as line 1 of a config
// that also holds context's lines (the node's links, addresses, sysctls,
// settings and bgp lines), so that devices and next hops are checked
// against the node's. shift is added to the column of errors on line 1.
// The config is also converted, which runs the node's own checks. Only
// the first error is returned, so that it fits the control socket's one
// error line.
func parseInContext(context *config.Config, line string, shift int) (*config.Config, *converted, error) {
	if strings.ContainsAny(line, "\n\r") {
		return nil, nil, errors.New("want one line")
	}
	cfg, err := config.Parse(ControlFile, strings.NewReader(line+"\n"+context.Format()))
	if err == nil {
		var c *converted
		if c, err = convert(cfg); err == nil {
			return cfg, c, nil
		}
	}
	var list config.ErrorList
	if errors.As(err, &list) && len(list) > 0 {
		e := *list[0]
		if e.Line == 1 {
			e.Col = max(1, e.Col+shift)
		}
		return nil, nil, &e
	}
	return nil, nil, err
}

// controlError is an error positioned on the control command's line.
func controlError(col int, token, format string, args ...any) error {
	return config.Pos{File: ControlFile, Line: 1, Col: col}.Errorf(token, format, args...)
}

// AddRoute adds the IP route that line (`route add ...`, in the config
// file's words) describes, until the next reload. A prefix that already
// has a static route is refused (delete it first); a BGP route to the
// prefix is shadowed, as by a route in the file. Errors are positioned
// *config.Error values (file "control").
func (n *Node) AddRoute(line string) (*RouteChange, error) {
	return n.addRoute(ipRoutes, line, false)
}

// ReplaceRoute adds the IP route that line (`route replace ...`: the
// words of a config file's `route add ...`) describes, or puts it in the
// place of the static route to its prefix, as `ip route replace` does,
// until the next reload.
func (n *Node) ReplaceRoute(line string) (*RouteChange, error) {
	return n.addRoute(ipRoutes, line, true)
}

// AddLabelRoute adds the label route that line (`mpls route add ...`:
// `-f mpls route add ...` in the config file's words) describes, until
// the next reload. A label that already has a route is refused.
func (n *Node) AddLabelRoute(line string) (*RouteChange, error) {
	return n.addRoute(labelRoutes, line, false)
}

// ReplaceLabelRoute adds the label route that line (`mpls route replace
// ...`: the words of a config file's `-f mpls route add ...`) describes,
// or puts it in the place of the static route of its label, until the
// next reload.
func (n *Node) ReplaceLabelRoute(line string) (*RouteChange, error) {
	return n.addRoute(labelRoutes, line, true)
}

// routeKind is what differs between the control socket's add and replace
// commands of IP routes and those of label routes.
type routeKind struct {
	// add and replace are the commands' prefixes; badReplace is the
	// error for a replace line without its prefix.
	add, replace, badReplace string
	// addLocked adds line's route (an add command; shift is added to
	// error columns) with n locked; with replace a static route of the
	// same prefix or label gives way to it.
	addLocked func(n *Node, line string, shift int, replace bool) (*RouteChange, error)
}

var (
	ipRoutes    = routeKind{cmdRouteAdd, cmdRouteReplace, "want route replace PREFIX ...", (*Node).addIPRouteLocked}
	labelRoutes = routeKind{cmdMPLSRouteAdd, cmdMPLSRouteReplace, "want mpls route replace LABEL ...", (*Node).addLabelRouteLocked}
)

// addRoute adds the route of kind k that line describes (an add command,
// or with replace a replace command, parsed as the add line it stands
// for), unless the node is closed.
func (n *Node) addRoute(k routeKind, line string, replace bool) (*RouteChange, error) {
	shift := 0
	if replace {
		rest, ok := strings.CutPrefix(line, k.replace)
		if !ok {
			return nil, controlError(1, "", "%s", k.badReplace)
		}
		line, shift = k.add+rest, replaceShift
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, errors.New("node closed")
	}
	return k.addLocked(n, line, shift, replace)
}

// addIPRouteLocked is ipRoutes' addLocked.
func (n *Node) addIPRouteLocked(line string, shift int, replace bool) (*RouteChange, error) {
	cfg, c, err := parseInContext(n.cfg, line, shift)
	if err != nil {
		return nil, err
	}
	if len(cfg.Routes) != 1 || len(c.fibPos) != 1 {
		return nil, controlError(1, "", "want one route")
	}
	cr := &cfg.Routes[0]
	r := c.routes(cfg)[0]
	change := "added"
	if n.hasStaticLocked(r.Prefix) {
		if !replace {
			return nil, cr.PrefixPos().Errorf(r.Prefix.String(), "route %s exists; delete it first (or use route replace)", r.Prefix)
		}
		change = "replaced"
	}
	if n.bgpTab != nil {
		err = n.bgpTab.updateStatic(&r, netip.Prefix{})
	} else {
		err = n.stack.Tables().UpdateRoutes([]mpls.Route{r}, nil)
	}
	if err != nil {
		return nil, c.fibError(cfg, err)
	}
	n.routesChangedLocked()
	text := cr.String()
	n.log.Info("route "+change, "route", text, "by", "control")
	return &RouteChange{Change: change, Route: text}, nil
}

// DelRoute removes the static route to prefix (as `route del PREFIX`;
// `default` is the static default route, IPv4's or IPv6's, when there is
// one of them), until the next reload. A prefix without a static route is an error; a
// BGP route the static one shadowed takes its place.
func (n *Node) DelRoute(prefix string) (*RouteChange, error) {
	col := len(cmdRouteDel) + 1
	p, err := netip.ParsePrefix(prefix)
	if prefix == "default" {
		p, err = netip.PrefixFrom(netip.IPv4Unspecified(), 0), nil
	}
	if err != nil {
		return nil, controlError(col, prefix, "want a prefix such as 10.0.0.0/8 or 2001:db8::/32, got %q", config.ShortToken(prefix))
	}
	if p != p.Masked() {
		return nil, controlError(col, prefix, "prefix %s has host bits set; did you mean %s?", p, p.Masked())
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, errors.New("node closed")
	}
	if prefix == "default" {
		// The file's default is IPv4's or IPv6's by its next hop: take
		// the one there is.
		v6 := netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		switch has4, has6 := n.hasStaticLocked(p), n.hasStaticLocked(v6); {
		case has4 && has6:
			return nil, controlError(col, prefix, "there are static default routes for IPv4 and IPv6: write 0.0.0.0/0 or ::/0")
		case has6:
			p = v6
		}
	}
	if !n.hasStaticLocked(p) {
		return nil, controlError(col, prefix, "no static route to %s", p)
	}
	old := n.staticRouteLocked(p)
	if n.bgpTab != nil {
		err = n.bgpTab.updateStatic(nil, p)
	} else {
		err = n.stack.Tables().UpdateRoutes(nil, []netip.Prefix{p})
	}
	if err != nil {
		return nil, err
	}
	n.routesChangedLocked()
	text := routeText(old)
	n.log.Info("route removed", "route", text, "by", "control")
	return &RouteChange{Change: "removed", Route: text}, nil
}

// addLabelRouteLocked is labelRoutes' addLocked.
func (n *Node) addLabelRouteLocked(line string, shift int, replace bool) (*RouteChange, error) {
	// The config's words start with "-f ": parse them, and put errors
	// at the command's columns.
	// The context holds no label routes: the label is checked against
	// them here, with an error on the command's line.
	context := *n.cfg
	context.LabelRoutes = nil
	cfg, _, err := parseInContext(&context, "-f "+line, shift-len("-f "))
	if err != nil {
		return nil, err
	}
	if len(cfg.LabelRoutes) != 1 {
		return nil, controlError(1, "", "want one label route")
	}
	added := cfg.LabelRoutes[0]
	change := "added"
	cfg.LabelRoutes = slices.Clone(n.cfg.LabelRoutes)
	if i := slices.IndexFunc(cfg.LabelRoutes, func(r config.LabelRoute) bool { return r.Label == added.Label }); i >= 0 {
		if !replace {
			return nil, controlError(added.LabelPos.Col-len("-f "), strconv.Itoa(int(added.Label)), "label %d has a route; delete it first (or use route replace)", added.Label)
		}
		change = "replaced"
		cfg.LabelRoutes[i] = added
	} else {
		cfg.LabelRoutes = append(cfg.LabelRoutes, added)
	}
	c, err := convert(cfg)
	if err != nil {
		return nil, err
	}
	if err := n.setLabelRoutesLocked(cfg.LabelRoutes, c.ilm); err != nil {
		return nil, err
	}
	text := strings.TrimPrefix(added.String(), "-f ")
	n.log.Info("label route "+change, "route", text, "by", "control")
	return &RouteChange{Change: change, Route: text}, nil
}

// DelLabelRoute removes the static route of the incoming label (as `mpls
// route del LABEL`), until the next reload.
func (n *Node) DelLabelRoute(label string) (*RouteChange, error) {
	col := len(cmdMPLSRouteDel) + 1
	l, err := strconv.ParseUint(label, 10, 32)
	if err != nil || l > uint64(mpls.MaxLabel) {
		return nil, controlError(col, label, "want a label 0..%d, got %q", mpls.MaxLabel, config.ShortToken(label))
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, errors.New("node closed")
	}
	i := slices.IndexFunc(n.cfg.LabelRoutes, func(r config.LabelRoute) bool { return uint64(r.Label) == l })
	if i < 0 {
		return nil, controlError(col, label, "no static label route for label %d", l)
	}
	removed := n.cfg.LabelRoutes[i]
	cfg := *n.cfg
	cfg.LabelRoutes = slices.Delete(slices.Clone(n.cfg.LabelRoutes), i, i+1)
	c, err := convert(&cfg)
	if err != nil {
		return nil, err
	}
	if err := n.setLabelRoutesLocked(cfg.LabelRoutes, c.ilm); err != nil {
		return nil, err
	}
	text := strings.TrimPrefix(removed.String(), "-f ")
	n.log.Info("label route removed", "route", text, "by", "control")
	return &RouteChange{Change: "removed", Route: text}, nil
}

// setLabelRoutesLocked makes lrs (with ilm, their mpls form) the node's
// static label routes.
func (n *Node) setLabelRoutesLocked(lrs []config.LabelRoute, ilm []mpls.ILMEntry) error {
	var err error
	if n.bgpTab != nil {
		err = n.bgpTab.setStaticILM(ilm)
	} else {
		err = n.stack.SetILM(ilm)
	}
	if err != nil {
		return err
	}
	cfg := *n.cfg
	cfg.LabelRoutes = lrs
	n.cfg = &cfg
	if n.xdp != nil {
		n.xdp.sync()
	}
	return nil
}

// routesChangedLocked tells those who read the FIB on their own that it
// changed: the XDP plane and BGP's next-hop resolution.
func (n *Node) routesChangedLocked() {
	if n.xdp != nil {
		n.xdp.sync()
	}
	if n.bgp != nil {
		n.bgp.Reresolve()
	}
}

// hasStaticLocked reports whether p has a static route.
func (n *Node) hasStaticLocked(p netip.Prefix) bool {
	return n.staticRouteLocked(p) != nil
}

// staticRouteLocked returns the static route to p, or nil.
func (n *Node) staticRouteLocked(p netip.Prefix) *mpls.Route {
	if n.bgpTab != nil {
		n.bgpTab.mu.Lock()
		defer n.bgpTab.mu.Unlock()
		if i, ok := n.bgpTab.staticAt[p]; ok {
			r := n.bgpTab.static[i]
			return &r
		}
		return nil
	}
	// Without BGP every FIB route is static.
	f := n.stack.Tables().FIB()
	for i := range f.Len() {
		if e := f.Entry(i); e.Prefix == p {
			r := e.Route()
			return &r
		}
	}
	return nil
}

// routeText writes r in the config file's words.
func routeText(r *mpls.Route) string {
	cr := config.Route{Prefix: r.Prefix, MTU: r.MTU, TTL: r.TTL}
	if len(r.NextHops) == 1 && r.NextHops[0].Weight <= 1 {
		h := r.NextHops[0]
		cr.Via, cr.Dev = h.Via, h.Device
		for _, l := range h.Labels {
			cr.Labels = append(cr.Labels, uint32(l))
		}
	} else {
		for _, h := range r.NextHops {
			ch := config.NextHop{Hop: config.Hop{Via: h.Via, Dev: h.Device, Weight: h.Weight}}
			for _, l := range h.Labels {
				ch.Labels = append(ch.Labels, uint32(l))
			}
			cr.NextHops = append(cr.NextHops, ch)
		}
	}
	return cr.String()
}

// updateStatic adds the static route add (when not nil) or removes the
// static route to del (when valid), and writes the change to the FIB: a
// static route shadows BGP's to its prefix, and BGP's comes back when the
// static one goes.
func (t *bgpTables) updateStatic(add *mpls.Route, del netip.Prefix) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	static := slices.Clone(t.static)
	var p netip.Prefix
	var write []mpls.Route
	var remove []netip.Prefix
	if add != nil {
		p = add.Prefix
		replaced := len(static)
		static = slices.DeleteFunc(static, func(r mpls.Route) bool { return r.Prefix == p })
		replaced -= len(static)
		static = append(static, *add)
		write = append(write, *add)
		if replaced > 0 {
			// The route it replaced already shadowed BGP's.
			if err := t.tables.UpdateRoutes(write, nil); err != nil {
				return err
			}
			t.setStaticLocked(static, t.staticILM)
			return nil
		}
	} else {
		p = del
		static = slices.DeleteFunc(static, func(r mpls.Route) bool { return r.Prefix == del })
		if e, ok := t.routes[p]; ok {
			write = append(write, e)
		} else {
			remove = append(remove, p)
		}
	}
	if err := t.tables.UpdateRoutes(write, remove); err != nil {
		return err
	}
	t.setStaticLocked(static, t.staticILM)
	_, fromBGP := t.routes[p]
	switch {
	case add != nil && fromBGP:
		t.shadowed++
	case add == nil && fromBGP:
		t.shadowed--
	}
	return nil
}

// setStaticILM replaces the static label routes and writes them with
// BGP's; on error the previous ones stay.
func (t *bgpTables) setStaticILM(ilm []mpls.ILMEntry) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.staticILM
	t.staticILM = slices.Clone(ilm)
	if err := t.writeILMLocked(); err != nil {
		t.staticILM = old
		return err
	}
	return nil
}

package config

import "slices"

// ForwardsIP reports whether the node forwards transit IP: it has more
// than one link (a router between them), or net.ipv4.ip_forward or
// net.ipv6.conf.all.forwarding is on. A node that does not is a host: IP
// for another address is dropped and counted. Everything that depends on
// whether the node forwards (the forwarding plane taking transit, the
// links' busy-poll default, the XDP plane's default) asks this one rule.
func (c *Config) ForwardsIP() bool {
	return len(c.Links) > 1 || c.Sysctl.IPv4Forward || c.Sysctl.IPv6Forward
}

// SwitchesLabels reports whether a label route carries packets on (swaps
// or pops and forwards) rather than only delivering to the node.
func (c *Config) SwitchesLabels() bool {
	return slices.ContainsFunc(c.LabelRoutes, func(r LabelRoute) bool { return r.Action != LabelPopLocal })
}

// IsForwardingNode reports whether the node carries transit of any kind:
// it forwards IP (ForwardsIP) or switches labels (SwitchesLabels).
func (c *Config) IsForwardingNode() bool {
	return c.ForwardsIP() || c.SwitchesLabels()
}

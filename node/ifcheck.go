package node

import (
	"net"

	"github.com/mplsnode/mplsnode/config"
)

// CheckInterfaces checks cfg against the interfaces of the host's network
// namespace, reading them only (no socket is opened): an afpacket link's
// `mtu N` may not exceed its interface's MTU, since the kernel drops
// frames longer than the device takes. Links whose interface does not
// exist are skipped (New reports those when it opens them), as are the
// links in skip (replaced by Options.Endpoints). The error is a
// config.ErrorList positioned at the mtu value.
func CheckInterfaces(cfg *config.Config, skip map[string]bool) error {
	var errs config.ErrorList
	for _, l := range cfg.Links {
		if l.Type != config.LinkAFPacket || l.MTU == 0 || skip[l.Name] {
			continue
		}
		ifi, err := net.InterfaceByName(l.Name)
		if err != nil {
			continue
		}
		if int(l.MTU) > ifi.MTU {
			errs = append(errs, l.MTUPos.Errorf(
				"", "link %s: mtu %d is larger than the interface's MTU %d; raise it first (ip link set %s mtu %d) or write mtu %d or less",
				l.Name, l.MTU, ifi.MTU, l.Name, l.MTU, ifi.MTU))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

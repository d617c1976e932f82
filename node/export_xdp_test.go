package node

import (
	"time"

	"github.com/mplsnode/mplsnode/mpls"
)

// SetXDPSyncInterval sets the XDP plane's periodic sync interval for the
// nodes started until restore is called (tests: a long one leaves route
// changes to the FIB notification alone).
func SetXDPSyncInterval(d time.Duration) (restore func()) {
	old := xdpSyncInterval
	xdpSyncInterval = d
	return func() { xdpSyncInterval = old }
}

// SetXDPFIBCapacity sets the XDP program's FIB capacity (prefixes a
// family) for the nodes started until restore is called.
func SetXDPFIBCapacity(n int) (restore func()) {
	old := xdpFIBCapacity
	xdpFIBCapacity = n
	return func() { xdpFIBCapacity = old }
}

// XDPMirroredFIB returns the FIB the XDP plane's last sync mirrored, nil
// without the program (or before its first sync); it waits for a sync
// under way.
func (n *Node) XDPMirroredFIB() *mpls.FIB {
	if n.xdp == nil || n.xdp.prog == nil {
		return nil
	}
	n.xdp.mu.Lock()
	defer n.xdp.mu.Unlock()
	return n.xdp.mirror.Mirrored()
}

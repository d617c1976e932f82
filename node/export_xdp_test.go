package node

import "time"

// SetXDPSyncInterval sets the XDP plane's periodic sync interval for the
// nodes started until restore is called (tests: a long one leaves route
// changes to the FIB notification alone).
func SetXDPSyncInterval(d time.Duration) (restore func()) {
	old := xdpSyncInterval
	xdpSyncInterval = d
	return func() { xdpSyncInterval = old }
}

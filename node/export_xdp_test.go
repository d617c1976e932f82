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

// SetXDPFIBCapacity sets the XDP program's FIB capacity (prefixes a
// family) for the nodes started until restore is called.
func SetXDPFIBCapacity(n int) (restore func()) {
	old := xdpFIBCapacity
	xdpFIBCapacity = n
	return func() { xdpFIBCapacity = old }
}

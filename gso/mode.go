package gso

import "strconv"

// Mode says who segments a TCP stream into MSS-sized packets. It is the one
// definition behind the config word (`set gso endpoint|stack|off`, package
// config) and the link endpoint's option (link/mplsendpoint.Options).
type Mode uint8

// Segmentation modes.
const (
	// ModeEndpoint (the default, the zero value): the MPLS link endpoint
	// advertises host GSO, TCP hands over packets of up to 64 KiB, and the
	// endpoint segments them after pushing the labels, knowing the inner
	// protocol (this package).
	ModeEndpoint Mode = iota
	// ModeStack: gVisor's TCP splits its batches into MSS-sized packets
	// itself (gVisor GSO) and the endpoint pushes labels on each.
	ModeStack
	// ModeOff: no GSO; TCP sends MSS-sized packets one by one.
	ModeOff
)

// String returns the config word: "endpoint", "stack" or "off".
func (m Mode) String() string {
	switch m {
	case ModeEndpoint:
		return "endpoint"
	case ModeStack:
		return "stack"
	case ModeOff:
		return "off"
	}
	return "GSOMode(" + strconv.Itoa(int(m)) + ")"
}

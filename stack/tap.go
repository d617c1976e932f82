package stack

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"

	"github.com/mplsnode/mplsnode/link/tap"
)

// openTAP opens (creating if needed) the TAP device of l and, when l.Bridge
// is set, adds it to that Linux bridge, so labelled frames leave by the
// bridge's other ports (the kernel bridges any ethertype).
func openTAP(l Link) (*tap.Endpoint, error) {
	ep, err := tap.New(tap.Options{Name: l.Name, MTU: l.MTU, Queues: l.Queues, LinkAddress: l.LinkAddress})
	if err != nil {
		return nil, err
	}
	if l.Bridge != "" {
		if err := addToBridge(l.Bridge, l.Name); err != nil {
			ep.Close()
			return nil, err
		}
	}
	return ep, nil
}

// siocBrAddIf is SIOCBRADDIF from linux/sockios.h: add an interface
// (by index) to a bridge.
const siocBrAddIf = 0x89a2

// addToBridge enslaves the interface ifname to the bridge br.
func addToBridge(br, ifname string) error {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return fmt.Errorf("add %s to bridge %s: %w", ifname, br, err)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return &net.OpError{Op: "socket", Net: "bridge", Err: err}
	}
	defer unix.Close(fd)
	req, err := unix.NewIfreq(br)
	if err != nil {
		return fmt.Errorf("bridge name %q: %w", br, err)
	}
	req.SetUint32(uint32(ifi.Index))
	if err := unix.IoctlIfreq(fd, siocBrAddIf, req); err != nil {
		return &net.OpError{Op: "add to bridge " + br, Net: "tap", Addr: tapAddr(ifname),
			Err: fmt.Errorf("%w (does bridge %s exist? create it with: ip link add %s type bridge)", err, br, br)}
	}
	return nil
}

// tapAddr names a TAP device in a net.OpError.
type tapAddr string

func (tapAddr) Network() string  { return "tap" }
func (a tapAddr) String() string { return string(a) }

package lsrrate

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// openPacketSocket opens an AF_PACKET socket bound to dev in the
// namespace at nsPath for frames of protocol (0: none, a send-only
// socket; in network byte order). The socket is bound only after setup has
// set its options, so nothing is queued before a filter is on. Errors
// start with who.
func openPacketSocket(nsPath, dev, who string, protocol uint16, setup func(fd int) error) (int, error) {
	fd := -1
	err := inNamespace(nsPath, func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return fmt.Errorf("%s: %w", who, err)
		}
		s, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%s: socket(AF_PACKET): %w", who, err)
		}
		fd = s
		if err := setup(fd); err != nil {
			return fmt.Errorf("%s: %w", who, err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: protocol, Ifindex: ifi.Index}); err != nil {
			return fmt.Errorf("%s: bind %s: %w", who, dev, err)
		}
		return nil
	})
	if err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		return -1, err
	}
	return fd, nil
}

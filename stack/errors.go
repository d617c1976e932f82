package stack

import (
	"errors"
	"syscall"

	"gvisor.dev/gvisor/pkg/tcpip"
)

// errnoOf maps a netstack error to the errno a kernel socket would report,
// so callers can test errors with errors.Is(err, syscall.ECONNREFUSED) as
// they would with package net. Errors with no errno counterpart keep
// netstack's text.
func errnoOf(err tcpip.Error) error {
	switch err.(type) {
	case *tcpip.ErrConnectionRefused:
		return syscall.ECONNREFUSED
	case *tcpip.ErrConnectionReset:
		return syscall.ECONNRESET
	case *tcpip.ErrConnectionAborted, *tcpip.ErrAborted:
		return syscall.ECONNABORTED
	case *tcpip.ErrTimeout:
		return syscall.ETIMEDOUT
	case *tcpip.ErrNetworkUnreachable, *tcpip.ErrNoNet:
		return syscall.ENETUNREACH
	case *tcpip.ErrHostUnreachable:
		return syscall.EHOSTUNREACH
	case *tcpip.ErrHostDown:
		return syscall.EHOSTDOWN
	case *tcpip.ErrPortInUse, *tcpip.ErrDuplicateAddress:
		return syscall.EADDRINUSE
	case *tcpip.ErrBadLocalAddress:
		return syscall.EADDRNOTAVAIL
	case *tcpip.ErrNoPortAvailable:
		return syscall.EAGAIN
	case *tcpip.ErrAlreadyBound:
		return syscall.EINVAL
	case *tcpip.ErrAlreadyConnected:
		return syscall.EISCONN
	case *tcpip.ErrNotConnected:
		return syscall.ENOTCONN
	case *tcpip.ErrMessageTooLong:
		return syscall.EMSGSIZE
	case *tcpip.ErrNoBufferSpace:
		return syscall.ENOBUFS
	case *tcpip.ErrNotPermitted:
		return syscall.EPERM
	case *tcpip.ErrAddressFamilyNotSupported:
		return syscall.EAFNOSUPPORT
	case *tcpip.ErrInvalidEndpointState, *tcpip.ErrInvalidOptionValue:
		return syscall.EINVAL
	}
	return errors.New(err.String())
}

package lowerlink

import (
	"errors"
	"net"
)

// Addr is the net.Addr of the interface a lower link opens; it appears in
// the *net.OpError values the link's New returns.
type Addr struct {
	// Net is the kind of link: "packet" (AF_PACKET), "tap", "xdp".
	Net string
	// Interface is the interface's name.
	Interface string
}

// Network implements net.Addr.
func (a Addr) Network() string { return a.Net }

// String implements net.Addr.
func (a Addr) String() string { return a.Interface }

// hintError adds a remedy to an error without hiding it from errors.Is.
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() + " (" + e.hint + ")" }
func (e *hintError) Unwrap() error { return e.err }

// Remedy is the hint for an error that is Err (errors.Is): what to do
// about it, for the message of the error a lower link's New returns.
type Remedy struct {
	Err  error
	Hint string
}

// OpenError is the error a lower link's New returns when opening interface
// ifname as a link of kind network fails with err: a *net.OpError with Op
// "open" and an Addr. The hint of the first remedy whose Err err is
// (errors.Is) is added to the message; errors.Is and errors.As still find
// err.
func OpenError(network, ifname string, err error, remedies ...Remedy) error {
	for _, r := range remedies {
		if errors.Is(err, r.Err) {
			err = &hintError{err, r.Hint}
			break
		}
	}
	return &net.OpError{Op: "open", Net: network, Addr: Addr{Net: network, Interface: ifname}, Err: err}
}

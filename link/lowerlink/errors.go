package lowerlink

import "net"

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

// OpenError is the error a lower link's New returns when opening interface
// ifname as a link of kind network fails with err: a *net.OpError with Op
// "open" and an Addr. A non-empty hint names the remedy in the message;
// errors.Is and errors.As still find err.
func OpenError(network, ifname string, err error, hint string) error {
	if hint != "" {
		err = &hintError{err, hint}
	}
	return &net.OpError{Op: "open", Net: network, Addr: Addr{Net: network, Interface: ifname}, Err: err}
}

package netperf

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"syscall"
)

// Stock netperf's client port range for TCP_CRR and TCP_CC
// (client_port_min and client_port_max in nettest_omni.c and
// nettest_bsd.c), changed with the test-specific -p min,max.
const (
	DefaultClientPortMin = 5000
	DefaultClientPortMax = 65535
)

// PortDialFunc opens a TCP connection from localPort (bound before the
// connect, with SO_REUSEADDR as stock's data sockets).
type PortDialFunc func(ctx context.Context, network, address string, localPort int) (net.Conn, error)

// clientPorts picks the local port of each connection of a TCP_CRR or
// TCP_CC test as stock netperf does (pick_next_port_number): the first is
// a random port in [min, max), each next one the port after it, skipping
// the server's data port, back to min on reaching max.
type clientPorts struct {
	min, max int
	port     int
	started  bool
	// intn returns a random int in [0, n); nil means math/rand/v2.
	intn func(n int) int
}

// next returns the port for the next connection to serverPort.
func (p *clientPorts) next(serverPort int) int {
	if !p.started {
		p.started = true
		p.port = p.min
		if span := p.max - p.min; span > 0 {
			intn := p.intn
			if intn == nil {
				intn = rand.IntN
			}
			p.port += intn(span)
		}
		p.port-- // the increment below comes first, as in stock
	}
	p.port++
	if p.port == serverPort {
		p.port++
	}
	if p.port >= p.max {
		p.port = p.min
	}
	return p.port
}

// transientBindError reports whether err is what stock netperf treats as
// a transient connect failure on a connection test (the port still in use
// or its 4-tuple in TIME_WAIT): it then goes on with the next port.
func transientBindError(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, syscall.EADDRNOTAVAIL)
}

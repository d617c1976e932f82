package stack

import (
	"fmt"
	"net"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
)

// TransportInfo returns what a kernel TCP socket's TCP_INFO, TCP_MAXSEG and
// TCP_CONGESTION tell of a connection on this stack: the segments it
// retransmitted, its MSS and its congestion control algorithm. gVisor
// keeps the negotiated MSS to itself, so mss is the one the route's MTU
// gives (the MTU less the TCP header, the MSS a SYN announces); -1 when
// the route is gone. ok is false for a connection not of this stack.
func (s *Stack) TransportInfo(c net.Conn) (retrans, mss int, cong string, ok bool) {
	tc, isTCP := c.(*TCPConn)
	if !isTCP {
		return 0, 0, "", false
	}
	ep := tc.socketOptions.ep
	retrans, mss = -1, -1
	if st, isStats := ep.Stats().(*tcp.Stats); isStats {
		retrans = int(st.SendErrors.Retransmits.Value())
	}
	var cc tcpip.CongestionControlOption
	if err := ep.GetSockOpt(&cc); err == nil {
		cong = string(cc)
	}
	local, lerr := ep.GetLocalAddress()
	remote, rerr := ep.GetRemoteAddress()
	if lerr == nil && rerr == nil {
		proto := header.IPv4ProtocolNumber
		if remote.Addr.Len() == header.IPv6AddressSize {
			proto = header.IPv6ProtocolNumber
		}
		if r, err := s.ns.FindRoute(0, local.Addr, remote.Addr, proto, false); err == nil {
			mss = int(r.MTU()) - header.TCPMinimumSize
			r.Release()
		}
	}
	return retrans, mss, cong, true
}

// SetCongestionControl sets the connection's TCP congestion control
// algorithm, as TCP_CONGESTION does on a kernel socket: one of the
// stack's ("reno", "cubic").
func (o socketOptions) SetCongestionControl(name string) error {
	cc := tcpip.CongestionControlOption(name)
	if err := o.ep.SetSockOpt(&cc); err != nil {
		return fmt.Errorf("congestion control %q: %s", name, err)
	}
	return nil
}

package stack

import (
	"fmt"

	"gvisor.dev/gvisor/pkg/tcpip"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
)

// TCPOptions are the TCP settings of the stack. The zero value means the
// defaults documented on each field.
type TCPOptions struct {
	// CongestionControl is "cubic" (default: what Linux peers run, so a
	// shared bottleneck is shared fairly) or "reno".
	CongestionControl string

	// DisableSACK turns selective acknowledgements off. SACK is on by
	// default: without it one lost segment costs a whole window of
	// retransmissions, and every Linux peer offers it.
	DisableSACK bool

	// DisableRACK turns RACK-TLP loss detection off (classic three
	// duplicate ACKs only). RACK is on by default: it recovers from tail
	// losses and reordering without waiting for a retransmission timeout,
	// the largest throughput lever under loss.
	DisableRACK bool

	// SendBufferMax and ReceiveBufferMax cap the per-connection buffers in
	// bytes (default 8 MiB each: enough for a 10 Gbit/s flow over a 5 ms
	// path; receive buffers grow towards the cap by auto-tuning).
	SendBufferMax int
	// ReceiveBufferMax: see SendBufferMax.
	ReceiveBufferMax int

	// NoDelay disables Nagle's algorithm on new connections (default off,
	// as with kernel sockets; netperf's -D sets it per socket).
	NoDelay bool
}

// defaultBufferMax is the default cap of the send and receive buffers.
const defaultBufferMax = 8 << 20

// apply sets the options on the stack's TCP protocol.
func (o TCPOptions) apply(s *gstack.Stack) error {
	cc := o.CongestionControl
	if cc == "" {
		cc = "cubic"
	}
	sendMax, recvMax := o.SendBufferMax, o.ReceiveBufferMax
	if sendMax == 0 {
		sendMax = defaultBufferMax
	}
	if recvMax == 0 {
		recvMax = defaultBufferMax
	}
	if sendMax < 4096 || recvMax < 4096 {
		return fmt.Errorf("TCP buffer caps must be at least 4096 bytes, got send %d, receive %d", sendMax, recvMax)
	}
	ccOpt := tcpip.CongestionControlOption(cc)
	sack := tcpip.TCPSACKEnabled(!o.DisableSACK)
	recovery := tcpip.TCPRecovery(0)
	if !o.DisableRACK {
		recovery = tcpip.TCPRACKLossDetection
	}
	delay := tcpip.TCPDelayEnabled(!o.NoDelay)
	// The default sizes start at 1 MiB (or the cap if smaller) so that a
	// fresh connection is not window-limited while auto-tuning ramps up.
	send := tcpip.TCPSendBufferSizeRangeOption{Min: 4096, Default: min(1<<20, sendMax), Max: sendMax}
	recv := tcpip.TCPReceiveBufferSizeRangeOption{Min: 4096, Default: min(1<<20, recvMax), Max: recvMax}
	moderate := tcpip.TCPModerateReceiveBufferOption(true)
	for name, opt := range map[string]tcpip.SettableTransportProtocolOption{
		"congestion control " + cc:   &ccOpt,
		"SACK":                       &sack,
		"RACK":                       &recovery,
		"Nagle":                      &delay,
		"send buffer":                &send,
		"receive buffer":             &recv,
		"receive buffer auto-tuning": &moderate,
	} {
		if err := s.SetTransportProtocolOption(tcp.ProtocolNumber, opt); err != nil {
			return fmt.Errorf("TCP option %s: %s", name, err)
		}
	}
	return nil
}

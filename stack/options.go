package stack

import (
	"fmt"
	"math/bits"

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

	// SendBufferMax caps the per-connection send buffer in bytes (default
	// 8 MiB: enough for a 10 Gbit/s flow over a 5 ms path).
	SendBufferMax int

	// ReceiveBufferMax caps the per-connection receive buffer, and so the
	// window the stack advertises, in bytes; buffers grow towards it by
	// auto-tuning. The default is 8 MiB, bounded by the links the stack
	// opens: ReceiveWindowFlows connections at full window must fit the
	// smallest receive queue of its AF_PACKET links
	// (afpacket.Endpoint.ReceiveCapacity; 512 KiB with the default ring
	// and a 1500-byte MTU). A receiver that advertises more than its link
	// can absorb lets bulk senders fill the queue: frames are lost
	// (lower_rx_overflow, lower_rx_truncated) and every other flow's
	// segments wait behind the standing queue (a TCP_RR against 3
	// TCP_STREAM and 3 TCP_MAERTS fell to a quarter of the kernel's).
	ReceiveBufferMax int

	// NoDelay disables Nagle's algorithm on new connections (default off,
	// as with kernel sockets; netperf's -D sets it per socket).
	NoDelay bool
}

// defaultBufferMax is the default cap of the send and receive buffers.
const defaultBufferMax = 8 << 20

// ReceiveWindowFlows is how many connections receiving at full window the
// default ReceiveBufferMax lets a link's receive queue absorb without loss.
const ReceiveWindowFlows = 4

// minReceiveBufferMax is the smallest default receive cap a link's
// capacity can bring: 64 KiB, a window that needs no scaling.
const minReceiveBufferMax = 64 << 10

// receiveBufferMaxFor returns the default receive buffer cap for links
// whose smallest receive queue holds capacity bytes (0: unknown, no
// bound): capacity over ReceiveWindowFlows, rounded down to a power of two,
// between minReceiveBufferMax and defaultBufferMax.
func receiveBufferMaxFor(capacity int) int {
	if capacity <= 0 {
		return defaultBufferMax
	}
	share := capacity / ReceiveWindowFlows
	if share < minReceiveBufferMax {
		return minReceiveBufferMax
	}
	return min(defaultBufferMax, 1<<(bits.Len(uint(share))-1))
}

// apply sets the options on the stack's TCP protocol. linkCapacity is the
// smallest receive queue of the stack's links in bytes (0: unknown), which
// bounds the default ReceiveBufferMax.
func (o TCPOptions) apply(s *gstack.Stack, linkCapacity int) error {
	cc := o.CongestionControl
	if cc == "" {
		cc = "cubic"
	}
	sendMax, recvMax := o.SendBufferMax, o.ReceiveBufferMax
	if sendMax == 0 {
		sendMax = defaultBufferMax
	}
	if recvMax == 0 {
		recvMax = receiveBufferMaxFor(linkCapacity)
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

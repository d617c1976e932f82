//go:build linux

// Package udp is a gVisor lower link that carries MPLS packets (label stack
// and payload, no Ethernet header) in UDP datagrams over ordinary kernel
// UDP sockets: MPLS-in-UDP, RFC 7510. It needs no privilege (a local port
// of 1024 or more, or CAP_NET_BIND_SERVICE for 6635), and crosses any IP
// network, IPv4 or IPv6.
//
// It owns the sockets, the batching, RFC 7510's rules and the peer filter.
// Towards link/mplsendpoint it is a lower link like link/afpacket
// (docs/CONTRACTS.md, "Lower links"): it takes and delivers whole Ethernet
// frames, so the endpoint's push, pop, GSO and receive paths run unchanged.
// The Ethernet header exists only at that boundary:
//
//   - send: an MPLS frame (ethertype 0x8847) leaves as its bytes after the
//     14-byte Ethernet header, taken in place by the iovecs of the send
//     (no copy). An unlabelled IPv4 or IPv6 frame leaves under its
//     family's explicit null (RFC 4182; label 0 or 2, TTL from the IP
//     header), which the peer pops, so plain IP (ICMP errors, pings of the
//     link's addresses) crosses too. Multicast and broadcast IP is not
//     sent (tx_not_unicast): the link has one peer.
//   - receive: each datagram's payload is copied once behind a 14-byte
//     Ethernet header (destination the link's address, source the
//     peer's, ethertype 0x8847) into a pooled buffer and delivered.
//   - neighbours: the link is point to point, so every neighbour is the
//     peer. It answers the stack's ARP requests and NDP neighbour
//     solicitations itself with the peer's (made-up) link address, and
//     sends neither; duplicate address detection (a solicitation from the
//     unspecified address) gets no answer and succeeds.
//
// RFC 7510 rules: the destination port is the remote's (6635 by default);
// the source port is picked per packet from a fixed set of sockets bound
// to ports in the configured range (49152-65535 by default) by the inner
// flow's hash (FlowHash: the entropy label, else the inner 5-tuple), so a
// flow keeps its port and different flows spread over Options.Flows ports;
// the UDP checksum is computed by default over IPv4 and always over IPv6
// (RFC 7510 §3 lets an IPv4 encapsulator send zero, Options.ZeroChecksum;
// RFC 6935/6936's conditions for zero over IPv6 are not assumed); the outer
// TTL and DSCP are Options.TTL and Options.DSCP (0: the kernel's default
// TTL, DSCP 0); MTU() is Options.MTU, the largest outer IP packet, less
// the outer IP and UDP headers and one label stack entry held back for the
// explicit null, so every frame the endpoint sends within MTU fits.
//
// Peers: only datagrams whose source address is the remote's address are
// taken (any source port: the peer's is entropy); others are dropped as
// rx_unknown_peer. Datagrams shorter than a label stack entry
// (rx_truncated) or longer than the link carries (rx_oversized) are
// dropped. Every drop has a named counter (Stats).
//
// Batching: a TCP GSO packet is segmented after the label push by
// link/mplsendpoint, straight into one of the link's transmit queues
// (lowerlink.TXRing, ring.go: a plain buffer, no packet buffer per
// segment, taken in place by the send's iovecs), and the segments it
// hands over together leave as one
// UDP GSO send (UDP_SEGMENT: the kernel cuts one buffer into datagrams of
// one size) per run of up to 64 equal-sized segments of one flow, several
// runs in one sendmmsg; without UDP GSO (an older kernel, or
// ZeroChecksum, which Linux refuses to segment) each segment is its own
// datagram, still one sendmmsg a batch. Receive reads with recvmmsg and,
// with UDP_GRO, coalesced datagrams of one flow per buffer (each copied
// once behind its Ethernet header: segments sharing one buffer would make
// every header pull-up above copy the whole buffer); the packets of one
// recvmmsg are delivered and then EndBatch is called, so the host's GRO
// and the label switch's batched writes work as on packet rings, and the
// MPLS endpoint can merge a read's segments back into one labelled TCP
// packet for a forwarder that takes them whole (link/mplsendpoint's
// GSOForwarder).
package udp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/mplsnode/mplsnode/link/lowerlink"
)

// Defaults and bounds of Options.
const (
	// DefaultMTU is the default largest outer IP packet.
	DefaultMTU = 1500
	// MinMTU is the smallest Options.MTU: IPv6's minimum link MTU (RFC
	// 8200 §5), which leaves room for IPv4 and IPv6 inside.
	MinMTU = 1280
	// MaxMTU is the largest Options.MTU: a UDP datagram's limit.
	MaxMTU = 65535
	// DefaultFlows is the default number of source ports (sockets).
	DefaultFlows = 16
	// MaxFlows bounds Options.Flows.
	MaxFlows = 256
	// DefaultRecvBatch is the most reads (datagrams, or coalesced
	// buffers with UDP GRO) of one recvmmsg.
	DefaultRecvBatch = 16
)

// maxGSOSegments is the most datagrams one UDP GSO send holds (the
// kernel's UDP_MAX_SEGMENTS is at least 64).
const maxGSOSegments = 64

// maxGSOBytes bounds the bytes of one UDP GSO send: the payload of one
// UDP datagram over IPv6 (65535 less the UDP header), less room for the
// IPv4 header.
const maxGSOBytes = 65535 - udpHeaderLen - ipv4HeaderLen

// rxBufSize is the receive buffer of one read: a whole coalesced read
// (UDP GRO hands up to 64 KiB) or one datagram of any size.
const rxBufSize = 1 << 16

// Options configures New.
type Options struct {
	// Local is the address and port the link receives on (the port
	// RFC 7510 peers send to: DefaultPort). The address may be
	// unspecified (any address of its family); its family must be the
	// remote's.
	Local netip.AddrPort
	// Remote is the peer's address and port. Only datagrams from its
	// address are accepted.
	Remote netip.AddrPort
	// MTU is the largest outer IP packet (the path MTU to the peer);
	// 0 means DefaultMTU.
	MTU uint32
	// SourcePortMin and SourcePortMax bound the source ports; 0, 0 means
	// DefaultSourcePortMin, DefaultSourcePortMax. The range must hold
	// Flows free ports on Local's address.
	SourcePortMin, SourcePortMax uint16
	// Flows is the number of source ports (one connected socket each)
	// that flows are spread over by their hash; 0 means DefaultFlows.
	Flows int
	// ZeroChecksum sends IPv4 datagrams with a zero UDP checksum (RFC 7510
	// §3 allows it over IPv4; Linux then does no UDP GSO). Refused over
	// IPv6.
	ZeroChecksum bool
	// TTL is the outer IPv4 TTL or IPv6 hop limit; 0 means the kernel's
	// default.
	TTL uint8
	// DSCP is the outer header's DSCP (0 to 63).
	DSCP uint8
	// NoGSO turns UDP GSO sends off (one datagram per packet, batched by
	// sendmmsg); NoGRO turns UDP GRO receive off.
	NoGSO, NoGRO bool
	// RecvBatch is the most reads of one recvmmsg; 0 means
	// DefaultRecvBatch.
	RecvBatch int
	// LinkAddress is the link's Ethernet address towards the MPLS
	// endpoint; empty means one made from Local.
	LinkAddress tcpip.LinkAddress
}

// txSock is one source port: a socket bound to it and connected to the
// remote.
type txSock struct {
	conn *net.UDPConn
	rc   syscall.RawConn
	port uint16
}

// Endpoint is the MPLS-in-UDP lower link. Create it with New and give it
// to mplsendpoint.New (or stack.Link with kind LinkUDP). Its MTU (see the
// package doc) is the largest frame payload, label stack and IP packet,
// the link carries: Options.MTU less the outer IP and UDP headers and one
// label stack entry for the explicit null of an unlabelled packet.
type Endpoint struct {
	lowerlink.Lifecycle
	lowerlink.Ethernet

	local, remote netip.AddrPort
	remoteIP      netip.Addr
	v6            bool
	tx            []txSock
	rxConn        *net.UDPConn
	rxRC          syscall.RawConn
	gso           atomic.Bool
	gro           bool
	outerMTU      uint32
	recvBatch     int
	peerAddr      tcpip.LinkAddress

	// closed is closed when Close begins (it stops the neighbour
	// goroutine).
	closed chan struct{}

	// nd holds ARP/NDP answers for the neighbour goroutine to deliver
	// (the stack must not be re-entered from its own WritePackets).
	nd chan *stack.PacketBuffer

	txPool sync.Pool // *txBatch
	txq    [txQueues]txQueue
	rx     rxState
	ctr    counters
}

// New opens the link's sockets. It needs no privilege when Local's port
// and the source ports are 1024 or more.
func New(opts Options) (*Endpoint, error) {
	if !opts.Remote.IsValid() || opts.Remote.Addr().IsUnspecified() || opts.Remote.Port() == 0 {
		return nil, fmt.Errorf("udp link: remote %v: want an address and port such as 172.16.20.21:%d", opts.Remote, DefaultPort)
	}
	if !opts.Local.IsValid() || opts.Local.Port() == 0 {
		return nil, fmt.Errorf("udp link: local %v: want an address and port such as 172.16.20.20:%d", opts.Local, DefaultPort)
	}
	local, remote := unmap(opts.Local), unmap(opts.Remote)
	if local.Addr().Is4() != remote.Addr().Is4() {
		return nil, fmt.Errorf("udp link: local %v and remote %v are of different families", local, remote)
	}
	v6 := remote.Addr().Is6()
	if opts.ZeroChecksum && v6 {
		return nil, errors.New("udp link: a zero UDP checksum is allowed over IPv4 only (RFC 6935/6936 conditions for IPv6 are not assumed)")
	}
	mtu := opts.MTU
	if mtu == 0 {
		mtu = DefaultMTU
	}
	if mtu < MinMTU || mtu > MaxMTU {
		return nil, fmt.Errorf("udp link: mtu %d: want %d to %d", mtu, MinMTU, MaxMTU)
	}
	if opts.DSCP > 63 {
		return nil, fmt.Errorf("udp link: dscp %d: want 0 to 63", opts.DSCP)
	}
	lo, hi := opts.SourcePortMin, opts.SourcePortMax
	if lo == 0 && hi == 0 {
		lo, hi = DefaultSourcePortMin, DefaultSourcePortMax
	}
	if lo == 0 || lo > hi {
		return nil, fmt.Errorf("udp link: source ports %d-%d: want a range such as %d-%d", lo, hi, DefaultSourcePortMin, DefaultSourcePortMax)
	}
	flows := opts.Flows
	if flows == 0 {
		flows = DefaultFlows
	}
	if flows < 1 || flows > MaxFlows || flows > int(hi-lo)+1 {
		return nil, fmt.Errorf("udp link: flows %d: want 1 to %d, and no more than the %d source ports", flows, MaxFlows, int(hi-lo)+1)
	}
	batch := opts.RecvBatch
	if batch <= 0 {
		batch = DefaultRecvBatch
	}
	e := &Endpoint{
		local: local, remote: remote, remoteIP: remote.Addr(), v6: v6,
		gro: !opts.NoGRO, outerMTU: mtu, recvBatch: batch,
		closed: make(chan struct{}),
		nd:     make(chan *stack.PacketBuffer, 64),
	}
	overhead := uint32(ipv4HeaderLen)
	if v6 {
		overhead = ipv6HeaderLen
	}
	e.SetMTU(mtu - overhead - udpHeaderLen - labelEntryLen)
	linkAddr := opts.LinkAddress
	if linkAddr == "" {
		linkAddr = madeUpMAC(local.String())
	}
	e.SetLinkAddress(linkAddr)
	e.peerAddr = madeUpMAC("peer " + remote.String())
	if e.peerAddr == linkAddr {
		e.peerAddr = madeUpMAC("peer 2 " + remote.String())
	}
	network := "udp4"
	if v6 {
		network = "udp6"
	}
	if err := e.openRX(network, opts); err != nil {
		return nil, err
	}
	if err := e.openTX(network, opts, lo, hi, flows); err != nil {
		e.closeSockets()
		return nil, err
	}
	e.gso.Store(!opts.NoGSO && !opts.ZeroChecksum && probeGSO(e.tx[0].rc))
	e.rx.init(e, batch)
	e.Init(func() {
		e.Go(e.rxLoop)
		e.Go(e.ndLoop)
	}, func(bool) {
		close(e.closed)
		e.closeSockets()
	})
	return e, nil
}

// unmap turns an IPv4-mapped IPv6 address into its IPv4 form.
func unmap(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// madeUpMAC returns a locally administered unicast MAC derived from s.
func madeUpMAC(s string) tcpip.LinkAddress {
	h := fnv.New64a()
	h.Write([]byte(s))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], h.Sum64())
	b[0] = b[0]&^1 | 2
	return tcpip.LinkAddress(b[:6])
}

// openRX opens the receive socket on Local.
func (e *Endpoint) openRX(network string, opts Options) error {
	c, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(e.local))
	if err != nil {
		return fmt.Errorf("udp link: listen on %v: %w", e.local, err)
	}
	e.rxConn = c
	// Room for bursts: a coalesced read is up to 64 KiB.
	_ = c.SetReadBuffer(4 << 20)
	rc, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("udp link: %v: %w", e.local, err)
	}
	e.rxRC = rc
	if e.gro {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_GRO, 1)
		}); err != nil || serr != nil {
			e.gro = false // an older kernel: plain reads
		}
	}
	return nil
}

// openTX opens flows sockets bound to source ports in lo..hi (starting at
// a point derived from the link's addresses, so that two links spread)
// and connected to the remote.
func (e *Endpoint) openTX(network string, opts Options, lo, hi uint16, flows int) error {
	span := int(hi-lo) + 1
	h := fnv.New32a()
	h.Write([]byte(e.local.String() + " " + e.remote.String()))
	start := int(h.Sum32() % uint32(span))
	raddr := net.UDPAddrFromAddrPort(e.remote)
	var lastErr error
	for i := 0; i < span && len(e.tx) < flows; i++ {
		port := lo + uint16((start+i)%span)
		laddr := net.UDPAddrFromAddrPort(netip.AddrPortFrom(e.local.Addr(), port))
		c, err := net.DialUDP(network, laddr, raddr)
		if err != nil {
			lastErr = err
			continue
		}
		rc, err := c.SyscallConn()
		if err != nil {
			c.Close()
			return fmt.Errorf("udp link: %v: %w", laddr, err)
		}
		if err := setTXOptions(rc, e.v6, opts); err != nil {
			c.Close()
			return fmt.Errorf("udp link: source port %d: %w", port, err)
		}
		// It receives nothing: peers send to Local. Its send queue holds
		// a few 64 KiB UDP GSO sends.
		_ = c.SetReadBuffer(1)
		_ = c.SetWriteBuffer(1 << 20)
		e.tx = append(e.tx, txSock{conn: c, rc: rc, port: port})
	}
	if len(e.tx) < flows {
		return fmt.Errorf("udp link: only %d of %d source ports in %d-%d free on %v (last error: %v)", len(e.tx), flows, lo, hi, e.local.Addr(), lastErr)
	}
	return nil
}

// setTXOptions sets the outer TTL, DSCP and checksum policy on a socket.
func setTXOptions(rc syscall.RawConn, v6 bool, opts Options) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		s := int(fd)
		tos := int(opts.DSCP) << 2
		if v6 {
			if opts.TTL != 0 {
				if serr = unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_UNICAST_HOPS, int(opts.TTL)); serr != nil {
					return
				}
			}
			if tos != 0 {
				serr = unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_TCLASS, tos)
			}
			return
		}
		if opts.TTL != 0 {
			if serr = unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_TTL, int(opts.TTL)); serr != nil {
				return
			}
		}
		if tos != 0 {
			if serr = unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_TOS, tos); serr != nil {
				return
			}
		}
		if opts.ZeroChecksum {
			serr = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_NO_CHECK, 1)
		}
	})
	if err != nil {
		return err
	}
	return serr
}

// probeGSO reports whether the kernel has UDP GSO (UDP_SEGMENT, Linux
// 4.18).
func probeGSO(rc syscall.RawConn) bool {
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		_, gerr = unix.GetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT)
	}); err != nil {
		return false
	}
	return gerr == nil
}

// Local returns the address and port the link receives on.
func (e *Endpoint) Local() netip.AddrPort {
	return e.rxConn.LocalAddr().(*net.UDPAddr).AddrPort()
}

// Remote returns the peer's address and port.
func (e *Endpoint) Remote() netip.AddrPort { return e.remote }

// SourcePorts returns the source ports the link sends from, in the order
// the flow hash indexes them.
func (e *Endpoint) SourcePorts() []uint16 {
	ps := make([]uint16, len(e.tx))
	for i, s := range e.tx {
		ps[i] = s.port
	}
	return ps
}

// SourcePortFor returns the source port a packet b (label stack and
// payload) leaves from.
func (e *Endpoint) SourcePortFor(b []byte) uint16 {
	return e.tx[FlowHash(b)%uint32(len(e.tx))].port
}

// Stats returns the link's counters.
func (e *Endpoint) Stats() Stats {
	c := &e.ctr
	s := Stats{
		RXDatagrams: c.rxDatagrams.Load(), RXPackets: c.rxPackets.Load(), RXBytes: c.rxBytes.Load(),
		RXCoalesced: c.rxCoalesced.Load(), RXReads: c.rxReads.Load(), RXErrors: c.rxErrors.Load(),
		TXPackets: c.txPackets.Load(), TXBytes: c.txBytes.Load(), TXSegmented: c.txSegmented.Load(),
		TXCalls: c.txCalls.Load(), NeighborAnswers: c.neighborAnswers.Load(),
		GSO: e.gso.Load(), GRO: e.gro,
	}
	for i := range c.drops {
		s.Drops[i] = c.drops[i].Load()
	}
	return s
}

func (e *Endpoint) drop(r DropReason, n uint64) { e.ctr.drops[r].Add(n) }

// Capabilities implements stack.LinkEndpoint: none.
func (*Endpoint) Capabilities() stack.LinkEndpointCapabilities { return 0 }

// PeerLinkAddress returns the made-up Ethernet address the link gives
// the peer (the answer to every ARP and NDP request).
func (e *Endpoint) PeerLinkAddress() tcpip.LinkAddress { return e.peerAddr }

func (e *Endpoint) closeSockets() {
	if e.rxConn != nil {
		e.rxConn.Close()
	}
	for _, s := range e.tx {
		s.conn.Close()
	}
}

// mmsghdr is struct mmsghdr from <sys/socket.h>.
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [4]byte
}

// newFrame returns a packet holding an Ethernet header (dst, src,
// ethertype typ) followed by payload, in one pooled buffer.
func newFrame(dst, src tcpip.LinkAddress, typ tcpip.NetworkProtocolNumber, payload []byte) *stack.PacketBuffer {
	v := buffer.NewViewSize(header.EthernetMinimumSize + len(payload))
	b := v.AsSlice()
	header.Ethernet(b).Encode(&header.EthernetFields{DstAddr: dst, SrcAddr: src, Type: typ})
	copy(b[header.EthernetMinimumSize:], payload)
	return stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithView(v)})
}

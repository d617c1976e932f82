package stack

import (
	"fmt"
	"net/netip"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/mplsnode/mplsnode/internal/enum"
	"github.com/mplsnode/mplsnode/link/afpacket"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/link/pcap"
	udplink "github.com/mplsnode/mplsnode/link/udp"
	"github.com/mplsnode/mplsnode/link/xdp"
)

// LinkKind says what carries a link's Ethernet frames.
type LinkKind int

const (
	// LinkAFPacket attaches to an existing interface (typically a veth)
	// with an AF_PACKET socket. It is the zero value.
	LinkAFPacket LinkKind = iota
	// LinkTAP creates (or attaches to) a TAP device.
	LinkTAP
	// LinkEndpoint uses Link.Endpoint as given (tests, custom links).
	LinkEndpoint
	// LinkXDP attaches to an existing interface (typically a veth) with
	// AF_XDP sockets and an XDP program that hands them every frame.
	LinkXDP
	// LinkUDP carries MPLS packets in UDP datagrams to one peer (RFC
	// 7510, link/udp) over ordinary UDP sockets: no privilege, no
	// interface of its own (Link.UDP).
	LinkUDP
)

var linkKindNames = [...]string{
	LinkAFPacket: "afpacket",
	LinkTAP:      "tap",
	LinkEndpoint: "endpoint",
	LinkXDP:      "xdp",
	LinkUDP:      "udp",
}

// String returns the kind's config word.
func (k LinkKind) String() string { return enum.Format(linkKindNames[:], k, "LinkKind") }

// Link is one interface of the stack.
type Link struct {
	// Name is the interface name: the existing interface for AF_PACKET,
	// the TAP device to create or attach to, or a label for LinkEndpoint.
	Name string
	// Kind says what carries the frames.
	Kind LinkKind
	// Endpoint is the lower endpoint for LinkEndpoint: it must carry whole
	// Ethernet frames (see docs/CONTRACTS.md, "Lower links").
	Endpoint gstack.LinkEndpoint
	// Bridge, for LinkTAP, is a Linux bridge the TAP is added to.
	Bridge string
	// LinkAddress, for LinkTAP, is the MAC of the stack's end of the TAP;
	// empty means a random locally administered one.
	LinkAddress tcpip.LinkAddress
	// MTU overrides the link MTU (the largest L2 payload); 0 keeps the
	// interface's.
	MTU uint32
	// Queues is the number of queues; 0 or 1 means one. LinkTAP: queues
	// of a multi-queue TAP (IFF_MULTI_QUEUE); LinkXDP: the interface's RX
	// queues served, one AF_XDP socket each; LinkAFPacket: sockets in one
	// PACKET_FANOUT hash group, each read by its own goroutine.
	Queues int
	// QdiscBypass, for LinkAFPacket, sends frames past the kernel's qdisc
	// (PACKET_QDISC_BYPASS): faster, but tc shaping on the interface no
	// longer applies to our frames.
	QdiscBypass bool
	// Mode, for LinkAFPacket, is how frames move: packet rings, or
	// recvmmsg/sendmmsg (afpacket.Mode; the zero value is auto).
	Mode afpacket.Mode
	// BusyPoll, for LinkAFPacket in ring mode, spins that long over the
	// busy-polled links' receive rings after a batch before sleeping
	// (afpacket.Options.BusyPoll): lower latency for CPU; 0 is off.
	BusyPoll time.Duration
	// RXRingFrames, for LinkAFPacket in ring mode, is the number of slots
	// of each queue's receive ring (afpacket.Options.RXRingFrames); 0 is
	// afpacket.DefaultRXRingFrames.
	RXRingFrames int
	// BusyPollAdaptive spins BusyPoll only where a frame is likely to come
	// within it (afpacket.Options.BusyPollAdaptive).
	BusyPollAdaptive bool
	// RejectMPLS drops the labelled frames the link receives
	// (net.mpls.conf.DEV.input=0); see mplsendpoint.Options.RejectMPLS.
	RejectMPLS bool
	// DropKernelRX, for LinkAFPacket, keeps the namespace's kernel from
	// processing the frames the interface receives, when the stack owns
	// the interface (the kernel holds no address on it and would only
	// route and drop each IP frame): afpacket.Options.DropKernelRX.
	DropKernelRX bool
	// UDP, for LinkUDP, is the link's sockets and RFC 7510 policy
	// (local and remote address and port, source ports, checksum, outer
	// TTL and DSCP); its MTU is taken from Link.MTU when that is set (the
	// largest outer IP packet; 0: link/udp's DefaultMTU).
	UDP udplink.Options
	// Capture, if set, records every frame the link sends or receives, as
	// on the wire, to a pcap file (link/pcap). Several links may share one
	// Writer; the stack does not close it.
	Capture *pcap.Writer
}

// link is one running link.
type link struct {
	Link
	nic      tcpip.NICID
	endpoint *mplsendpoint.Endpoint
	addrs    []netip.Prefix
	// lowerStats reads the drops of the lower link the stack opened (nil
	// for a caller's LinkEndpoint).
	lowerStats func() LowerStats
	// rxCapacity is the bytes one receive queue of the lower link holds
	// (afpacket.Endpoint.ReceiveCapacity); 0 if unknown.
	rxCapacity int
}

// addLink opens the lower link, wraps it in the MPLS endpoint and creates
// its NIC.
func (s *Stack) addLink(id tcpip.NICID, l Link, cfg Config) error {
	if l.Name == "" {
		return fmt.Errorf("link %d has no name", id)
	}
	if _, dup := s.byName[l.Name]; dup {
		return fmt.Errorf("link %q declared twice", l.Name)
	}
	lower, lowerStats, rxCapacity, err := s.openLower(l)
	if err != nil {
		return err
	}
	if l.Capture != nil {
		lower = pcap.NewNamed(lower, l.Capture, l.Name)
	}
	ep, err := mplsendpoint.New(lower, mplsendpoint.Options{
		Tables:         s.tables,
		TTLModel:       cfg.TTLModel,
		PipeTTL:        cfg.PipeTTL,
		CopyTCFromDSCP: cfg.CopyTCFromDSCP,
		GSOMode:        cfg.GSO,
		Forwarder:      cfg.Forwarder,
		IPForwarder:    cfg.IPForwarder,
		Logger:         s.logger.With("link", l.Name),
		Forwarding:     cfg.Forwarding,
		RejectMPLS:     l.RejectMPLS,
		LocalAddress: func(p tcpip.NetworkProtocolNumber, a tcpip.Address) bool {
			return s.ns.CheckLocalAddress(0, p, a) != 0
		},
	})
	if err != nil {
		lower.Close()
		return fmt.Errorf("link %s: %w", l.Name, err)
	}
	if terr := s.ns.CreateNICWithOptions(id, ep, gstack.NICOptions{Name: l.Name}); terr != nil {
		ep.Close()
		return fmt.Errorf("link %s: create NIC: %s", l.Name, terr)
	}
	ln := &link{Link: l, nic: id, endpoint: ep, lowerStats: lowerStats, rxCapacity: rxCapacity}
	s.links = append(s.links, ln)
	s.byName[l.Name] = ln
	return nil
}

// openLower opens the lower link l names, with a function reading its
// counters (nil for an endpoint the embedder brought) and, for an
// afpacket link, its receive capacity in frames.
func (s *Stack) openLower(l Link) (lower gstack.LinkEndpoint, lowerStats func() LowerStats, rxCapacity int, err error) {
	switch l.Kind {
	case LinkAFPacket:
		// GSOFrames: the label switch's coalesced TCP packets (node's
		// GRO) cross the veth as single GSO frames.
		ep, err := afpacket.New(afpacket.Options{Interface: l.Name, MTU: l.MTU, QdiscBypass: l.QdiscBypass, GSOFrames: true,
			Queues: l.Queues, Mode: l.Mode, DropKernelRX: l.DropKernelRX,
			BusyPoll: l.BusyPoll, BusyPollAdaptive: l.BusyPollAdaptive, RXRingFrames: l.RXRingFrames})
		if err != nil {
			return nil, nil, 0, fmt.Errorf("link %s: %w", l.Name, err)
		}
		if l.MTU != 0 {
			ep.SetMTU(l.MTU)
		}
		lower = ep
		rxCapacity = ep.ReceiveCapacity()
		if why := ep.FallbackReason(); why != "" {
			s.logger.Warn("packet rings unavailable; using recvmmsg/sendmmsg", "link", l.Name, "reason", why)
		} else if ep.Mode() == afpacket.ModeRing {
			// The virtio-net socket has no ring: a 64 KiB GSO frame does
			// not fit a slot sized for the MTU.
			s.logger.Debug("packet rings; coalesced GSO frames go out with sendmmsg", "link", l.Name, "queues", ep.Queues())
		}
		lowerStats = func() LowerStats {
			st := ep.Stats()
			return LowerStats{RXOverflow: st.RXDrops, RXTruncated: st.RXTruncated, RXErrors: st.RXErrors, TXQueueFull: st.TXDropped,
				Mode: ep.Mode().String(), Queues: ep.Queues(), RXRingFrames: ep.RXRingFrames(), RXBlocks: st.RXBlocks, TXRingFull: st.TXRingFull,
				BusyPolls: st.BusyPolls, BusyPollHits: st.BusyPollHits, BusyPollTime: st.BusyPollTime}
		}
	case LinkTAP:
		ep, err := openTAP(l)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("link %s: %w", l.Name, err)
		}
		lower = ep
		lowerStats = func() LowerStats {
			st := ep.Stats()
			return LowerStats{RXOverflow: st.RXOverflow, RXTruncated: st.RXTruncated, RXErrors: st.RXErrors + st.RXShort}
		}
	case LinkXDP:
		ep, err := xdp.New(xdp.Options{Interface: l.Name, Queues: l.Queues, MTU: l.MTU})
		if err != nil {
			return nil, nil, 0, fmt.Errorf("link %s: %w", l.Name, err)
		}
		lower = ep
		lowerStats = func() LowerStats {
			st := ep.Stats()
			return LowerStats{RXOverflow: st.RXDrops, RXErrors: st.RXInvalid, TXQueueFull: st.TXDropped + st.TXTooBig,
				RXChecksumPartialForm: st.RXChecksumPartialForm}
		}
	case LinkUDP:
		o := l.UDP
		if l.MTU != 0 {
			o.MTU = l.MTU
		}
		ep, err := udplink.New(o)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("link %s: %w", l.Name, err)
		}
		lower = ep
		lowerStats = func() LowerStats {
			st := ep.Stats()
			drops := make(map[string]uint64, len(udplink.DropReasons()))
			for _, r := range udplink.DropReasons() {
				drops["udp_"+r.String()] = st.Dropped(r)
			}
			return LowerStats{RXErrors: st.RXErrors, Mode: "udp", Drops: drops,
				Counters: map[string]uint64{"udp_tx_gso_sends": st.TXSegmented, "udp_rx_gro_reads": st.RXCoalesced}}
		}
	case LinkEndpoint:
		if l.Endpoint == nil {
			return nil, nil, 0, fmt.Errorf("link %s: kind endpoint needs Link.Endpoint", l.Name)
		}
		lower = l.Endpoint
	default:
		return nil, nil, 0, fmt.Errorf("link %s: unknown kind %v", l.Name, l.Kind)
	}
	return lower, lowerStats, rxCapacity, nil
}

// Endpoint returns the MPLS endpoint of the named link, or nil: embedders
// read its counters (Stats) and tables from it.
func (s *Stack) Endpoint(name string) *mplsendpoint.Endpoint {
	if l, ok := s.byName[name]; ok {
		return l.endpoint
	}
	return nil
}

// LinkNames returns the links' names in the order they were configured,
// to walk their endpoints (Endpoint) for counters.
func (s *Stack) LinkNames() []string {
	names := make([]string, len(s.links))
	for i, l := range s.links {
		names[i] = l.Name
	}
	return names
}

// LinkStats are one link's counters.
type LinkStats struct {
	// Name is the link's name.
	Name string
	// MPLS holds the endpoint's counters: frames, label hits, drops by
	// reason.
	MPLS mplsendpoint.Stats
	// Lower holds the drops of the lower link (the socket or device
	// below the endpoint); zero for a caller's LinkEndpoint.
	Lower LowerStats
}

// LowerStats counts the frames a lower link (AF_PACKET socket, TAP device)
// lost before the MPLS endpoint saw them, or after it let them go.
type LowerStats struct {
	// RXOverflow counts frames the kernel dropped because the socket's
	// receive queue was full: the node did not read fast enough.
	RXOverflow uint64
	// RXTruncated counts frames longer than the receive buffer, dropped.
	RXTruncated uint64
	// RXErrors counts failed receive calls.
	RXErrors uint64
	// TXQueueFull counts frames the device queue refused (ENOBUFS), lost
	// like on a wire.
	TXQueueFull uint64
	// Mode is how the lower link moves frames: "ring" or "mmsg" for
	// AF_PACKET (what runs, after auto chose), "" for others.
	Mode string
	// Queues is the number of AF_PACKET sockets (fanout queues); 0 for
	// others.
	Queues int
	// RXRingFrames is the slots of each queue's receive frame ring
	// (afpacket.Endpoint.RXRingFrames); 0 without one.
	RXRingFrames int
	// RXBlocks counts receive ring blocks read (ring mode): one wakeup,
	// one receive batch each.
	RXBlocks uint64
	// TXRingFull counts sends that found the transmit ring full and waited.
	TXRingFull uint64
	// RXChecksumPartialForm counts frames (AF_XDP links) whose TCP or UDP
	// checksum field held the pseudo-header sum: a veth peer with
	// transmit checksum offload on (`ethtool -K PEER tx off` fixes it).
	// They are verified in full like every frame, so such frames from an
	// offloading peer also count as bad_checksum drops.
	RXChecksumPartialForm uint64
	// BusyPolls counts the busy polls the link's goroutines ran
	// (Link.BusyPoll), BusyPollHits the link's receive batches a busy
	// poll delivered (wake-ups saved; the spinner may be another link's
	// goroutine), BusyPollTime the time the link's goroutines spun: its
	// CPU cost.
	BusyPolls, BusyPollHits uint64
	BusyPollTime            time.Duration
	// Drops holds the named drop counters of a lower link that keeps its
	// own (a udp link: "udp_" and link/udp's DropReason names, such as
	// udp_rx_unknown_peer); nil for others.
	Drops map[string]uint64
	// Counters holds other named counters of such a link (a udp link:
	// udp_tx_gso_sends, the UDP GSO sends; udp_rx_gro_reads, the reads
	// that held several coalesced datagrams).
	Counters map[string]uint64
}

// Package mplsendpoint owns the gVisor link endpoint that makes a netstack
// speak MPLS over Ethernet: it replaces gVisor's ethernet endpoint on top of
// a lower link carrying whole Ethernet frames (link/afpacket, link/tap, or
// gVisor's channel and pipe endpoints in tests).
//
// Egress: a packet the stack routes to the Endpoint itself (a connected
// subnet) leaves as plain Ethernet, like any NIC. The stack's routes live
// in a FIB (mpls.FIB; package stack): everything beyond the connected
// subnets goes to a FIBEndpoint, which picks the route's hop per flow,
// resolves the hop's MAC address on the hop's link and hands the packet to
// that link's Endpoint with the hop's labels; the FIB is the one table
// that says which labels a packet gets. The Ethernet header and the label
// stack are written in one LinkHeader().Push (ethertype 0x8847, S bit on
// the last entry, TTL and TC per Options), and TCP GSO packets are
// segmented in software after the push, with the inner protocol and
// offsets recorded by the stack (never guessed).
//
// Ingress: ARP, IPv4 and IPv6 frames go up unchanged, except that unicast
// IP is first offered to Options.IPForwarder (the forwarding plane), which
// takes transit packets. MPLS frames are parsed and their top label looked
// up in the ILM: local labels and explicit nulls are popped and the payload
// delivered to the stack as IPv4/IPv6 (or offered to the IPForwarder);
// forwarding entries go to Options.Forwarder, the node's label switch.
//
// MTU: MTU() reports the link MTU minus the label overhead of the deepest
// label stack in the current FIB, so gVisor fragments non-TCP traffic and
// TCP picks an MSS that fits every labelled route (plain routes pay the same
// reduction; see Endpoint.MTU).
//
// Every discard increments a counter named for its reason (Stats) and logs a
// rate-limited warning naming the reason and the remedy.
package mplsendpoint

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/mplsnode/mplsnode/gso"
	"github.com/mplsnode/mplsnode/internal/drops"
	"github.com/mplsnode/mplsnode/link/lowerlink"
	"github.com/mplsnode/mplsnode/mpls"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/nested"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

var (
	_ stack.LinkEndpoint      = (*Endpoint)(nil)
	_ stack.GSOEndpoint       = (*Endpoint)(nil)
	_ stack.NetworkDispatcher = (*Endpoint)(nil)
)

// Ethertypes this endpoint handles beyond gVisor's header package.
const (
	// EthertypeMPLSUnicast is the MPLS unicast ethertype (RFC 3032 §5).
	EthertypeMPLSUnicast tcpip.NetworkProtocolNumber = 0x8847
	// EthertypeMPLSMulticast is the MPLS multicast ethertype (RFC 5332);
	// frames with it are dropped (DropUnsupportedEthertype).
	EthertypeMPLSMulticast tcpip.NetworkProtocolNumber = 0x8848
)

// GSOMode selects who segments TCP: the one definition in package gso,
// shared with the config language.
type GSOMode = gso.Mode

// GSO modes.
const (
	// GSOEndpoint (the default): the endpoint advertises host GSO, TCP hands
	// over packets of up to 64 KiB with a partial checksum, and the endpoint
	// segments them after the label push (package gso).
	GSOEndpoint = gso.ModeEndpoint
	// GSOStack: the endpoint advertises gVisor GSO; gVisor's TCP splits
	// its batches into MSS-sized packets itself and the endpoint pushes
	// labels on each.
	GSOStack = gso.ModeStack
	// GSOOff: no GSO; TCP sends MSS-sized packets one by one.
	GSOOff = gso.ModeOff
)

// gsoMaxSize is the largest GSO packet TCP may hand over in GSOEndpoint
// mode: 64 KiB, the IPv4 total length limit, as Linux's TSO.
const gsoMaxSize = stack.GVisorGSOMaxSize

// Forwarder is the node's label switch. The endpoint calls Forward for a
// labelled frame whose top label (after popping any local labels and
// explicit nulls above it) has a forwarding ILM entry (ILMSwap or
// ILMPopForward).
type Forwarder interface {
	// Forward handles one frame. req and its slices are valid only during
	// the call; pkt is owned by the caller (IncRef it to keep it).
	Forward(in *Endpoint, req *ForwardRequest)
}

// ForwardRequest describes a labelled frame to forward.
type ForwardRequest struct {
	// Packet holds the whole frame in Packet.Data() (Ethernet header,
	// labels, payload); no header has been consumed.
	Packet *stack.PacketBuffer
	// Frame is Packet's bytes from the Ethernet header through the end of
	// the label stack, contiguous (the payload follows in Packet.Data()).
	Frame []byte
	// Labels is the received label stack, outermost first.
	Labels []mpls.Entry
	// Top is the index in Labels of the entry that matched Entry; the
	// entries above it were local labels or explicit nulls, popped.
	Top int
	// Entry is the matched ILM entry; nil when every label is popped here
	// but the label TTL runs out on a packet for another host (the
	// forwarder sends the time exceeded).
	Entry *mpls.ILMEntry
	// ILM is the table Entry came from: the forwarder decides the frame
	// on the same snapshot.
	ILM *mpls.ILM
	// Batched says the lower link ends every receive batch with EndBatch,
	// which the endpoint passes on to a BatchForwarder: the forwarder may
	// hold the frames it builds and write them together then.
	Batched bool
	// GSOMSS, when not 0, says Packet is a labelled TCP packet that the
	// endpoint merged from several received frames (lgro.go), given to a
	// GSOForwarder's ForwardGSO: it stands for segments of at most GSOMSS
	// payload bytes, each of which fitted the ingress link, under the
	// frame's link header and labels; every segment's checksums verified,
	// the TCP checksum field is the first segment's (the forwarder writes
	// it anew), the IP length fields are the whole packet's. Forward never
	// sees it set.
	GSOMSS int
}

// IPForwarder is the forwarding plane's entry for IP packets: the endpoint
// offers it every unicast IP packet it receives (plain, or popped from a
// local label) before the stack sees it, and the forwarder takes those that
// are not for this node (transit) and forwards them itself, so that
// transit never enters gVisor's IP forwarding.
type IPForwarder interface {
	// ForwardIP reports whether it took the packet; false hands it to the
	// stack (it is for this node, or not forwardable). req and its packet
	// are valid only during the call; the packet is owned by the caller.
	ForwardIP(in *Endpoint, req *IPForwardRequest) bool
}

// IPForwardRequest describes a received IP packet offered to an
// IPForwarder.
type IPForwardRequest struct {
	// Packet holds the IP packet in Packet.Data() (link header consumed).
	// Its checksums were verified, or finished when the lower link left
	// them partial (Options.Forwarding), and it is no larger than MTU(),
	// unless GSOMSS says otherwise.
	Packet *stack.PacketBuffer
	// Proto is IPv4 or IPv6.
	Proto tcpip.NetworkProtocolNumber
	// Batched: as ForwardRequest.Batched.
	Batched bool
	// GSOMSS, when not 0, says Packet is a TCP packet larger than MTU()
	// (a lower link's GSO frame), not a fragment, without IPv6 extension
	// headers, whose TCP checksum was verified or is the kernel's partial
	// one (not finished): it stands for segments of at most GSOMSS
	// payload bytes, each no larger than MTU() or than the smallest MTU()
	// of the node's links (a GSO frame does not tell the segment size its
	// sender chose, so the cut fits every egress). The forwarder sends it
	// whole or cuts it into those segments; one it does not take is split
	// by the endpoint and each segment offered on its own.
	GSOMSS int
}

// BatchForwarder is a Forwarder that writes the frames of a receive batch
// together: after the lower link has delivered a batch (one recvmmsg), the
// endpoint calls EndBatch, and the forwarder writes what it holds.
type BatchForwarder interface {
	Forwarder
	// EndBatch is called after the last frame of a receive batch on in.
	EndBatch(in *Endpoint)
}

// Options configures an Endpoint. The zero value is valid: no tables (plain
// Ethernet), uniform TTL, endpoint GSO, 16 labels at most.
type Options struct {
	// Tables holds the FIB (egress: its label stacks size MTU) and the ILM
	// (ingress: label to action). The caller may replace the tables at any
	// time (Tables' writers, SetILM); the endpoint reads them per packet.
	// nil means empty tables: the endpoint is a plain Ethernet NIC.
	Tables *mpls.Tables
	// TTLModel is the TTL model (RFC 3443) for pushing and popping: uniform
	// (the zero value) copies the IP TTL into the labels and back, pipe
	// uses PipeTTL and leaves the IP TTL alone.
	TTLModel mpls.TTLModel
	// PipeTTL is the label TTL in the pipe model; 0 means
	// mpls.DefaultPipeTTL (255).
	PipeTTL uint8
	// CopyTCFromDSCP sets the traffic class of pushed labels to the top 3
	// bits of the IP DSCP; otherwise TC is 0.
	CopyTCFromDSCP bool
	// GSOMode selects who segments TCP; see GSOMode. Default GSOEndpoint.
	GSOMode GSOMode
	// MaxLabels is the deepest label stack the endpoint pushes or parses;
	// it sizes MaxHeaderLength (14 + 4 x MaxLabels). 0 means
	// mpls.DefaultMaxDepth (16). FIB hops deeper than this are dropped
	// (label_stack_too_deep) rather than overflowing the header room.
	MaxLabels int
	// Logger receives rate-limited drop warnings; nil means slog.Default().
	Logger *slog.Logger
	// Forwarder receives labelled frames with a forwarding ILM entry; nil
	// means such frames are dropped (no_forwarder).
	Forwarder Forwarder
	// IPForwarder, if set, is offered every unicast IP packet received
	// before the stack sees it, and forwards transit packets itself
	// (package forward); nil leaves them to the stack. Set Forwarding too,
	// so that partial checksums are finished and large TCP packets split
	// before it sees them.
	IPForwarder IPForwarder
	// LinkAddress, if set, overrides the lower link's MAC address.
	LinkAddress tcpip.LinkAddress
	// Forwarding says the stack above forwards IP, so received packets
	// may leave again: the endpoint then finishes partial checksums
	// (veth's CHECKSUM_PARTIAL) and segments TCP packets larger than MTU()
	// (a veth peer's GSO frames, which the kernel passes unsegmented) into
	// packets of MTU() bytes, which fit a labelled route too, before
	// delivering them. A host
	// leaves it off: its TCP takes both as they are (the endpoint reports
	// RX checksum offload), which saves a checksum pass and a copy.
	Forwarding bool
	// LocalAddress, with Forwarding, reports whether addr is one of the
	// stack's own addresses. The endpoint then passes an IPv4 packet with
	// TTL 1 for any other unicast destination up with TTL 0, so that the
	// stack drops it, counts it (ExhaustedTTL) and answers ICMP time
	// exceeded, instead of forwarding it with TTL 0: the pinned gVisor
	// checks for TTL 0 before its decrement, not for TTL <= 1 as RFC 1812
	// §5.3.1 asks (google/gvisor#13521). The quoted header in that ICMP
	// then shows TTL 0. nil turns the check off.
	LocalAddress func(proto tcpip.NetworkProtocolNumber, addr tcpip.Address) bool
	// RejectMPLS drops every labelled frame received on the link
	// (mpls_input_disabled), as Linux does on an interface whose
	// net.mpls.conf.DEV.input is 0: a link towards customers, say, that
	// must not inject labels into the core. Sending labelled frames is
	// unaffected.
	RejectMPLS bool
	// DisableGRO turns off receive coalescing on a host (gro.go): the
	// consecutive TCP segments of a flow in one receive batch are then
	// delivered to the stack one by one. Coalescing is off anyway when
	// Forwarding or IPForwarder is set.
	DisableGRO bool
}

// Endpoint is the MPLS-over-Ethernet link endpoint. Create it with New and
// give it to stack.CreateNIC. It implements stack.LinkEndpoint,
// stack.GSOEndpoint and, towards the lower link, stack.NetworkDispatcher.
type Endpoint struct {
	nested.Endpoint

	lower      stack.LinkEndpoint
	ring       lowerlink.TXRing // lower, if it has a transmit ring; else nil
	tables     *mpls.Tables
	ttlModel   mpls.TTLModel
	pipeTTL    uint8
	copyTC     bool
	gsoMode    GSOMode
	maxLabels  int
	log        *slog.Logger
	fwd        Forwarder
	gsoFwd     GSOForwarder // fwd, if it takes merged packets (lgro.go)
	lgro       lgroState
	ipFwd      IPForwarder                                           // Options.IPForwarder
	forwarding bool                                                  // Options.Forwarding
	rejectMPLS bool                                                  // Options.RejectMPLS
	localAddr  func(tcpip.NetworkProtocolNumber, tcpip.Address) bool // Options.LocalAddress
	echo       atomic.Pointer[echoHolder]                            // SetEchoHandler
	// batched is set once the lower link has called EndBatch: from then
	// on it ends every receive batch so (docs/CONTRACTS.md).
	batched atomic.Bool
	// groOn says whether received TCP segments are coalesced (gro.go).
	groOn bool
	gro   rxGRO

	linkAddrMu sync.RWMutex
	linkAddr   tcpip.LinkAddress // override; empty means the lower's

	// mtuCache caches the label overhead of the FIB last seen by MTU(),
	// keyed by the FIB pointer (tables are copy-on-write, so a new pointer
	// means new contents).
	mtuCache atomic.Pointer[mtuCacheEntry]

	scratch sync.Pool // *txScratch
	rxPool  sync.Pool // *rxScratch
	// splitPool holds *splitScratch for receive-side splits.
	splitPool sync.Pool
	// fibNIC is the FIB NIC whose links this endpoint is one of (set by
	// FIBEndpoint.SetLinks): the node's other links bound the size a
	// received GSO frame is cut to (splitMTU).
	fibNIC atomic.Pointer[FIBEndpoint]

	ctr counters
	// frag holds fragments until their datagram's checksum verifies
	// (fragsum.go).
	frag fragTable
}

type mtuCacheEntry struct {
	fib      *mpls.FIB
	overhead uint32
}

// New returns an endpoint on top of lower, which must carry whole Ethernet
// frames (see the "Lower links" contract). Invalid options return an error.
func New(lower stack.LinkEndpoint, opts Options) (*Endpoint, error) {
	if lower == nil {
		return nil, errors.New("mplsendpoint: nil lower endpoint")
	}
	if opts.MaxLabels < 0 {
		return nil, fmt.Errorf("mplsendpoint: MaxLabels %d < 0", opts.MaxLabels)
	}
	maxLabels := opts.MaxLabels
	if maxLabels == 0 {
		maxLabels = mpls.DefaultMaxDepth
	}
	// MaxHeaderLength is a uint16 and the header must leave room for IP.
	const maxSaneLabels = 1024
	if maxLabels > maxSaneLabels {
		return nil, fmt.Errorf("mplsendpoint: MaxLabels %d > %d", maxLabels, maxSaneLabels)
	}
	if opts.TTLModel != mpls.TTLUniform && opts.TTLModel != mpls.TTLPipe {
		return nil, fmt.Errorf("mplsendpoint: unknown TTL model %d", opts.TTLModel)
	}
	if opts.GSOMode > GSOOff {
		return nil, fmt.Errorf("mplsendpoint: unknown GSO mode %d", opts.GSOMode)
	}
	if l := opts.LinkAddress; l != "" && len(l) != header.EthernetAddressSize {
		return nil, fmt.Errorf("mplsendpoint: link address %q is not 6 bytes", l)
	}
	tables := opts.Tables
	if tables == nil {
		tables = &mpls.Tables{}
	}
	lg := opts.Logger
	if lg == nil {
		lg = slog.Default()
	}
	pipeTTL := opts.PipeTTL // 0: mpls.PushTTL's default
	e := &Endpoint{
		lower:      lower,
		localAddr:  opts.LocalAddress,
		tables:     tables,
		ttlModel:   opts.TTLModel,
		pipeTTL:    pipeTTL,
		copyTC:     opts.CopyTCFromDSCP,
		gsoMode:    opts.GSOMode,
		maxLabels:  maxLabels,
		log:        lg,
		fwd:        opts.Forwarder,
		ipFwd:      opts.IPForwarder,
		linkAddr:   opts.LinkAddress,
		forwarding: opts.Forwarding,
		rejectMPLS: opts.RejectMPLS,
	}
	e.ctr.drops = drops.New[DropReason]("mplsendpoint: drop", dropNames[:], remedies[:], lg)
	e.ring, _ = lower.(lowerlink.TXRing)
	e.gsoFwd, _ = opts.Forwarder.(GSOForwarder)
	e.initGRO(!opts.DisableGRO && !opts.Forwarding && opts.IPForwarder == nil)
	e.Endpoint.Init(lower, e)
	return e, nil
}

// Tables returns the tables the endpoint reads (never nil).
func (e *Endpoint) Tables() *mpls.Tables { return e.tables }

// MTU implements stack.LinkEndpoint. It is the link MTU minus the label
// overhead of the deepest label stack in the current FIB: every route then
// fits, labelled or not, at the cost of a few bytes on plain routes. The
// overhead is cached per FIB pointer, so MTU costs two atomic loads unless
// the FIB was just replaced; gVisor reads it per packet (IPv4/IPv6
// fragmentation) and when TCP picks its MSS.
//
// Bulk TCP then fills the link exactly (frames of link MTU + 14 bytes) when
// SACK is off. With SACK on (gVisor's default) gVisor's sender reserves 40
// bytes of TCP options per segment (timestamps and three SACK blocks) and
// data segments carry 12, so frames stay 28 bytes short of the link MTU;
// that is gVisor's choice, not label overhead (TestLargestTCPFrame).
func (e *Endpoint) MTU() uint32 {
	mtu := e.lower.MTU()
	oh := e.labelOverhead()
	if mtu <= oh {
		return 0
	}
	return mtu - oh
}

// LinkMTU returns the lower link's MTU (the L2 payload, labels included).
func (e *Endpoint) LinkMTU() uint32 { return e.lower.MTU() }

// labelOverhead returns 4 x the deepest stack in the current FIB (capped
// at MaxLabels).
func (e *Endpoint) labelOverhead() uint32 {
	fib := e.tables.FIB()
	if c := e.mtuCache.Load(); c != nil && c.fib == fib {
		return c.overhead
	}
	depth := min(fib.MaxLabels(), e.maxLabels)
	c := &mtuCacheEntry{fib: fib, overhead: uint32(depth * mpls.EntryLen)}
	e.mtuCache.Store(c)
	return c.overhead
}

// MaxHeaderLength implements stack.LinkEndpoint: Ethernet plus the deepest
// label stack allowed (Options.MaxLabels), pushed in one piece.
func (e *Endpoint) MaxHeaderLength() uint16 {
	return uint16(header.EthernetMinimumSize+e.maxLabels*mpls.EntryLen) + e.lower.MaxHeaderLength()
}

// LinkAddress implements stack.LinkEndpoint.
func (e *Endpoint) LinkAddress() tcpip.LinkAddress {
	e.linkAddrMu.RLock()
	l := e.linkAddr
	e.linkAddrMu.RUnlock()
	if l != "" {
		return l
	}
	if l := e.lower.LinkAddress(); len(l) != 0 {
		return l
	}
	return header.UnspecifiedEthernetAddress
}

// SetLinkAddress implements stack.LinkEndpoint. It sets the override if
// one was configured, else the lower link's address.
func (e *Endpoint) SetLinkAddress(addr tcpip.LinkAddress) {
	e.linkAddrMu.Lock()
	defer e.linkAddrMu.Unlock()
	if e.linkAddr != "" {
		e.linkAddr = addr
		return
	}
	e.lower.SetLinkAddress(addr)
}

// Capabilities implements stack.LinkEndpoint. Link resolution (ARP/NDP) is
// always required. TX checksum offload is never advertised: once labels are
// pushed no lower link could finish a checksum (it cannot see the inner
// protocol), so the stack or the endpoint computes every checksum. RX
// checksum offload is passed through from the lower link.
func (e *Endpoint) Capabilities() stack.LinkEndpointCapabilities {
	c := e.lower.Capabilities()
	c &^= stack.CapabilityTXChecksumOffload | stack.CapabilityLoopback
	// RX checksums are ours: ingress verifies (or finishes) them before
	// delivery, popped MPLS payloads included, so the stack need not.
	return c | stack.CapabilityResolutionRequired | stack.CapabilityRXChecksumOffload
}

// ARPHardwareType implements stack.LinkEndpoint: Ethernet.
func (e *Endpoint) ARPHardwareType() header.ARPHardwareType {
	return header.ARPHardwareEther
}

// GSOMaxSize implements stack.GSOEndpoint.
func (e *Endpoint) GSOMaxSize() uint32 { return gsoMaxSizeFor(e.gsoMode) }

// SupportedGSO implements stack.GSOEndpoint (supportedGSOFor).
func (e *Endpoint) SupportedGSO() stack.SupportedGSO { return supportedGSOFor(e.gsoMode) }

// gsoMaxSizeFor is the largest GSO packet the stack may hand a link
// endpoint in mode m: none in GSOOff mode.
func gsoMaxSizeFor(m GSOMode) uint32 {
	switch m {
	case GSOEndpoint, GSOStack:
		return gsoMaxSize
	}
	return 0
}

// supportedGSOFor is the GSO a link endpoint in mode m offers the stack:
// HostGSOSupported in GSOEndpoint mode (the endpoint is the "host" that
// segments), GVisorGSOSupported in GSOStack mode, GSONotSupported in
// GSOOff mode.
func supportedGSOFor(m GSOMode) stack.SupportedGSO {
	switch m {
	case GSOEndpoint:
		return stack.HostGSOSupported
	case GSOStack:
		return stack.GVisorGSOSupported
	}
	return stack.GSONotSupported
}

// ParseHeader implements stack.LinkEndpoint. It consumes the Ethernet
// header and, for MPLS frames, the label stack (used for packets written
// with their link header in the payload).
func (e *Endpoint) ParseHeader(pkt *stack.PacketBuffer) bool {
	hdr, ok := pkt.Data().PullUp(header.EthernetMinimumSize)
	if !ok {
		return false
	}
	n := header.EthernetMinimumSize
	if header.Ethernet(hdr).Type() == EthertypeMPLSUnicast {
		rx := e.getRX()
		defer e.putRX(rx)
		// One entry more than the maximum tells "too deep" from "no S bit".
		b, _ := pullUpTo(pkt, header.EthernetMinimumSize+(e.maxLabels+1)*mpls.EntryLen)
		_, ln, err := mpls.ParseStack(b[header.EthernetMinimumSize:], e.maxLabels, rx.labels[:0])
		if err != nil {
			return false
		}
		n += ln
	}
	_, ok = pkt.LinkHeader().Consume(n)
	return ok
}

// pullUpTo returns the first min(n, size) bytes of pkt's data, contiguous.
func pullUpTo(pkt *stack.PacketBuffer, n int) ([]byte, bool) {
	if s := pkt.Data().Size(); s < n {
		n = s
	}
	return pkt.Data().PullUp(n)
}

// Package xdp is the forwarding plane's transit fast path in the kernel:
// the label switch's decisions (swap, swap and push, pop to a label, pop to
// IP) compiled into an XDP program (bpf/lsr.c) that runs on the node's
// links at the earliest point a frame exists, with BPF maps mirrored from
// the ILM, the FIB and the neighbour table.
//
// It owns the program, its maps and its attachments, nothing else: the
// caller (the node) decides which links it runs on and gives it the ILM
// entries as Entry values with their egress link and next hop MAC already
// resolved. It is never required: every frame the program does not carry
// is passed up (XDP_PASS) unchanged to the userspace path, which handles it
// exactly as it would without XDP. The reasons are counted per CPU and
// named like the userspace drop reasons (Counters).
//
// What the program carries: a unicast MPLS frame (ethertype 0x8847, no
// VLAN tag) addressed to the ingress link's MAC whose top label (16 and
// up) has an entry that swaps it for 1 to MaxOutLabels labels or pops it
// and forwards, towards a resolved next hop on an egress link that takes
// redirects, when the new frame fits the egress MTU and the label TTL is
// above 1. The TTL rule is RFC 3032's (outgoing = incoming - 1); the TTL
// model (RFC 3443) is the node's: uniform writes the decremented TTL into
// the label below a popped one, or into the IP header (IPv4 checksum
// updated incrementally, RFC 1624); pipe decrements that label's or IP
// header's own TTL for this hop, and passes the frame up when it is 0 or
// 1. What it passes up: everything else, notably TTL 0/1 (the ICMP time
// exceeded with RFC 4950's label stack is built in userspace), label
// stacks without their bottom within 16 entries (mpls.DefaultMaxDepth;
// cut short, no S bit, too deep, or too deep once a swap pushed its
// labels), label 3 anywhere in the stack, unknown labels, multipath
// labels (ecmp: the flow hash that keeps a flow on one hop is
// userspace's), reserved labels on top or under a popped one, unresolved
// neighbours, frames over the egress MTU (fragmented or answered with
// ICMP in userspace), payloads that are not IP, and popped IP packets
// that are not whole (malformed_ip) or whose IPv4 header checksum does
// not verify (bad_checksum), judged as for IP transit; Ethernet padding
// after a popped IP packet is trimmed.
//
// IP transit: an IPv4 or IPv6 packet to the ingress link's MAC is looked
// up in an LPM trie per family that the caller fills from the FIB, the
// connected subnets' resolved hosts and the node's own addresses
// (SyncFIB, Route). A RouteForward entry (one next hop, resolved, egress
// healthy) has the TTL or hop limit decremented (RFC 1812 §5.3.1; IPv4
// checksum incrementally), optionally up to MaxOutLabels labels pushed
// (the LER role: label TTL from the decremented IP TTL, or the entry's
// own for the pipe model and `ttl N` routes; S on the last), Ethernet
// padding trimmed, and is redirected. Everything else is passed up:
// packets to or from the node's addresses, martian sources, ranges never
// forwarded, TTL 1, IPv4 headers whose checksum does not verify, length
// fields that contradict the packet, no route, packets over the route's
// MTU, ECMP routes (the flow hash stays userspace's, so a flow keeps its
// hop), TCP/UDP segments whose checksum field holds Linux's partial form
// (a veth peer with TX checksum offload: the redirect would lose the note
// that the sum is unfinished). Every prefix the program does not carry is a marker
// entry in the trie, never a gap, so no packet is forwarded by a shorter
// prefix than userspace would choose; a family over FIBCapacity routes
// (16,777,216) is not carried at all. SyncFIB writes only what changed,
// in batches, ordered so that no packet meets a mix of the old table and
// the new one.
//
// Map updates are per entry: a BPF hash map update replaces the whole
// value at once, so a frame sees either the old entry or the new one,
// never half of each (Sync writes new and changed entries, then deletes
// the removed ones). Links are attached with BPF links (XDP_FLAGS_DRV_MODE
// on veth): when the process exits, however it exits, the kernel detaches
// the program and the interface is as it was.
//
// Veth: a frame redirected into a veth is received by its peer, which must
// run NAPI for that (an XDP program on the peer, or GRO enabled on it:
// `ethtool -K PEER gro on`); otherwise the kernel drops it and counts it
// in the veth's xdp_xmit errors. Egress links are therefore marked healthy
// by the caller (SetEgressOK), and frames for an unhealthy one are passed
// up to userspace (egress_down).
package xdp

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/mplsnode/mplsnode/internal/enum"
	"github.com/mplsnode/mplsnode/mpls"
	"golang.org/x/sys/unix"
)

// MaxOutLabels is the deepest label stack a swap may put on in the
// program; deeper swaps are left to userspace.
const MaxOutLabels = 4

// Program actions and entry flags; they mirror bpf/lsr.c.
const (
	actionSwap       = 1
	actionPopForward = 2
	actionECMP       = 3

	flagResolved = 1
	flagEgressOK = 2

	ingressMPLS = 1
)

// Reason indexes the program's per-CPU counters; they mirror bpf/lsr.c's
// enum reason.
type Reason uint32

// The program's counters: three for the frames it redirected, the rest for
// the frames it passed up (or, for DropInternal, dropped) and why.
const (
	Swapped Reason = iota
	PoppedLabelled
	PoppedIP
	PassNotMPLS
	PassNotForUs
	PassTruncated
	PassReservedLabel
	PassNoILMEntry
	PassTTLExpired
	PassNoNeighbor
	PassEgressDown
	PassMTUExceeded
	PassUnknownPayload
	PassAdjustFailed
	DropInternal
	IPForwarded
	IPPushed
	PassLocal
	PassNotTransit
	PassMartianSource
	PassNoRoute
	PassECMP
	PassFIBNotCarried
	PassChecksumPartial
	PassMultiBuffer
	PassNoBottomOfStack
	PassLabelStackTooDeep
	PassImplicitNull
	PassBadChecksum
	PassMalformedIP
	numReasons
)

var reasonNames = [numReasons]string{
	Swapped:               "swapped",
	PoppedLabelled:        "popped_labelled",
	PoppedIP:              "popped_ip",
	PassNotMPLS:           "not_mpls",
	PassNotForUs:          "not_for_us",
	PassTruncated:         "truncated_label_stack",
	PassReservedLabel:     "reserved_label",
	PassNoILMEntry:        "no_ilm_entry",
	PassTTLExpired:        "ttl_expired",
	PassNoNeighbor:        "no_neighbor",
	PassEgressDown:        "egress_down",
	PassMTUExceeded:       "mtu_exceeded",
	PassUnknownPayload:    "unknown_payload",
	PassAdjustFailed:      "adjust_failed",
	DropInternal:          "internal_error",
	IPForwarded:           "ip_forwarded",
	IPPushed:              "pushed",
	PassLocal:             "local",
	PassNotTransit:        "not_transit",
	PassMartianSource:     "martian_source",
	PassNoRoute:           "no_route",
	PassECMP:              "ecmp",
	PassFIBNotCarried:     "fib_not_carried",
	PassChecksumPartial:   "checksum_partial",
	PassMultiBuffer:       "multi_buffer",
	PassNoBottomOfStack:   "no_bottom_of_stack",
	PassLabelStackTooDeep: "label_stack_too_deep",
	PassImplicitNull:      "implicit_null_label",
	PassBadChecksum:       "bad_checksum",
	PassMalformedIP:       "malformed_ip",
}

// String returns the counter's name: the userspace drop reason's name for
// the reasons the two paths share (ttl_expired, no_ilm_entry, ...).
func (r Reason) String() string { return enum.Format(reasonNames[:], r, "reason") }

// Redirected reports whether r counts frames the program forwarded itself
// (IPPushed counts some of IPForwarded's frames again).
func (r Reason) Redirected() bool { return r <= PoppedIP || r == IPForwarded || r == IPPushed }

// Reasons returns every reason in counter order.
func Reasons() []Reason { return enum.Range(0, numReasons) }

// Entry is one ILM entry as the program carries it.
type Entry struct {
	// Label is the incoming top label (16 and up).
	Label mpls.Label
	// Action is mpls.ILMSwap or mpls.ILMPopForward, or mpls.ILMMultipath:
	// the program passes the label's frames up (counted as ecmp), since
	// the flow hash that keeps a flow on one hop is userspace's; Egress
	// and NextHopMAC are then unused. Other actions are not carried (Sync
	// skips them: userspace handles those labels, no_ilm_entry).
	Action mpls.ILMAction
	// OutLabels replaces Label for a swap, outermost first.
	OutLabels []mpls.Label
	// Payload binds the payload type under a popped bottom label
	// (mpls.PayloadNone: the version nibble decides, as userspace does).
	Payload mpls.Payload
	// Egress is the egress link's interface index; it must be attached.
	Egress int
	// NextHopMAC is the next hop's MAC address; nil while unresolved
	// (frames are passed up, and userspace resolves it).
	NextHopMAC net.HardwareAddr
}

// Link is a link the program runs on: it takes the link's labelled frames
// and may redirect frames to it.
type Link struct {
	// Name is the interface name, for errors and logs.
	Name string
	// Index is the interface index in the node's network namespace.
	Index int
	// MAC is the link's own address: frames to any other are passed up.
	MAC net.HardwareAddr
	// MTU is the link MTU: redirected frames never exceed it.
	MTU uint32
	// Ingress says labelled frames received on the link may be switched
	// by the program; false (net.mpls.conf.DEV.input=0) passes them all up
	// (IP frames are forwarded per the FIB either way).
	Ingress bool
}

type attached struct {
	Link
	xdp      link.Link
	egressOK bool
}

// egressMACs returns the source and destination MACs and the flags a map
// value for an egress on a carries, for a next hop whose MAC is
// nextHopMAC (resolved when it is 6 bytes long).
func (a *attached) egressMACs(nextHopMAC []byte) (src, dst [6]byte, flags uint8) {
	copy(src[:], a.MAC)
	if len(nextHopMAC) == 6 {
		copy(dst[:], nextHopMAC)
		flags |= flagResolved
	}
	if a.egressOK {
		flags |= flagEgressOK
	}
	return src, dst, flags
}

// Program is the loaded XDP label switch. Its methods are safe for
// concurrent use.
type Program struct {
	mu      sync.Mutex
	objs    lsrObjects
	links   map[int]*attached
	entries []Entry // as last given to Sync
	// The FIB maps' contents as the last SyncFIB left them.
	fibIndex  map[fibKey]uint32 // where each prefix's slot is
	fibSlots  []fibSlot
	fibFree   []uint32     // free slots
	fibGen    uint32       // the last SyncFIB
	fibCap    int          // prefixes per family the FIB maps hold
	fibFailed [2]time.Time // when a family's map last refused an entry
	noBatch   bool         // the kernel takes no batched map updates
	// fibTrace, when set (tests), learns each FIB entry written or
	// deleted, in the order the maps see them.
	fibTrace func(k fibKey, v lsrFibValue, deleted bool)
	insns    uint32
}

// Load loads the program and its maps into the kernel with the TTL model
// model. A verifier rejection returns an error that holds the verifier's
// log.
func Load(model mpls.TTLModel) (*Program, error) { return LoadFIB(model, FIBCapacity) }

// LoadFIB is Load with the program's FIB sized for fibCapacity prefixes
// per family (1 or more; see SyncFIB).
func LoadFIB(model mpls.TTLModel, fibCapacity int) (*Program, error) {
	if fibCapacity < 1 || fibCapacity > FIBCapacity {
		return nil, fmt.Errorf("load XDP label switch: FIB capacity %d out of 1..%d", fibCapacity, FIBCapacity)
	}
	p := &Program{links: map[int]*attached{}, fibIndex: map[fibKey]uint32{}, fibCap: fibCapacity}
	spec, err := loadLsr()
	if err != nil {
		return nil, fmt.Errorf("load XDP label switch: %w", err)
	}
	spec.Maps["fib4"].MaxEntries = uint32(fibCapacity)
	spec.Maps["fib6"].MaxEntries = uint32(fibCapacity)
	err = spec.LoadAndAssign(&p.objs, nil)
	if prog := spec.Programs["mplsnode_lsr"]; err != nil && prog != nil && prog.Flags&unix.BPF_F_XDP_HAS_FRAGS != 0 {
		// A kernel before 5.18 knows no multi-buffer XDP: the program
		// then runs single-buffer (a veth's MTU stays at most about a
		// page while it is attached).
		prog.Flags &^= unix.BPF_F_XDP_HAS_FRAGS
		if err2 := spec.LoadAndAssign(&p.objs, nil); err2 == nil {
			err = nil
		}
	}
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("load XDP label switch: %+v", ve)
		}
		return nil, fmt.Errorf("load XDP label switch: %w", err)
	}
	var ttl uint32
	if model == mpls.TTLPipe {
		ttl = 1
	}
	if err := p.objs.Config.Put(uint32(0), lsrSettings{TtlModel: ttl}); err != nil {
		p.objs.Close()
		return nil, fmt.Errorf("XDP label switch: set TTL model: %w", err)
	}
	if info, err := p.objs.MplsnodeLsr.Info(); err == nil {
		p.insns, _ = info.VerifiedInstructions()
	}
	return p, nil
}

// FIBCapacity returns the most prefixes a family's FIB map holds.
func (p *Program) FIBCapacity() int { return p.fibCap }

// VerifiedInstructions returns the number of instructions the verifier
// processed when it loaded the program (0 if the kernel does not say).
func (p *Program) VerifiedInstructions() uint32 { return p.insns }

// Attach runs the program on l in native (driver) mode and makes l an
// egress for redirected frames, not yet healthy (see SetEgressOK).
func (p *Program) Attach(l Link) error { return p.addLink(l, true) }

// addLink enters l in the maps and, with attach, runs the program on it
// (the unit tests run the program with BPF_PROG_TEST_RUN instead).
func (p *Program) addLink(l Link, attach bool) error {
	if len(l.MAC) != 6 {
		return fmt.Errorf("XDP on %s: link address %q is not a 6-byte MAC", l.Name, l.MAC)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.links[l.Index]; ok {
		return fmt.Errorf("XDP on %s: already attached", l.Name)
	}
	key := uint32(l.Index)
	if err := p.objs.Egress.Put(key, key); err != nil {
		return fmt.Errorf("XDP on %s: add to the egress map: %w", l.Name, err)
	}
	v := lsrIngressValue{}
	copy(v.Mac[:], l.MAC)
	if l.Ingress {
		v.Flags = ingressMPLS
	}
	if err := p.objs.Ingress.Put(key, v); err != nil {
		p.objs.Egress.Delete(key)
		return fmt.Errorf("XDP on %s: add to the ingress map: %w", l.Name, err)
	}
	a := &attached{Link: l}
	if attach {
		xl, err := link.AttachXDP(link.XDPOptions{Program: p.objs.MplsnodeLsr, Interface: l.Index, Flags: link.XDPDriverMode})
		if err != nil {
			p.objs.Ingress.Delete(key)
			p.objs.Egress.Delete(key)
			return fmt.Errorf("XDP on %s: attach in native mode: %w", l.Name, err)
		}
		a.xdp = xl
	}
	p.links[l.Index] = a
	return nil
}

// SetEgressOK says whether frames redirected to the link with index
// ifindex arrive (its veth peer runs NAPI): entries towards a link that is
// not OK are passed up to userspace. It rewrites the affected entries.
func (p *Program) SetEgressOK(ifindex int, ok bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, found := p.links[ifindex]
	if !found {
		return fmt.Errorf("XDP: no link with index %d", ifindex)
	}
	if a.egressOK == ok {
		return nil
	}
	a.egressOK = ok
	return errors.Join(p.syncLocked(p.entries, true), p.rewriteEgressLocked(ifindex))
}

// rewriteEgressLocked rewrites the FIB entries towards the link ifindex
// with its new egress state (each entry alone: a packet is redirected or
// passed up, by the old state or the new one).
func (p *Program) rewriteEgressLocked(ifindex int) error {
	a := p.links[ifindex]
	var idx [2][]uint32
	for i := range p.fibSlots {
		s := &p.fibSlots[i]
		if s.gen == 0 || s.v.Kind != uint8(RouteForward) || s.v.Ifindex != uint32(ifindex) {
			continue
		}
		s.v.Flags &^= flagEgressOK
		if a.egressOK {
			s.v.Flags |= flagEgressOK
		}
		f := s.key.family()
		idx[f] = append(idx[f], uint32(i))
	}
	var errs []error
	for f, ks := range idx {
		// Past a refused entry the rest is rewritten by the next
		// SyncFIB (they are marked unknown).
		_, _, err := p.writeFIB(f, ks)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// EgressOK reports what SetEgressOK last said of the link ifindex.
func (p *Program) EgressOK(ifindex int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.links[ifindex]
	return ok && a.egressOK
}

// Sync makes the ILM map hold exactly entries (those the program can
// carry): new and changed entries are written first, each replaced whole,
// then entries no longer present are deleted.
func (p *Program) Sync(entries []Entry) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.syncLocked(entries, false)
}

func (p *Program) syncLocked(entries []Entry, force bool) error {
	old := map[mpls.Label]lsrIlmValue{}
	for _, e := range p.entries {
		if v, ok := p.value(&e); ok {
			old[e.Label] = v
		}
	}
	keep := map[mpls.Label]bool{}
	var errs []error
	for _, e := range entries {
		v, ok := p.value(&e)
		if !ok {
			continue
		}
		keep[e.Label] = true
		if prev, had := old[e.Label]; had && prev == v && !force {
			continue
		}
		if err := p.objs.Ilm.Put(uint32(e.Label), v); err != nil {
			errs = append(errs, fmt.Errorf("XDP ILM label %d: %w", e.Label, err))
		}
	}
	for l := range old {
		if !keep[l] {
			if err := p.objs.Ilm.Delete(uint32(l)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				errs = append(errs, fmt.Errorf("XDP ILM label %d: delete: %w", l, err))
			}
		}
	}
	p.entries = slices.Clone(entries)
	return errors.Join(errs...)
}

// value returns e as the program's map value, or false if the program
// does not carry e.
func (p *Program) value(e *Entry) (lsrIlmValue, bool) {
	var v lsrIlmValue
	if e.Label < 16 || e.Label > mpls.MaxLabel {
		return v, false
	}
	switch e.Action {
	case mpls.ILMSwap:
		if len(e.OutLabels) < 1 || len(e.OutLabels) > MaxOutLabels {
			return v, false
		}
		v.Action = actionSwap
		v.N_out = uint8(len(e.OutLabels))
		for i, l := range e.OutLabels {
			v.Out[i] = uint32(l)
		}
	case mpls.ILMPopForward:
		v.Action = actionPopForward
	case mpls.ILMMultipath:
		v.Action = actionECMP
		return v, true
	default:
		return v, false
	}
	a, ok := p.links[e.Egress]
	if !ok {
		return v, false
	}
	v.Payload = uint8(e.Payload)
	v.Ifindex = uint32(e.Egress)
	v.Mtu = a.MTU
	v.Src, v.Dst, v.Flags = a.egressMACs(e.NextHopMAC)
	return v, true
}

// Counters returns the program's counters summed over CPUs, by reason.
func (p *Program) Counters() ([]uint64, error) {
	out := make([]uint64, numReasons)
	var per []uint64
	for r := range numReasons {
		if err := p.objs.Counters.Lookup(uint32(r), &per); err != nil {
			return nil, fmt.Errorf("XDP counters: %w", err)
		}
		for _, c := range per {
			out[r] += c
		}
	}
	return out, nil
}

// Links returns the names of the links the program runs on.
func (p *Program) Links() []Link {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Link, 0, len(p.links))
	for _, a := range p.links {
		out = append(out, a.Link)
	}
	slices.SortFunc(out, func(a, b Link) int { return a.Index - b.Index })
	return out
}

// Close detaches the program from every link and frees it and its maps.
func (p *Program) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for i, a := range p.links {
		if a.xdp == nil {
			delete(p.links, i)
			continue
		}
		if err := a.xdp.Close(); err != nil {
			errs = append(errs, fmt.Errorf("XDP on %s: detach: %w", a.Name, err))
		}
		delete(p.links, i)
	}
	errs = append(errs, p.objs.Close())
	return errors.Join(errs...)
}

package mplsendpoint

import (
	"encoding/binary"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Receive checksums of fragmented datagrams.
//
// The endpoint advertises CapabilityRXChecksumOffload, so gVisor marks
// every packet from it checksum-validated and its TCP and UDP never check
// a transport checksum. A fragment carries only a piece of the transport
// datagram, so its checksum can be checked only over the whole datagram;
// gVisor reassembles after the endpoint, and the reassembled packet is a
// clone of the first fragment, validated flag included. The endpoint
// therefore checks fragmented datagrams itself: it holds the fragments of
// each datagram addressed to the host (a reference, no copy), sums their
// transport bytes as they come (fragment offsets are multiples of 8
// bytes, so every piece starts on an even byte of the datagram and the
// ones' complement sums of the pieces add up), and when the datagram is
// complete it verifies the transport checksum and hands all its fragments
// up at once, or drops them all (bad_checksum, one count per fragment).
//
// Holding rather than passing fragments on as they come keeps gVisor's
// reassembler in step with the sum: gVisor only ever sees whole, verified,
// non-overlapping fragment sets, in one go, so it completes each on its
// last fragment and never keeps a partial set the next datagram with the
// same identification could mix with (its duplicate-fragment rule keeps
// the old copy of a range; its memory limit evicts partial sets the
// endpoint cannot see). For the same reason every fragment gVisor might
// reject on its own (IPv4 options, IPv6 extension headers before the
// fragment header, a first fragment without the whole upper-layer header)
// is dropped here (unverifiable_checksum) with every fragment of its
// datagram: a set gVisor accepts in part is a set it could complete
// with pieces the endpoint never summed.
//
// Overlapping or duplicate fragments, and final fragments that disagree on
// the length, poison the datagram (RFC 5722; gVisor discards such sets
// too): its held fragments and any that follow until the reassembly
// timeout are dropped (fragment_overlap). A datagram not complete within
// gVisor's reassembly timeout (30 s IPv4, 60 s IPv6), or evicted when the
// table (fragTableSize datagrams, fragMaxHeld bytes) is full, is dropped
// (fragment_timeout, one count per fragment held).

const (
	// fragTableSize bounds the datagrams in reassembly at once.
	fragTableSize = 1024
	// fragMaxPieces bounds the fragments of one datagram (64 KiB in
	// 1280-byte IPv6 packets is 54; in 576-byte IPv4 ones 120).
	fragMaxPieces = 128
	// fragMaxHeld bounds the bytes held, as gVisor's HighFragThreshold.
	fragMaxHeld = 4 << 20
	// fragTimeout4 and fragTimeout6 are gVisor's ipv4 and ipv6
	// ReassembleTimeout.
	fragTimeout4 = 30 * time.Second
	fragTimeout6 = 60 * time.Second
	// fragMaxExtHeaders bounds the IPv6 extension headers walked.
	fragMaxExtHeaders = 8
	// ipv4MaxPayload is gVisor's header.IPv4MaximumPayloadSize bound on a
	// reassembled IPv4 payload.
	ipv4MaxPayload = 65535 - header.IPv4MinimumSize
)

// IPv6 extension header numbers (RFC 8200 §4).
const (
	nhHopByHop uint8 = 0
	nhRouting  uint8 = 43
	nhFragment uint8 = 44
	nhDestOpts uint8 = 60
)

// fragKey identifies a datagram: RFC 791's (src, dst, ID, protocol) for
// IPv4, RFC 8200's (src, dst, ID) for IPv6.
type fragKey struct {
	src, dst [16]byte
	id       uint32
	proto    uint8
	v6       bool
}

// fragPiece is one held fragment: payload bytes [first, end) of the
// fragmentable part.
type fragPiece struct {
	first, end uint32
	pkt        *stack.PacketBuffer
}

// fragEntry is the state of one datagram in reassembly.
type fragEntry struct {
	key  fragKey
	used bool
	// releasing: a goroutine is handing the verified fragments up, the
	// table unlocked; the entry is its own until it frees it.
	releasing bool
	poison    DropReason // numDropReasons: not poisoned
	deadline  int64      // monotonic ns
	n         int
	pieces    [fragMaxPieces]fragPiece
	total     int64  // fragmentable length, -1 until the final fragment
	covered   int64  // bytes of the pieces held
	sum       uint16 // ones' complement sum of the transport bytes held
	held      int    // bytes held (whole packets)
	// Known from the first fragment (offset 0).
	haveFirst bool
	tp        tcpip.TransportProtocolNumber
	l4Start   uint32 // transport offset in the fragmentable part
	udpNoSum  bool   // IPv4 UDP with checksum 0
}

// fragTable is the endpoint's reassembly-checksum state. A lower link with
// several queues delivers from several goroutines, so mu guards it. It is
// not held while a verified datagram's fragments go up (gVisor may answer
// at once, through a lower link that delivers synchronously to a peer that
// answers back): the entry stays in the table, marked releasing, and a
// fragment with the same key that arrives meanwhile is dropped
// (fragment_overlap), so that no other fragment of that key reaches
// gVisor's reassembler among them.
type fragTable struct {
	mu      sync.Mutex
	entries []fragEntry
	index   map[fragKey]int32
	held    int // bytes held in all entries
	nheld   int // fragments held in all entries
	sweep   int // next entry the incremental expiry looks at
	epoch   time.Time
}

func (t *fragTable) init() {
	t.entries = make([]fragEntry, fragTableSize)
	t.index = make(map[fragKey]int32, fragTableSize)
	t.epoch = time.Now()
}

// fragInfo is what one fragment's headers say.
type fragInfo struct {
	key       fragKey
	src, dst  tcpip.Address
	first     uint32 // payload offset in the fragmentable part
	more      bool
	payOff    int // offset of the fragmentable payload in pkt's data
	payLen    int
	badHeader bool // the IP header does not verify
	unverif   bool // gVisor might treat this fragment on its own
	malformed bool // a length gVisor refuses
}

// Fragment kinds (fragmentKind).
const (
	notFragment  = iota
	fragment     // IPv4 fragment, or IPv6 fragment header right after the fixed header
	deepFragment // IPv6 fragment header after other extension headers
)

// fragmentKind tells whether the IP packet in pkt (link header consumed)
// is an IPv4 fragment or an IPv6 packet with a fragment header that is
// not atomic (RFC 6946), right after the fixed header or deeper.
func fragmentKind(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) int {
	switch proto {
	case header.IPv4ProtocolNumber:
		b, ok := pkt.Data().PullUp(header.IPv4MinimumSize)
		if ok && (b[6]&0x3f != 0 || b[7] != 0) { // MF or an offset
			return fragment
		}
	case header.IPv6ProtocolNumber:
		b, ok := pkt.Data().PullUp(header.IPv6MinimumSize)
		if !ok {
			return notFragment
		}
		switch next := b[6]; next {
		case nhFragment:
			f, ok := pkt.Data().PullUp(header.IPv6MinimumSize + header.IPv6FragmentHeaderSize)
			if ok && binary.BigEndian.Uint16(f[42:])&0xfff9 != 0 {
				return fragment
			}
		case nhHopByHop, nhRouting, nhDestOpts:
			end := header.IPv6MinimumSize + int(binary.BigEndian.Uint16(b[4:]))
			if _, _, v := ipv6Transport(pkt, next, end); v == rxFragment {
				return deepFragment
			}
		}
	}
	return notFragment
}

// parseFragment reads the fragment in pkt (fragmentKind fragment) into f. A
// malformed IP header sets f.malformed; a fragment the endpoint does not
// sum sets f.unverif. Ethernet padding is cut off.
func parseFragment(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer, f *fragInfo) {
	*f = fragInfo{}
	if !ipHeaderOK(proto, pkt) {
		f.badHeader = true
		return
	}
	size := pkt.Data().Size()
	if proto == header.IPv6ProtocolNumber && size < header.IPv6MinimumSize+header.IPv6FragmentHeaderSize {
		f.badHeader = true // the payload length cuts the fragment header
		return
	}
	if proto == header.IPv4ProtocolNumber {
		b, _ := pkt.Data().PullUp(header.IPv4MinimumSize)
		ip := header.IPv4(b)
		hl := int(ip.HeaderLength())
		f.src, f.dst = ip.SourceAddress(), ip.DestinationAddress()
		copy(f.key.src[:], b[12:16])
		copy(f.key.dst[:], b[16:20])
		f.key.id = uint32(ip.ID())
		f.key.proto = ip.Protocol()
		f.first = uint32(ip.FragmentOffset())
		f.more = ip.More()
		f.payOff, f.payLen = hl, size-hl
		// Options are processed per fragment by gVisor (and may get one
		// dropped alone); the kernel never sends them on fragments.
		f.unverif = hl != header.IPv4MinimumSize
		if f.payLen == 0 || int(f.first)+f.payLen > ipv4MaxPayload || (f.more && f.payLen%8 != 0) {
			f.malformed = true
		}
		return
	}
	b, _ := pkt.Data().PullUp(header.IPv6MinimumSize + header.IPv6FragmentHeaderSize)
	ip := header.IPv6(b)
	f.src, f.dst = ip.SourceAddress(), ip.DestinationAddress()
	f.key.v6 = true
	copy(f.key.src[:], b[8:24])
	copy(f.key.dst[:], b[24:40])
	fh := b[header.IPv6MinimumSize:]
	f.key.id = binary.BigEndian.Uint32(fh[4:])
	f.first = uint32(binary.BigEndian.Uint16(fh[2:]) &^ 7)
	f.more = fh[3]&1 != 0
	f.payOff = header.IPv6MinimumSize + header.IPv6FragmentHeaderSize
	f.payLen = size - f.payOff
	if f.payLen <= 0 || int(f.first)+f.payLen > 65535-header.IPv6FragmentHeaderSize || (f.more && f.payLen%8 != 0) {
		f.malformed = true
	}
}

// firstFragment reads the transport protocol, its offset in the
// fragmentable part and (IPv4 UDP) the zero checksum from the first
// fragment's payload p (next: the fragment header's next header, or the
// IPv4 protocol). It reports false if the upper-layer header is not whole
// in p, or the chain holds a header gVisor would refuse after a fragment
// header.
func firstFragment(v6 bool, next uint8, p []byte, ent *fragEntry) bool {
	off := 0
	if v6 {
		for i := 0; ; i++ {
			if i == fragMaxExtHeaders {
				return false
			}
			switch next {
			case nhRouting, nhDestOpts:
				if len(p)-off < 8 {
					return false
				}
				n := (int(p[off+1]) + 1) * 8
				if len(p)-off < n {
					return false
				}
				if next == nhRouting && p[off+3] != 0 {
					// Segments left: gVisor drops the datagram (no
					// routing type is supported); nothing to verify.
					ent.tp = 0
					ent.l4Start = uint32(off)
					return true
				}
				next = p[off]
				off += n
				continue
			case nhHopByHop, nhFragment:
				return false
			}
			break
		}
	}
	ent.tp = tcpip.TransportProtocolNumber(next)
	ent.l4Start = uint32(off)
	need := 0
	switch ent.tp {
	case header.TCPProtocolNumber:
		need = header.TCPMinimumSize
	case header.UDPProtocolNumber:
		need = header.UDPMinimumSize
	case header.ICMPv4ProtocolNumber:
		if v6 {
			ent.tp = 0 // not checked by gVisor's IPv6
		} else {
			need = header.ICMPv4MinimumSize
		}
	case header.ICMPv6ProtocolNumber:
		if v6 {
			need = header.ICMPv6MinimumSize
		} else {
			ent.tp = 0
		}
	default:
		ent.tp = 0 // not verified, as for unfragmented packets
	}
	if len(p)-off < need {
		return false
	}
	ent.udpNoSum = !v6 && ent.tp == header.UDPProtocolNumber && p[off+udpChecksumOffset] == 0 && p[off+udpChecksumOffset+1] == 0
	return true
}

// deliverFragment takes a fragment addressed to the host: held until its
// datagram is whole, then handed up with its other fragments if the
// transport checksum verifies, else dropped with them.
func (e *Endpoint) deliverFragment(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	var f fragInfo
	parseFragment(proto, pkt, &f)
	if f.badHeader {
		e.drop(DropBadChecksum, -1, nil) // as for unfragmented packets
		return
	}
	if e.forwarding && e.localAddr != nil && !e.localAddr(proto, f.dst) && !isMulticastOrBroadcast(f.dst) {
		// Transit for gVisor's forwarding: not reassembled here.
		e.up(proto, pkt)
		return
	}
	t := &e.frag
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.entries == nil {
		t.init() // on the first fragment: 2 MiB a link never needs otherwise
	}
	now := int64(time.Since(t.epoch))
	t.expire(e, now, 2)
	i, ok := t.index[f.key]
	if ok && !t.entries[i].releasing && t.entries[i].deadline <= now {
		t.discard(e, int(i), DropFragmentTimeout)
		ok = false
	}
	if !ok {
		n := t.alloc(e)
		if n < 0 {
			e.drop(DropFragmentTimeout, -1, nil) // every entry is being released
			return
		}
		i = int32(n)
		ent := &t.entries[i]
		ent.key, ent.used, ent.poison, ent.total = f.key, true, numDropReasons, -1
		ent.n, ent.covered, ent.sum, ent.held = 0, 0, 0, 0
		ent.haveFirst, ent.tp, ent.l4Start, ent.udpNoSum = false, 0, 0, false
		timeout := fragTimeout4
		if f.key.v6 {
			timeout = fragTimeout6
		}
		ent.deadline = now + int64(timeout)
		t.index[f.key] = i
	}
	ent := &t.entries[i]
	if ent.releasing {
		e.drop(DropFragmentOverlap, -1, nil)
		return
	}
	if ent.poison != numDropReasons {
		e.drop(ent.poison, -1, nil)
		return
	}
	if f.malformed || f.unverif {
		// gVisor would drop this fragment alone and keep the rest.
		t.poison(e, ent, DropUnverifiableChecksum)
		return
	}
	first, end := f.first, f.first+uint32(f.payLen)
	if r := t.place(ent, first, end, f.more); r != numDropReasons {
		t.poison(e, ent, r)
		return
	}
	p, ok := pkt.Data().PullUp(f.payOff + f.payLen)
	if !ok {
		t.poison(e, ent, DropBadChecksum)
		return
	}
	p = p[f.payOff:]
	if first == 0 {
		var next uint8
		if f.key.v6 {
			b, _ := pkt.Data().PullUp(header.IPv6MinimumSize + 1)
			next = b[header.IPv6MinimumSize]
		} else {
			next = f.key.proto
		}
		if !firstFragment(f.key.v6, next, p, ent) {
			t.poison(e, ent, DropUnverifiableChecksum)
			return
		}
		ent.haveFirst = true
		p = p[ent.l4Start:]
	}
	ent.sum = checksum.Combine(ent.sum, checksum.Checksum(p, 0))
	ent.covered += int64(end - first)
	if !f.more {
		ent.total = int64(end)
	}
	if ent.total >= 0 && ent.covered == ent.total {
		t.complete(e, int(i), proto, pkt, &f)
		return
	}
	if ent.n == fragMaxPieces {
		t.poison(e, ent, DropUnverifiableChecksum)
		return
	}
	size := pkt.Data().Size()
	for t.held+size > fragMaxHeld && t.evictOldest(e, int(i)) {
	}
	pkt.IncRef()
	ent.pieces[ent.n] = fragPiece{first: first, end: end, pkt: pkt}
	ent.n++
	ent.held += size
	t.held += size
	t.nheld++
}

// place checks the range [first, end) of a new fragment against the
// datagram's: it returns numDropReasons if it fits, else the reason to
// poison the datagram.
func (t *fragTable) place(ent *fragEntry, first, end uint32, more bool) DropReason {
	if ent.total >= 0 && (int64(end) > ent.total || !more && int64(end) != ent.total) {
		return DropFragmentOverlap // beyond the end, or another end
	}
	for k := 0; k < ent.n; k++ {
		pc := &ent.pieces[k]
		if first < pc.end && pc.first < end {
			return DropFragmentOverlap // overlap or duplicate
		}
		if !more && pc.end > end {
			return DropFragmentOverlap // a piece beyond the new end
		}
	}
	return numDropReasons
}

// complete verifies entry i's datagram, whose last fragment is pkt, and
// hands all its fragments up, or drops them all. t.mu is held; it is
// released while the fragments go up.
func (t *fragTable) complete(e *Endpoint, i int, proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer, f *fragInfo) {
	ent := &t.entries[i]
	if verifyFragmentSum(ent, f.src, f.dst) {
		ent.releasing = true
		t.mu.Unlock()
		for k := 0; k < ent.n; k++ {
			e.ctr.rxDelivered.Add(1)
			e.Endpoint.DeliverNetworkPacket(proto, ent.pieces[k].pkt)
		}
		e.ctr.rxDelivered.Add(1)
		e.Endpoint.DeliverNetworkPacket(proto, pkt)
		t.mu.Lock()
		t.release(i)
		return
	}
	e.dropN(DropBadChecksum, uint64(ent.n+1), -1, nil)
	t.release(i)
}

// verifyFragmentSum reports whether the whole datagram's transport
// checksum verifies.
func verifyFragmentSum(ent *fragEntry, src, dst tcpip.Address) bool {
	l4len := ent.total - int64(ent.l4Start)
	switch ent.tp {
	case header.TCPProtocolNumber, header.UDPProtocolNumber, header.ICMPv6ProtocolNumber:
		if ent.udpNoSum {
			return true // IPv4 UDP without a checksum (RFC 768)
		}
		if l4len > 0xffff {
			return false
		}
		pseudo := header.PseudoHeaderChecksum(ent.tp, src, dst, uint16(l4len))
		return checksum.Combine(pseudo, ent.sum) == 0xffff
	case header.ICMPv4ProtocolNumber:
		return ent.sum == 0xffff
	}
	return true
}

// poison drops the datagram's held fragments and the current one for
// reason r, and every later fragment of it until its deadline.
func (t *fragTable) poison(e *Endpoint, ent *fragEntry, r DropReason) {
	e.dropN(r, uint64(ent.n+1), -1, nil)
	t.unhold(ent)
	ent.poison = r
}

// unhold releases the entry's held fragments.
func (t *fragTable) unhold(ent *fragEntry) {
	for k := 0; k < ent.n; k++ {
		ent.pieces[k].pkt.DecRef()
		ent.pieces[k] = fragPiece{}
	}
	t.held -= ent.held
	t.nheld -= ent.n
	ent.n, ent.held = 0, 0
}

// release frees entry i (its fragments released).
func (t *fragTable) release(i int) {
	ent := &t.entries[i]
	t.unhold(ent)
	delete(t.index, ent.key)
	ent.used, ent.releasing = false, false
}

// discard drops entry i's held fragments for reason r and frees it.
func (t *fragTable) discard(e *Endpoint, i int, r DropReason) {
	if n := t.entries[i].n; n > 0 {
		e.dropN(r, uint64(n), -1, nil)
	}
	t.release(i)
}

// expire frees up to n entries past their deadline, looking at the next n
// entries of the table: over many fragments, every entry is looked at.
func (t *fragTable) expire(e *Endpoint, now int64, n int) {
	for range n {
		i := t.sweep
		t.sweep = (t.sweep + 1) % len(t.entries)
		if t.entries[i].used && !t.entries[i].releasing && t.entries[i].deadline <= now {
			t.discard(e, i, DropFragmentTimeout)
		}
	}
}

// alloc returns a free entry, evicting the one nearest its deadline if
// the table is full; -1 if every entry is being released.
func (t *fragTable) alloc(e *Endpoint) int {
	if len(t.index) < len(t.entries) {
		for k := range t.entries {
			i := (t.sweep + k) % len(t.entries)
			if !t.entries[i].used {
				return i
			}
		}
	}
	oldest := -1
	for i := range t.entries {
		if !t.entries[i].releasing && (oldest < 0 || t.entries[i].deadline < t.entries[oldest].deadline) {
			oldest = i
		}
	}
	if oldest >= 0 {
		t.discard(e, oldest, DropFragmentTimeout)
	}
	return oldest
}

// evictOldest drops the held entry nearest its deadline other than keep,
// to make room; it reports false if there is none.
func (t *fragTable) evictOldest(e *Endpoint, keep int) bool {
	oldest := -1
	for i := range t.entries {
		if i == keep || !t.entries[i].used || t.entries[i].releasing || t.entries[i].n == 0 {
			continue
		}
		if oldest < 0 || t.entries[i].deadline < t.entries[oldest].deadline {
			oldest = i
		}
	}
	if oldest < 0 {
		return false
	}
	t.discard(e, oldest, DropFragmentTimeout)
	return true
}

// heldFragments returns the number of fragments held.
func (t *fragTable) heldFragments() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return uint64(t.nheld)
}

// close releases every held fragment.
func (t *fragTable) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.entries {
		if t.entries[i].used && !t.entries[i].releasing {
			t.release(i)
		}
	}
}

func isMulticastOrBroadcast(a tcpip.Address) bool {
	if a.Len() == header.IPv4AddressSize {
		return header.IsV4MulticastAddress(a) || a == header.IPv4Broadcast
	}
	return header.IsV6MulticastAddress(a)
}

// Close releases the fragments held for checksum verification and closes
// the lower link (stack.LinkEndpoint).
func (e *Endpoint) Close() {
	e.frag.close()
	e.Endpoint.Close()
}

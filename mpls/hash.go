package mpls

import "encoding/binary"

// Flow hashes pick a route's next hop (Group.Select) so that every packet
// of a flow takes the same path (no reordering) while flows spread over
// the hops. The seed varies the hash per node, so that two nodes in a row
// do not make the same choice and leave a path unused (hash
// polarization).

// IP protocol numbers whose first four payload bytes are the ports.
const (
	protoTCP  = 6
	protoUDP  = 17
	protoSCTP = 132
)

// FlowHash returns the hash of the flow of the IP packet in ip (IPv4 or
// IPv6 header first): source and destination addresses, protocol and, for
// TCP, UDP and SCTP outside fragments, the two ports (the 5-tuple, Linux's
// fib_multipath_hash_policy 1). An IPv6 packet whose next header is an
// extension header is hashed on addresses, next header and flow label. A
// packet too short for its header hashes what it has: the result is still
// deterministic. It allocates nothing.
func FlowHash(seed uint32, ip []byte) uint32 {
	h := uint64(seed) | 0x9e3779b9<<32
	if len(ip) == 0 {
		return fold(h)
	}
	switch ip[0] >> 4 {
	case 4:
		if len(ip) < 20 {
			break
		}
		h = mix(h, uint64(binary.BigEndian.Uint32(ip[12:16]))<<32|uint64(binary.BigEndian.Uint32(ip[16:20])))
		proto := ip[9]
		ihl := int(ip[0]&0x0f) * 4
		fragmented := binary.BigEndian.Uint16(ip[6:8])&0x3fff != 0 // MF or an offset
		h = mix(h, uint64(proto))
		if !fragmented && ihl >= 20 && hasPorts(proto) && len(ip) >= ihl+4 {
			h = mix(h, uint64(binary.BigEndian.Uint32(ip[ihl:ihl+4])))
		}
		return fold(h)
	case 6:
		if len(ip) < 40 {
			break
		}
		for i := 8; i < 40; i += 8 {
			h = mix(h, binary.BigEndian.Uint64(ip[i:i+8]))
		}
		next := ip[6]
		h = mix(h, uint64(next))
		if hasPorts(next) && len(ip) >= 44 {
			h = mix(h, uint64(binary.BigEndian.Uint32(ip[40:44])))
		} else {
			h = mix(h, uint64(binary.BigEndian.Uint32(ip[0:4])&0xfffff)) // flow label
		}
		return fold(h)
	}
	for len(ip) >= 8 {
		h = mix(h, binary.BigEndian.Uint64(ip))
		ip = ip[8:]
	}
	for _, b := range ip {
		h = mix(h, uint64(b))
	}
	return fold(h)
}

func hasPorts(proto uint8) bool { return proto == protoTCP || proto == protoUDP || proto == protoSCTP }

// LabelStackHash returns the flow hash of a labelled packet at a label
// switching router, for ECMP on the outgoing side: stack is the received
// label stack (outermost first), payload what follows its bottom entry.
// With an entropy label (RFC 6790 §4.3: the label after an entropy label
// indicator, label 7) the hash is the entropy label's alone, as the
// ingress chose it for the flow. Otherwise it hashes every label value
// and, when the payload starts with an IPv4 or IPv6 version nibble, the
// payload's FlowHash (RFC 6790 §2 calls this looking past the labels). It
// allocates nothing.
func LabelStackHash(seed uint32, stack []Entry, payload []byte) uint32 {
	h := uint64(seed) | 0x7f4a7c15<<32
	for i := range stack {
		if stack[i].Label == LabelEntropyIndicator && i+1 < len(stack) {
			return fold(mix(h, uint64(stack[i+1].Label)))
		}
	}
	for i := range stack {
		h = mix(h, uint64(stack[i].Label))
	}
	if len(payload) > 0 && (payload[0]>>4 == 4 || payload[0]>>4 == 6) {
		h = mix(h, uint64(FlowHash(seed, payload)))
	}
	return fold(h)
}

// mix folds v into h (a multiply-xorshift round, as in wyhash/murmur
// finalizers: every input bit reaches every output bit).
func mix(h, v uint64) uint64 {
	h ^= v
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 31
	h *= 0x94d049bb133111eb
	h ^= h >> 29
	return h
}

func fold(h uint64) uint32 { return uint32(h ^ h>>32) }

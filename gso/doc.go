// Package gso segments one large TCP packet into link-sized segments in
// software, below an arbitrary opaque L2/L2.5 header (Ethernet plus any
// number of MPLS labels).
//
// It exists because once MPLS labels are pushed nobody downstream can tell
// IPv4 from IPv6, so hardware or kernel GSO cannot be trusted with the
// frame; the code that pushes the labels knows the inner protocol and
// segments here instead.
//
// # What the package owns
//
// TCP segmentation (TSO/GSO done in software) for IPv4 and IPv6, and the
// Internet checksum (RFC 1071) it needs. It does no I/O, keeps no state, and
// does not import gVisor.
//
// # Contract
//
// The input, [Packet], is laid out as
//
//	Buf: [prefix: PrefixLen opaque bytes][IP header (+ IPv6 extension headers)][TCP header + options][payload]
//	                                                                          ^ L4Offset
//
// The caller names the inner protocol ([ProtoIPv4] or [ProtoIPv6]) and the
// offsets; the package checks them against the headers and returns an
// [*Error] (wrapping one of the Err* sentinels, for [errors.Is]) for any
// inconsistency, never a panic.
//
// The buffer length is the truth: the payload is everything after the TCP
// header up to len(Buf). The IP length fields of the input (IPv4 total
// length, IPv6 payload length) and its TCP checksum field are ignored, so a
// packet whose TCP checksum holds only the pseudo-header partial sum (as
// gVisor hands over host-GSO packets) or nothing at all is segmented alike.
//
// Each output segment is a copy of the prefix (labels and all, unchanged)
// followed by:
//   - IPv4: the header with total length rewritten, the identification
//     incremented per segment (the first segment keeps the original ID,
//     wrapping at 16 bits) and the header checksum recomputed; options,
//     TTL, DF and the rest copied unchanged.
//   - IPv6: the header with payload length rewritten; extension headers
//     (hop-by-hop, routing, destination options) copied unchanged.
//   - TCP: the header with options copied, the sequence number advanced by
//     the payload bytes before the segment, FIN and PSH kept only on the
//     last segment, CWR kept only on the first, and a full checksum
//     computed from scratch over the pseudo-header, the header and the
//     payload chunk.
//   - the payload chunk: at most MSS bytes; every segment but the last
//     carries exactly MSS bytes.
//
// A packet with at most MSS payload bytes yields one segment, identical to
// the input except for the IP length field, the IPv4 header checksum and the
// TCP checksum. A packet with no payload yields one segment as well.
//
// The IPv6 pseudo-header always uses the destination address of the fixed
// IPv6 header, even when a routing header with segments left is present
// (RFC 8200 section 8.1 asks for the final destination); senders of such
// packets must not rely on this package for the checksum. IPv6 jumbograms
// are not supported. IPv4 and IPv6 fragments, AH and ESP are rejected, as
// are SYN, RST and URG on a packet that needs more than one segment (their
// meaning does not survive splitting).
//
// # Scattered payload
//
// [Cutter] writes the same segments one at a time for a caller whose
// payload is not contiguous (a packet buffer's chained views): it
// validates the headers and payload length as Segment validates the whole
// packet, the caller copies the headers and each payload chunk straight
// into the segment's final buffer (a transmit ring slot), and
// [Cutter.Finish] writes lengths, IDs, sequence numbers, flags and
// checksums. The payload is copied once, by the caller.
//
// # Buffers and allocations
//
// The caller owns every buffer. [Segment] reads p.Buf and never writes it;
// it writes the segments back to back into the caller's dst (which must not
// overlap p.Buf and must hold [SegmentedLen] bytes) and appends one slice of
// dst per segment to the caller's segs. When cap(segs) suffices, Segment
// allocates nothing: zero allocations per packet and per segment in steady
// state, measured by BenchmarkSegment.
package gso

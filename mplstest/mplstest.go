// Package mplstest helps embedders and our own tests build MPLS-over-Ethernet
// frames and fake the pieces around a link/mplsendpoint.Endpoint: labelled
// frames as bytes (Frame), IPv4/IPv6 TCP and UDP packets with valid
// checksums (IPv4TCP, IPv6TCP, IPv4UDP, UDP), a label switch that records
// its calls (Forwarder), a lower link that records or discards what it is
// given (Sink), and the next frame a gVisor channel endpoint was given
// (ReadFrame).
//
// Everything here allocates freely and favours clarity over speed; it is
// for tests, never for the packet path.
package mplstest

import (
	"net/netip"

	"github.com/mplsnode/mplsnode/mpls"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// EthertypeMPLS is the MPLS unicast ethertype (RFC 3032 §5).
const EthertypeMPLS uint16 = 0x8847

// Frame describes one Ethernet frame, optionally labelled.
type Frame struct {
	// Dst and Src are the Ethernet addresses (6 bytes each; shorter values
	// are zero-padded).
	Dst, Src tcpip.LinkAddress
	// Labels is the label stack, outermost first, written as given (the
	// caller sets S; see Stack for the usual case).
	Labels []mpls.Entry
	// EtherType overrides the ethertype. Zero means 0x8847 when Labels is
	// not empty, else IPv4 or IPv6 from the payload's version nibble (0x0800
	// when the payload is empty or neither).
	EtherType uint16
	// Payload follows the label stack (or the Ethernet header).
	Payload []byte
}

// Bytes returns the frame's bytes: Ethernet header, label stack, payload.
// No padding to the 60-byte Ethernet minimum and no FCS are added.
func (f Frame) Bytes() []byte {
	b := make([]byte, header.EthernetMinimumSize+mpls.EntryLen*len(f.Labels), header.EthernetMinimumSize+mpls.EntryLen*len(f.Labels)+len(f.Payload))
	copy(b[0:6], f.Dst)
	copy(b[6:12], f.Src)
	typ := f.EtherType
	if typ == 0 {
		typ = uint16(header.IPv4ProtocolNumber)
		switch {
		case len(f.Labels) > 0:
			typ = EthertypeMPLS
		case len(f.Payload) > 0 && f.Payload[0]>>4 == 6:
			typ = uint16(header.IPv6ProtocolNumber)
		}
	}
	b[12], b[13] = byte(typ>>8), byte(typ)
	for i, e := range f.Labels {
		e.Encode(b[header.EthernetMinimumSize+mpls.EntryLen*i:])
	}
	return append(b, f.Payload...)
}

// Stack returns label stack entries for labels (outermost first), all with
// the given TTL and TC 0, and S set on the last one.
func Stack(ttl uint8, labels ...mpls.Label) []mpls.Entry {
	es := make([]mpls.Entry, len(labels))
	for i, l := range labels {
		es[i] = mpls.Entry{Label: l, TTL: ttl, S: i == len(labels)-1}
	}
	return es
}

// TCP describes a TCP segment inside an IP packet. The zero values of TTL
// and Window are replaced by 64 and 65535.
type TCP struct {
	// Src and Dst are the endpoints; both IPv4 for IPv4TCP, both IPv6 for
	// IPv6TCP.
	Src, Dst netip.AddrPort
	// Seq and Ack are the sequence and acknowledgement numbers.
	Seq, Ack uint32
	// Flags are the TCP flags (header.TCPFlagSyn, ...).
	Flags header.TCPFlags
	// Window is the advertised window; 0 means 65535.
	Window uint16
	// Options are the TCP options, padded with zeros (end of options) to a
	// multiple of 4 bytes.
	Options []byte
	// TTL is the IPv4 TTL or IPv6 hop limit; 0 means 64.
	TTL uint8
	// TOS is the IPv4 TOS or IPv6 traffic class byte.
	TOS uint8
	// ID is the IPv4 identification (unused for IPv6).
	ID uint16
	// DF sets the IPv4 don't-fragment flag (unused for IPv6).
	DF bool
	// Payload is the TCP payload.
	Payload []byte
}

// tcpDefaults are the values the zero TTL and Window stand for.
const (
	defaultTTL    = 64
	defaultWindow = 0xffff
)

func (t *TCP) segment() []byte {
	opts := (len(t.Options) + 3) &^ 3
	hl := header.TCPMinimumSize + opts
	b := make([]byte, hl+len(t.Payload))
	win := t.Window
	if win == 0 {
		win = defaultWindow
	}
	header.TCP(b).Encode(&header.TCPFields{
		SrcPort:    t.Src.Port(),
		DstPort:    t.Dst.Port(),
		SeqNum:     t.Seq,
		AckNum:     t.Ack,
		DataOffset: uint8(hl),
		Flags:      t.Flags,
		WindowSize: win,
	})
	copy(b[header.TCPMinimumSize:], t.Options)
	copy(b[hl:], t.Payload)
	return b
}

func (t *TCP) ttl() uint8 {
	if t.TTL == 0 {
		return defaultTTL
	}
	return t.TTL
}

// IPv4TCP returns an IPv4 packet (20-byte header) carrying the segment t,
// with valid IPv4 and TCP checksums. It panics if t's addresses are not
// IPv4.
func IPv4TCP(t TCP) []byte {
	seg := t.segment()
	ip := ipv4(t.Src.Addr(), t.Dst.Addr(), header.TCPProtocolNumber, t.ttl(), t.TOS, t.ID, t.DF, seg)
	setL4Checksum(ip[header.IPv4MinimumSize:], tcpChecksumOffset, header.TCPProtocolNumber, t.Src.Addr(), t.Dst.Addr())
	return ip
}

// IPv6TCP returns an IPv6 packet (no extension headers) carrying the
// segment t, with a valid TCP checksum. It panics if t's addresses are not
// IPv6.
func IPv6TCP(t TCP) []byte {
	seg := t.segment()
	ip := ipv6(t.Src.Addr(), t.Dst.Addr(), header.TCPProtocolNumber, t.ttl(), t.TOS, seg)
	setL4Checksum(ip[header.IPv6MinimumSize:], tcpChecksumOffset, header.TCPProtocolNumber, t.Src.Addr(), t.Dst.Addr())
	return ip
}

// IPv4UDP returns an IPv4 packet with TTL 64 carrying a UDP datagram from
// src to dst with payload, with valid IPv4 and UDP checksums.
func IPv4UDP(src, dst netip.AddrPort, df bool, payload []byte) []byte {
	return UDP{Src: src, Dst: dst, DF: df, Payload: payload}.IPv4()
}

// UDP describes a UDP datagram inside an IPv4 packet (IPv4 ID 0, TOS 0).
type UDP struct {
	// Src and Dst are the endpoints, both IPv4.
	Src, Dst netip.AddrPort
	// TTL is the IPv4 TTL; 0 means 64.
	TTL uint8
	// DF sets the IPv4 don't-fragment flag.
	DF bool
	// Payload is the UDP payload.
	Payload []byte
}

// IPv4 returns the IPv4 packet (20-byte header) carrying u, with valid
// IPv4 and UDP checksums. It panics if u's addresses are not IPv4.
func (u UDP) IPv4() []byte {
	d := make([]byte, header.UDPMinimumSize+len(u.Payload))
	header.UDP(d).Encode(&header.UDPFields{SrcPort: u.Src.Port(), DstPort: u.Dst.Port(), Length: uint16(len(d))})
	copy(d[header.UDPMinimumSize:], u.Payload)
	ttl := u.TTL
	if ttl == 0 {
		ttl = defaultTTL
	}
	ip := ipv4(u.Src.Addr(), u.Dst.Addr(), header.UDPProtocolNumber, ttl, 0, 0, u.DF, d)
	setL4Checksum(ip[header.IPv4MinimumSize:], udpChecksumOffset, header.UDPProtocolNumber, u.Src.Addr(), u.Dst.Addr())
	return ip
}

// IPv6UDP returns an IPv6 packet with hop limit 64 (no extension headers)
// carrying a UDP datagram from src to dst with payload, with a valid UDP
// checksum (mandatory over IPv6, RFC 8200 §8.1).
func IPv6UDP(src, dst netip.AddrPort, payload []byte) []byte {
	u := make([]byte, header.UDPMinimumSize+len(payload))
	header.UDP(u).Encode(&header.UDPFields{SrcPort: src.Port(), DstPort: dst.Port(), Length: uint16(len(u))})
	copy(u[header.UDPMinimumSize:], payload)
	ip := ipv6(src.Addr(), dst.Addr(), header.UDPProtocolNumber, defaultTTL, 0, u)
	setL4Checksum(ip[header.IPv6MinimumSize:], udpChecksumOffset, header.UDPProtocolNumber, src.Addr(), dst.Addr())
	return ip
}

func ipv4(src, dst netip.Addr, proto tcpip.TransportProtocolNumber, ttl, tos uint8, id uint16, df bool, l4 []byte) []byte {
	if !src.Is4() || !dst.Is4() {
		panic("mplstest: IPv4 packet with non-IPv4 addresses")
	}
	b := make([]byte, header.IPv4MinimumSize+len(l4))
	f := header.IPv4Fields{
		TOS:         tos,
		TotalLength: uint16(len(b)),
		ID:          id,
		TTL:         ttl,
		Protocol:    uint8(proto),
		SrcAddr:     addr(src),
		DstAddr:     addr(dst),
	}
	if df {
		f.Flags = header.IPv4FlagDontFragment
	}
	ip := header.IPv4(b)
	ip.Encode(&f)
	ip.SetChecksum(^ip.CalculateChecksum())
	copy(b[header.IPv4MinimumSize:], l4)
	return b
}

func ipv6(src, dst netip.Addr, proto tcpip.TransportProtocolNumber, hop, tc uint8, l4 []byte) []byte {
	if !src.Is6() || !dst.Is6() || src.Is4In6() || dst.Is4In6() {
		panic("mplstest: IPv6 packet with non-IPv6 addresses")
	}
	b := make([]byte, header.IPv6MinimumSize+len(l4))
	header.IPv6(b).Encode(&header.IPv6Fields{
		TrafficClass:      tc,
		PayloadLength:     uint16(len(l4)),
		TransportProtocol: proto,
		HopLimit:          hop,
		SrcAddr:           addr(src),
		DstAddr:           addr(dst),
	})
	copy(b[header.IPv6MinimumSize:], l4)
	return b
}

// Transport checksum field offsets.
const (
	tcpChecksumOffset = 16 // RFC 9293 §3.1
	udpChecksumOffset = 6  // RFC 768
)

// setL4Checksum writes the full transport checksum of seg (pseudo-header,
// header and payload) at off.
func setL4Checksum(seg []byte, off int, proto tcpip.TransportProtocolNumber, src, dst netip.Addr) {
	seg[off], seg[off+1] = 0, 0
	sum := checksum.Checksum(seg, header.PseudoHeaderChecksum(proto, addr(src), addr(dst), uint16(len(seg))))
	c := ^sum
	if proto == header.UDPProtocolNumber && c == 0 {
		c = 0xffff // RFC 768: zero is transmitted as all ones
	}
	seg[off], seg[off+1] = byte(c>>8), byte(c)
}

func addr(a netip.Addr) tcpip.Address { return tcpip.AddrFromSlice(a.AsSlice()) }

package forward

import "gvisor.dev/gvisor/pkg/tcpip/header"

// IPv4 fragmentation of transit packets that do not fit the egress link
// once labelled (RFC 3032 §3, RFC 791 §3.2).

// fragmentIPv4 splits the IPv4 packet ip into fragments of at most mtu
// bytes (RFC 791 §3.2): every fragment but the last carries a multiple of 8
// data bytes and MF; later fragments keep only the options marked copied.
// It returns false for a packet it cannot split (a malformed header, or an
// MTU too small for its header).
func fragmentIPv4(ip []byte, mtu int) ([][]byte, bool) {
	h := header.IPv4(ip)
	hl, total := int(h.HeaderLength()), int(h.TotalLength())
	if hl < header.IPv4MinimumSize || total < hl || total > len(ip) {
		return nil, false
	}
	first := ip[:hl]
	later := laterFragmentHeader(first)
	data := ip[hl:total]
	baseOff := int(h.FragmentOffset())
	moreAfter := h.More()
	var frags [][]byte
	for off := 0; off < len(data); {
		hdr := first
		if off > 0 {
			hdr = later
		}
		room := (mtu - len(hdr)) &^ 7
		if room <= 0 {
			return nil, false
		}
		n := min(room, len(data)-off)
		f := make([]byte, len(hdr)+n)
		copy(f, hdr)
		copy(f[len(hdr):], data[off:off+n])
		fh := header.IPv4(f)
		fh.SetHeaderLength(uint8(len(hdr)))
		fh.SetTotalLength(uint16(len(f)))
		flags := h.Flags() &^ header.IPv4FlagMoreFragments
		if off+n < len(data) || moreAfter {
			flags |= header.IPv4FlagMoreFragments
		}
		fh.SetFlagsFragmentOffset(flags, uint16(baseOff+off))
		fh.SetChecksum(0)
		fh.SetChecksum(^fh.CalculateChecksum())
		frags = append(frags, f)
		off += n
	}
	return frags, true
}

// laterFragmentHeader returns the header for fragments after the first:
// hdr with only the options whose copied flag is set (RFC 791 §3.1),
// padded to a multiple of 4 bytes.
func laterFragmentHeader(hdr []byte) []byte {
	if len(hdr) == header.IPv4MinimumSize {
		return hdr
	}
	out := append([]byte(nil), hdr[:header.IPv4MinimumSize]...)
	opts := hdr[header.IPv4MinimumSize:]
	for i := 0; i < len(opts); {
		t := opts[i]
		if t == 0 { // end of options list
			break
		}
		if t == 1 { // no-operation
			i++
			continue
		}
		if i+1 >= len(opts) || opts[i+1] < 2 || i+int(opts[i+1]) > len(opts) {
			break // malformed: copy nothing further
		}
		l := int(opts[i+1])
		if t&0x80 != 0 {
			out = append(out, opts[i:i+l]...)
		}
		i += l
	}
	for len(out)%4 != 0 {
		out = append(out, 0)
	}
	return out
}

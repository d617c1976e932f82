package bgp

import (
	"bufio"
	"encoding/binary"
	"io"
	"sync/atomic"
	"time"
)

// afiSafi is an address family as BGP numbers it (RFC 4760).
type afiSafi struct {
	afi  uint16
	safi uint8
}

// ipv4Unicast is the family of an UPDATE's own NLRI and withdrawn routes
// fields (RFC 4271).
var ipv4Unicast = afiSafi{1, 1}

func (f Family) afiSafi() afiSafi {
	if f == IPv6LabeledUnicast {
		return afiSafi{2, 4}
	}
	return afiSafi{1, 4}
}

// BGP message framing (RFC 4271 §4.1; RFC 8654 allows up to 65535).
const (
	bgpHeaderLen = 19
	bgpOpen      = 1
	bgpUpdate    = 2
)

// openFamilies returns the families an OPEN's body (after the header)
// lists in Multiprotocol capabilities (RFC 4760 §8, RFC 5492; optional
// parameters in RFC 9072's extended form too), or ok false when it
// cannot be read (GoBGP then answers the OPEN itself).
func openFamilies(body []byte) (fams map[afiSafi]bool, ok bool) {
	fams = map[afiSafi]bool{}
	ok = openCapabilities(body, func(code uint8, v []byte) {
		if code == capMultiprotocol && len(v) == 4 {
			fams[afiSafi{binary.BigEndian.Uint16(v), v[3]}] = true
		}
	})
	if !ok {
		return nil, false
	}
	return fams, true
}

// Capability codes (RFC 5492) the splice reads in a neighbour's OPEN.
const (
	capMultiprotocol = 1  // RFC 4760
	capFourOctetAS   = 65 // RFC 6793
)

// openFourOctetAS reports whether an OPEN's body offers four-octet AS
// numbers (RFC 6793): GoBGP always does, so the session then carries
// AS_PATHs of four-octet numbers.
func openFourOctetAS(body []byte) bool {
	as4 := false
	ok := openCapabilities(body, func(code uint8, v []byte) {
		if code == capFourOctetAS && len(v) == 4 {
			as4 = true
		}
	})
	return ok && as4
}

// openCapabilities calls fn with each capability (code and value) of an
// OPEN's body, and reports false when the body does not frame (fn may
// have been called for some capabilities then).
func openCapabilities(body []byte, fn func(code uint8, v []byte)) bool {
	if len(body) < 10 {
		return false
	}
	params := body[10:]
	n, lenSize := int(body[9]), 1
	if n == 255 && len(params) >= 3 && params[0] == 255 {
		// RFC 9072: type 255, then a two-octet length, two-octet lengths.
		n, lenSize = int(binary.BigEndian.Uint16(params[1:3])), 2
		params = params[3:]
	}
	if n > len(params) {
		return false
	}
	params = params[:n]
	for len(params) > 0 {
		if len(params) < 1+lenSize {
			return false
		}
		typ := params[0]
		l := int(params[1])
		if lenSize == 2 {
			l = int(binary.BigEndian.Uint16(params[1:3]))
		}
		params = params[1+lenSize:]
		if l > len(params) {
			return false
		}
		caps := params[:l]
		params = params[l:]
		if typ != 2 { // capabilities
			continue
		}
		for len(caps) > 0 {
			if len(caps) < 2 || int(caps[1]) > len(caps)-2 {
				return false
			}
			fn(caps[0], caps[2:2+int(caps[1])])
			caps = caps[2+int(caps[1]):]
		}
	}
	return true
}

// unnegotiated is what stripUnnegotiated took out of an UPDATE.
type unnegotiated struct {
	family afiSafi
	// drop reports that nothing was left: the whole UPDATE goes.
	drop bool
}

// stripUnnegotiated returns an UPDATE body (after the header) without
// what carries a family the session did not negotiate (negotiated says
// which it did): an MP_REACH_NLRI or MP_UNREACH_NLRI of another AFI/SAFI,
// and the NLRI and withdrawn routes fields when IPv4 unicast is not
// negotiated. RFC 4760 §7 has such routes ignored for the session; GoBGP
// instead closes it with NOTIFICATION 0/0 (no error code of RFC 4271
// §4.5). An UPDATE whose lengths do not add up is returned as it is, for
// GoBGP's own error handling; out is nil when nothing is taken out, and
// when everything is (u.drop).
func stripUnnegotiated(body []byte, negotiated map[afiSafi]bool) (out []byte, u unnegotiated, changed bool) {
	if len(body) < 4 {
		return nil, u, false
	}
	wl := int(binary.BigEndian.Uint16(body))
	if 2+wl+2 > len(body) {
		return nil, u, false
	}
	withdrawn := body[2 : 2+wl]
	al := int(binary.BigEndian.Uint16(body[2+wl:]))
	if 4+wl+al > len(body) {
		return nil, u, false
	}
	attrs := body[4+wl : 4+wl+al]
	nlri := body[4+wl+al:]
	// A first pass decides, without copying: most UPDATEs pass as they are.
	strip := !negotiated[ipv4Unicast] && len(withdrawn)+len(nlri) > 0
	if strip {
		u.family = ipv4Unicast
		withdrawn, nlri = nil, nil
	}
	mp := false // an MP_REACH_NLRI or MP_UNREACH_NLRI stays
	if !eachAttr(attrs, func(attr []byte, f afiSafi, isMP bool) {
		switch {
		case isMP && !negotiated[f]:
			strip, u.family = true, f
		case isMP:
			mp = true
		}
	}) || !strip {
		return nil, unnegotiated{}, false
	}
	if !mp && len(withdrawn)+len(nlri) == 0 {
		u.drop = true
		return nil, u, true
	}
	out = make([]byte, 0, 4+len(body))
	out = binary.BigEndian.AppendUint16(out, uint16(len(withdrawn)))
	out = append(out, withdrawn...)
	at := len(out)
	out = append(out, 0, 0) // the attributes' length, set below
	eachAttr(attrs, func(attr []byte, f afiSafi, isMP bool) {
		if !isMP || negotiated[f] {
			out = append(out, attr...)
		}
	})
	binary.BigEndian.PutUint16(out[at:], uint16(len(out)-at-2))
	out = append(out, nlri...)
	return out, u, true
}

// eachAttr calls fn with each path attribute of attrs (header included),
// and for MP_REACH_NLRI and MP_UNREACH_NLRI its family; it reports false,
// having called fn for none, when the attributes do not frame.
func eachAttr(attrs []byte, fn func(attr []byte, f afiSafi, isMP bool)) bool {
	for pass := range 2 {
		for a := attrs; len(a) > 0; {
			if len(a) < 3 {
				return false
			}
			hl, l := 3, int(a[2])
			if a[0]&0x10 != 0 { // extended length
				if len(a) < 4 {
					return false
				}
				hl, l = 4, int(binary.BigEndian.Uint16(a[2:]))
			}
			if hl+l > len(a) {
				return false
			}
			attr := a[:hl+l]
			a = a[hl+l:]
			if pass == 0 {
				continue // framing first: fn sees all or none
			}
			var f afiSafi
			isMP := (attr[1] == 14 || attr[1] == 15) && l >= 3
			if isMP {
				f = afiSafi{binary.BigEndian.Uint16(attr[hl:]), attr[hl+2]}
			}
			fn(attr, f, isMP)
		}
	}
	return true
}

// bgpKeepalive is a KEEPALIVE message (RFC 4271 §4.4).
var bgpKeepalive = [bgpHeaderLen]byte{
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	0, bgpHeaderLen, bgpKeepaliveType,
}

// BGP message types besides OPEN and UPDATE.
const (
	bgpNotification  = 3
	bgpKeepaliveType = 4
)

// takenKeepaliveInterval is the longest copyFromNeighbor lets GoBGP go
// without a message while it takes the neighbour's UPDATEs: each one
// resets GoBGP's hold timer, as the UPDATE would have. (A variable for
// the tests.)
var takenKeepaliveInterval = time.Second

// take is what a take function says of an UPDATE offered to it.
type take uint8

const (
	// leftToGoBGP: GoBGP reads the UPDATE and its routes.
	leftToGoBGP take = iota
	// tookUpdate: the node read the UPDATE's routes; GoBGP does not see
	// it.
	tookUpdate
	// noRoutes: GoBGP reads the UPDATE, which carries no route
	// (End-of-RIB).
	noRoutes
)

// gobgpWire is what the messages GoBGP sends on a session tell the
// splice (copyFromGoBGP writes it, copyFromNeighbor reads it).
type gobgpWire struct {
	// accepted: GoBGP sent a KEEPALIVE after its OPEN: it took the
	// neighbour's OPEN (RFC 4271 §8.2.2, OpenSent to OpenConfirm).
	accepted atomic.Bool
	// notified: GoBGP sent a NOTIFICATION: the session is going.
	notified atomic.Bool
}

// copyFromGoBGP copies the BGP messages GoBGP sends (src) to the
// neighbour (dst) unchanged, recording in w what they tell. Anything that
// does not frame as BGP is copied as it is.
func copyFromGoBGP(dst io.Writer, src io.Reader, w *gobgpWire) error {
	br := bufio.NewReaderSize(src, 64<<10)
	bw := bufio.NewWriterSize(dst, 64<<10)
	var hdr [bgpHeaderLen]byte
	opened := false
	for {
		if n, err := io.ReadFull(br, hdr[:]); err != nil {
			bw.Write(hdr[:n])
			bw.Flush()
			return err
		}
		l := int(binary.BigEndian.Uint16(hdr[16:]))
		if _, err := bw.Write(hdr[:]); err != nil {
			return err
		}
		if l < bgpHeaderLen {
			bw.Flush()
			_, err := io.Copy(dst, br)
			return err
		}
		switch hdr[18] {
		case bgpOpen:
			opened = true
		case bgpKeepaliveType:
			if opened {
				w.accepted.Store(true)
			}
		case bgpNotification:
			w.notified.Store(true)
		}
		if _, err := io.CopyN(bw, br, int64(l-bgpHeaderLen)); err != nil {
			bw.Flush()
			return err
		}
		if br.Buffered() == 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
	}
}

// copyFromNeighbor copies the BGP messages neighbour n sends (src) to
// GoBGP (dst), message by message: UPDATEs lose what carries a family the
// session did not negotiate (stripUnnegotiated; the families are GoBGP's,
// families(n), and those of the neighbour's OPEN), and report calls back
// with each.
//
// Once the session is established on the wire (the neighbour's OPEN with
// four-octet AS numbers and its KEEPALIVE seen, GoBGP's KEEPALIVE after
// its OPEN seen in gw, no NOTIFICATION from GoBGP) each UPDATE is offered
// to offer (when not nil), with the families negotiated: an UPDATE it
// takes does not reach GoBGP, which gets a KEEPALIVE instead, at once,
// when it got nothing for takenKeepaliveInterval. After an UPDATE with routes
// has gone to GoBGP (one offer left, or one sent before the session was
// up) none is offered again: the routes GoBGP reads reach the node later,
// through its watch, and must not overtake the node's own.
//
// Anything that does not frame as BGP is passed on unchanged, for GoBGP
// to answer.
func copyFromNeighbor(dst io.Writer, src io.Reader, n Neighbor, report func(unnegotiated), gw *gobgpWire, offer func(body []byte, negotiated map[afiSafi]bool) take) error {
	br := bufio.NewReaderSize(src, 64<<10)
	bw := bufio.NewWriterSize(dst, 64<<10)
	ours := map[afiSafi]bool{}
	for _, f := range families(n) {
		ours[f.afiSafi()] = true
	}
	negotiated := ours
	as4, opened, keptAlive, gobgpReads := false, false, false, offer == nil
	lastSent := time.Now() // when GoBGP last got bytes (or the connection)
	var hdr [bgpHeaderLen]byte
	var body []byte
	for {
		if n, err := io.ReadFull(br, hdr[:]); err != nil {
			bw.Write(hdr[:n]) // a short tail, as it came
			bw.Flush()
			return err
		}
		l := int(binary.BigEndian.Uint16(hdr[16:]))
		if l < bgpHeaderLen {
			// Not a message: GoBGP sees the rest as it is.
			bw.Write(hdr[:])
			bw.Flush()
			_, err := io.Copy(dst, br)
			return err
		}
		if cap(body) < l-bgpHeaderLen {
			body = make([]byte, l-bgpHeaderLen)
		}
		body = body[:l-bgpHeaderLen]
		if n, err := io.ReadFull(br, body); err != nil {
			bw.Write(hdr[:])
			bw.Write(body[:n])
			bw.Flush()
			return err
		}
		msg, payload, sendNow := hdr[:], body, false
		switch hdr[18] {
		case bgpOpen:
			opened, as4 = true, openFourOctetAS(body)
			if theirs, ok := openFamilies(body); ok && len(theirs) > 0 {
				// Without Multiprotocol capabilities the neighbour speaks
				// IPv4 unicast only (RFC 4760 §8): GoBGP decides that
				// case itself.
				negotiated = map[afiSafi]bool{}
				for f := range ours {
					if theirs[f] {
						negotiated[f] = true
					}
				}
			}
		case bgpKeepaliveType:
			keptAlive = keptAlive || opened
		case bgpUpdate:
			if out, u, changed := stripUnnegotiated(body, negotiated); changed {
				report(u)
				if u.drop {
					msg, payload = nil, nil
					break
				}
				body, payload = out, out
				binary.BigEndian.PutUint16(hdr[16:], uint16(bgpHeaderLen+len(body)))
			}
			if gobgpReads {
				break
			}
			if !as4 || !keptAlive || gw == nil || !gw.accepted.Load() || gw.notified.Load() {
				gobgpReads = true
				break
			}
			switch offer(body, negotiated) {
			case leftToGoBGP:
				gobgpReads = true
			case tookUpdate:
				msg, payload = nil, nil
				if time.Since(lastSent) >= takenKeepaliveInterval {
					// Sent at once: the neighbour's stream may not pause
					// at a message's end for a long while.
					msg, sendNow = bgpKeepalive[:], true
				}
			}
		}
		if msg != nil {
			if _, err := bw.Write(msg); err != nil {
				return err
			}
			if _, err := bw.Write(payload); err != nil {
				return err
			}
		}
		// What is written goes out before the next read waits, whether
		// or not this message was (a KEEPALIVE before a taken UPDATE).
		if (sendNow || br.Buffered() == 0) && bw.Buffered() > 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
			lastSent = time.Now()
		}
	}
}

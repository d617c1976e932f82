package lspping_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/mplsnode/mplsnode/lspping"
	"github.com/mplsnode/mplsnode/mpls"
)

// FuzzDecode: Decode never panics, and what decodes encodes to bytes
// that decode to the same message and encode to themselves.
func FuzzDecode(f *testing.F) {
	f.Add(request().Marshal())
	f.Add(reply().Marshal())
	f.Add(make([]byte, 32))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := lspping.Decode(b)
		if err != nil {
			return
		}
		_ = m.Unknown()
		enc := m.Marshal()
		m2, err := lspping.Decode(enc)
		if err != nil {
			t.Fatalf("Decode(Marshal(Decode(%x))) = %v", b, err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip changed the message:\n%+v\n%+v", m, m2)
		}
		if enc2 := m2.Marshal(); !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable:\n%x\n%x", enc, enc2)
		}
	})
}

// FuzzParseIP: ParseIP and IsRequest never panic on any bytes, and a
// packet ParseIP accepts as a request is one IsRequest accepts.
func FuzzParseIP(f *testing.F) {
	f.Add(lspping.BuildIP(&lspping.Packet{Src: src, Dst: dst127, SrcPort: 1, DstPort: lspping.Port, TTL: 1, RouterAlert: true, Payload: request().Marshal()}))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := lspping.ParseIP(b)
		req := lspping.IsRequest(b)
		if err == nil && p.DstPort == lspping.Port && lspping.IsLoopbackDest(p.Dst) && !req {
			t.Fatalf("ParseIP reads a request to %v port %d, IsRequest says no", p.Dst, p.DstPort)
		}
	})
}

// FuzzRespond: Respond never panics on any message and arrival, and
// every reply it gives encodes to a message that decodes.
func FuzzRespond(f *testing.F) {
	f.Add(request().Marshal(), uint8(lspping.TTLExpired), uint32(102))
	f.Add(request().Marshal(), uint8(lspping.AtEgress), uint32(300))
	f.Add(reply().Marshal(), uint8(lspping.NoLabelEntry), uint32(7))
	f.Fuzz(func(t *testing.T, b []byte, where uint8, label uint32) {
		n := newNode(t)
		a := &lspping.Arrival{Where: lspping.Where(where % 4), Labels: []mpls.Entry{{Label: mpls.Label(label) & mpls.MaxLabel, TTL: 1, S: true}},
			IP: lspping.BuildIP(&lspping.Packet{Src: src, Dst: dst127, SrcPort: 1, DstPort: lspping.Port, TTL: 1, Payload: b})}
		rep, _ := lspping.Respond(b, a, n)
		if rep == nil {
			return
		}
		if _, err := lspping.Decode(rep.Marshal()); err != nil {
			t.Fatalf("the reply to %x does not decode: %v", b, err)
		}
	})
}

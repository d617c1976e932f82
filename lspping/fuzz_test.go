package lspping_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/mplsnode/mplsnode/lspping"
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

package netperf_test

import (
	"testing"

	"github.com/mplsnode/mplsnode/netperf"
)

// FuzzParseRequest: any 656-byte message parses without panicking, and a
// parsed omni or classic request survives a marshal/parse round trip. The
// round trip is compared on the wire bytes, where a NaN equals itself
// (testdata/fuzz/FuzzParseRequest/2f23ecf808e4121c: a NaN CPU rate that
// reflect.DeepEqual called different).
// The seed corpus in testdata/fuzz/FuzzParseRequest holds every captured
// client message from the vectors.
func FuzzParseRequest(f *testing.F) {
	f.Add(make([]byte, netperf.MessageSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := netperf.ParseRequest(b)
		if len(b) != netperf.MessageSize {
			if err == nil {
				t.Fatalf("got no error for %d bytes", len(b))
			}
			return
		}
		if err != nil {
			t.Fatalf("ParseRequest(656 bytes): %v", err)
		}
		var m netperf.Message
		switch {
		case req.Omni != nil:
			_ = req.Omni.Validate()
			req.Omni.Marshal(&m)
			var back netperf.OmniRequest
			back.Unmarshal(&m)
			var m2 netperf.Message
			back.Marshal(&m2)
			if m2 != m {
				t.Fatalf("omni round trip:\n got %+v\nwant %+v", back, *req.Omni)
			}
		case req.Classic != nil:
			_ = req.Classic.Validate()
			req.Classic.Marshal(&m)
			var back netperf.ClassicRequest
			err := back.Unmarshal(&m)
			var m2 netperf.Message
			back.Marshal(&m2)
			if err != nil || m2 != m {
				t.Fatalf("classic round trip: err %v\n got %+v\nwant %+v", err, back, *req.Classic)
			}
		}
	})
}

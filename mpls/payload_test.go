package mpls_test

import (
	"errors"
	"testing"

	"github.com/mplsnode/mplsnode/mpls"
)

// ipv4Hdr returns a 20-byte IPv4 header (the RFC 1071-era textbook example:
// 192.168.0.1 -> 192.168.0.199, UDP, TTL 64, checksum 0xb861) padded to n.
func ipv4Hdr(t testing.TB, n int) []byte {
	b := mustHex(t, "4500 0073 0000 4000 4011 b861 c0a8 0001 c0a8 00c7")
	return append(b, make([]byte, max(0, n-len(b)))...)[:n]
}

func ipv6Hdr(n int) []byte {
	b := make([]byte, max(n, 40))
	b[0] = 0x60 // version 6
	b[7] = 64   // hop limit
	return b[:n]
}

func TestInferPayload(t *testing.T) {
	v4 := ipv4Hdr(t, 20)
	v4opts := append([]byte{0x46}, ipv4Hdr(t, 24)[1:]...) // IHL 6: 24 bytes
	v6 := ipv6Hdr(40)
	for _, tt := range []struct {
		name    string
		binding mpls.Payload
		bottom  mpls.Label
		payload []byte
		want    mpls.Payload
		// on error
		wantOffset  int
		wantVersion uint8
		wantMsg     string
	}{
		{name: "nibble 4", bottom: 100, payload: v4, want: mpls.PayloadIPv4},
		{name: "nibble 4 with options", bottom: 100, payload: v4opts, want: mpls.PayloadIPv4},
		{name: "nibble 6", bottom: 100, payload: v6, want: mpls.PayloadIPv6},
		{name: "explicit null v6 with matching binding", binding: mpls.PayloadIPv6, bottom: 2, payload: v6, want: mpls.PayloadIPv6},
		{name: "explicit null v4", bottom: 0, payload: v4, want: mpls.PayloadIPv4},
		{name: "explicit null v6", bottom: 2, payload: v6, want: mpls.PayloadIPv6},
		{name: "binding v6", binding: mpls.PayloadIPv6, bottom: 100, payload: v6, want: mpls.PayloadIPv6},
		// Issue 12: the explicit null label, or a binding, names the type,
		// but the payload must still hold a whole header of it (a 1-byte
		// payload under label 0 crashed the LSR's ICMP path).
		{
			name: "explicit null v4 on 1 byte (issue 12)", bottom: 0, payload: []byte{0x45}, wantOffset: 1, wantVersion: 4,
			wantMsg: "mpls: unknown payload under bottom label 0 (ipv4-explicit-null): IPv4 header shorter than 20 bytes (version nibble 4, 1 bytes, offset 1)",
		},
		{
			name: "explicit null v6 on 1 byte (issue 12)", bottom: 2, payload: []byte{0x60}, wantOffset: 1, wantVersion: 6,
			wantMsg: "mpls: unknown payload under bottom label 2 (ipv6-explicit-null): IPv6 header shorter than 40 bytes (version nibble 6, 1 bytes, offset 1)",
		},
		{
			name: "explicit null v4, no bytes", bottom: 0, payload: nil,
			wantMsg: "mpls: unknown payload under bottom label 0 (ipv4-explicit-null): empty payload, label says ipv4 (version nibble 0, 0 bytes, offset 0)",
		},
		{
			name: "explicit null v4 on v6 bytes", bottom: 0, payload: v6, wantVersion: 6,
			wantMsg: "mpls: unknown payload under bottom label 0 (ipv4-explicit-null): the label says ipv4 but the IP version nibble is 6 (version nibble 6, 40 bytes, offset 0)",
		},
		{
			name: "binding v4 on garbage", binding: mpls.PayloadIPv4, bottom: 100, payload: []byte{0xff}, wantVersion: 15,
			wantMsg: "mpls: unknown payload under bottom label 100: the label says ipv4 but the IP version nibble is 15 (version nibble 15, 1 bytes, offset 0)",
		},
		{
			name: "binding v4 with IHL beyond data", binding: mpls.PayloadIPv4, bottom: 100, payload: append([]byte{0x4f}, v4[1:]...), wantOffset: 20, wantVersion: 4,
			wantMsg: "mpls: unknown payload under bottom label 100: IPv4 header shorter than its IHL of 60 bytes (version nibble 4, 20 bytes, offset 20)",
		},
		{
			name: "empty", bottom: 100, payload: nil,
			wantMsg: "mpls: unknown payload under bottom label 100: empty payload (version nibble 0, 0 bytes, offset 0)",
		},
		{
			name: "nibble 5", bottom: 100, payload: append([]byte{0x50}, v4[1:]...), wantVersion: 5,
			wantMsg: "mpls: unknown payload under bottom label 100: IP version nibble is neither 4 nor 6 (version nibble 5, 20 bytes, offset 0)",
		},
		{
			name: "nibble 0 (pseudowire control word)", bottom: 100, payload: make([]byte, 64),
			wantMsg: "mpls: unknown payload under bottom label 100: IP version nibble is neither 4 nor 6 (version nibble 0, 64 bytes, offset 0)",
		},
		{
			name: "IPv4 short", bottom: 100, payload: v4[:19], wantOffset: 19, wantVersion: 4,
			wantMsg: "mpls: unknown payload under bottom label 100: IPv4 header shorter than 20 bytes (version nibble 4, 19 bytes, offset 19)",
		},
		{
			name: "IPv4 IHL 4", bottom: 100, payload: append([]byte{0x44}, v4[1:]...), wantVersion: 4,
			wantMsg: "mpls: unknown payload under bottom label 100: IPv4 IHL 4 below 5 (version nibble 4, 20 bytes, offset 0)",
		},
		{
			name: "IPv4 IHL beyond data", bottom: 100, payload: append([]byte{0x46}, v4[1:]...), wantOffset: 20, wantVersion: 4,
			wantMsg: "mpls: unknown payload under bottom label 100: IPv4 header shorter than its IHL of 24 bytes (version nibble 4, 20 bytes, offset 20)",
		},
		{
			name: "IPv6 short", bottom: 100, payload: v6[:39], wantOffset: 39, wantVersion: 6,
			wantMsg: "mpls: unknown payload under bottom label 100: IPv6 header shorter than 40 bytes (version nibble 6, 39 bytes, offset 39)",
		},
		{
			name: "binding contradicts explicit null", binding: mpls.PayloadIPv6, bottom: 0, payload: v4,
			wantMsg: "mpls: unknown payload under bottom label 0 (ipv4-explicit-null): binding ipv6 contradicts the explicit null label (version nibble 0, 20 bytes, offset 0)",
		},
		{
			name: "invalid binding", binding: 9, bottom: 100, payload: v4,
			wantMsg: "mpls: unknown payload under bottom label 100: invalid binding payload(9) (version nibble 0, 20 bytes, offset 0)",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mpls.InferPayload(tt.binding, tt.bottom, tt.payload)
			if tt.wantMsg == "" {
				if err != nil || got != tt.want {
					t.Fatalf("InferPayload = %v, %v; want %v, nil", got, err, tt.want)
				}
				return
			}
			if got != mpls.PayloadNone {
				t.Errorf("InferPayload payload = %v, want none on error", got)
			}
			var ue *mpls.UnknownPayloadError
			if !errors.As(err, &ue) || !errors.Is(err, mpls.ErrUnknownPayload) {
				t.Fatalf("InferPayload err = %v, want *UnknownPayloadError", err)
			}
			if ue.Offset != tt.wantOffset || ue.Version != tt.wantVersion || ue.Label != tt.bottom || ue.Len != len(tt.payload) {
				t.Errorf("err = %+v, want Offset %d Version %d Label %d Len %d", ue, tt.wantOffset, tt.wantVersion, tt.bottom, len(tt.payload))
			}
			if got := err.Error(); got != tt.wantMsg {
				t.Errorf("err.Error() = %q, want %q", got, tt.wantMsg)
			}
		})
	}
}

func TestInferPayloadNoAlloc(t *testing.T) {
	v4 := ipv4Hdr(t, 40)
	if allocs := testing.AllocsPerRun(100, func() {
		_, _ = mpls.InferPayload(mpls.PayloadNone, 100, v4)
	}); allocs != 0 {
		t.Errorf("InferPayload allocs = %v, want 0", allocs)
	}
}

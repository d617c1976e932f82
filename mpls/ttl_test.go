package mpls_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/mplsnode/mplsnode/mpls"
)

// ipv4Checksum computes the IPv4 header checksum from scratch (RFC 1071),
// treating the checksum field as zero: the oracle for PopTTL's incremental
// update.
func ipv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i < len(h); i += 2 {
		if i == 10 {
			continue
		}
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

func TestIPv4ChecksumOracle(t *testing.T) {
	if got := ipv4Checksum(ipv4Hdr(t, 20)); got != 0xb861 {
		t.Fatalf("oracle checksum of the textbook header = %#04x, want 0xb861", got)
	}
}

func TestPushTTL(t *testing.T) {
	for _, tt := range []struct {
		name    string
		model   mpls.TTLModel
		ip, cfg uint8
		want    uint8
	}{
		{"uniform copies IP TTL", mpls.TTLUniform, 64, 0, 64},
		{"uniform ignores pipe TTL", mpls.TTLUniform, 7, 200, 7},
		{"pipe default", mpls.TTLPipe, 64, 0, 255},
		{"pipe configured", mpls.TTLPipe, 64, 100, 100},
	} {
		if got := mpls.PushTTL(tt.model, tt.ip, tt.cfg); got != tt.want {
			t.Errorf("%s: PushTTL(%v, %d, %d) = %d, want %d", tt.name, tt.model, tt.ip, tt.cfg, got, tt.want)
		}
	}
}

func TestForwardTTL(t *testing.T) {
	for _, tt := range []struct {
		in      uint8
		want    uint8
		expired bool
	}{
		{0, 0, true}, {1, 0, true}, {2, 1, false}, {64, 63, false}, {255, 254, false},
	} {
		got, err := mpls.ForwardTTL(tt.in)
		if tt.expired {
			var te *mpls.TTLExpiredError
			if !errors.Is(err, mpls.ErrTTLExpired) || !errors.As(err, &te) || te.TTL != tt.in {
				t.Errorf("ForwardTTL(%d) err = %v, want *TTLExpiredError{TTL: %d}", tt.in, err, tt.in)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ForwardTTL(%d) = %d, %v; want %d, nil", tt.in, got, err, tt.want)
		}
	}
	_, err := mpls.ForwardTTL(1)
	if got, want := err.Error(), "mpls: TTL expired: incoming TTL 1, forwarding needs at least 2"; got != want {
		t.Errorf("err.Error() = %q, want %q", got, want)
	}
	if allocs := testing.AllocsPerRun(100, func() { _, _ = mpls.ForwardTTL(1) }); allocs != 0 {
		t.Errorf("ForwardTTL(1) allocs = %v, want 0", allocs)
	}
}

func TestPopTTLIPv4Uniform(t *testing.T) {
	// Golden: the textbook header with TTL 64 (0x40) popped from a label
	// with outgoing TTL 63: word 0x4011 becomes 0x3f11, checksum 0xb861
	// becomes 0xb961.
	h := ipv4Hdr(t, 20)
	if err := mpls.PopTTL(mpls.TTLUniform, 63, mpls.PayloadIPv4, h); err != nil {
		t.Fatal(err)
	}
	if got, want := h, mustHex(t, "4500 0073 0000 4000 3f11 b961 c0a8 0001 c0a8 00c7"); !bytes.Equal(got, want) {
		t.Errorf("header after PopTTL(63) = %x, want %x", got, want)
	}

	// Every TTL pair, on random headers: the incremental update must equal
	// a checksum recomputed from scratch.
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 64 {
		h := make([]byte, 20)
		for j := range h {
			h[j] = byte(rng.Uint32())
		}
		h[0] = 0x45
		if i == 0 {
			copy(h[12:], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) // sums near 0xffff
		}
		binary.BigEndian.PutUint16(h[10:], ipv4Checksum(h))
		for ttl := range 256 {
			if err := mpls.PopTTL(mpls.TTLUniform, uint8(ttl), mpls.PayloadIPv4, h); err != nil {
				t.Fatal(err)
			}
			if h[8] != uint8(ttl) {
				t.Fatalf("IPv4 TTL = %d, want %d", h[8], ttl)
			}
			if got, want := binary.BigEndian.Uint16(h[10:]), ipv4Checksum(h); got != want {
				t.Fatalf("header %x: checksum after PopTTL(%d) = %#04x, recomputed %#04x", h, ttl, got, want)
			}
		}
	}
}

func TestPopTTLOther(t *testing.T) {
	t.Run("IPv6 uniform", func(t *testing.T) {
		h := ipv6Hdr(40)
		if err := mpls.PopTTL(mpls.TTLUniform, 17, mpls.PayloadIPv6, h); err != nil {
			t.Fatal(err)
		}
		if h[7] != 17 {
			t.Errorf("hop limit = %d, want 17", h[7])
		}
	})
	t.Run("pipe leaves IPv4 alone", func(t *testing.T) {
		h := ipv4Hdr(t, 20)
		want := bytes.Clone(h)
		if err := mpls.PopTTL(mpls.TTLPipe, 3, mpls.PayloadIPv4, h); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(h, want) {
			t.Errorf("header = %x, want unchanged %x", h, want)
		}
	})
	t.Run("pipe leaves IPv6 alone", func(t *testing.T) {
		h := ipv6Hdr(40)
		if err := mpls.PopTTL(mpls.TTLPipe, 3, mpls.PayloadIPv6, h); err != nil {
			t.Fatal(err)
		}
		if h[7] != 64 {
			t.Errorf("hop limit = %d, want 64 (unchanged)", h[7])
		}
	})
	for _, tt := range []struct {
		name string
		p    mpls.Payload
		pkt  []byte
		msg  string
	}{
		{"IPv4 truncated", mpls.PayloadIPv4, ipv4Hdr(t, 19), "mpls: truncated IPv4 header at offset 0: have 19 bytes, need 20"},
		{"IPv6 truncated", mpls.PayloadIPv6, ipv6Hdr(39), "mpls: truncated IPv6 header at offset 0: have 39 bytes, need 40"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := mpls.PopTTL(mpls.TTLUniform, 5, tt.p, tt.pkt)
			var te *mpls.TruncatedError
			if !errors.As(err, &te) || !errors.Is(err, mpls.ErrTruncated) {
				t.Fatalf("PopTTL err = %v, want *TruncatedError", err)
			}
			if err.Error() != tt.msg {
				t.Errorf("err.Error() = %q, want %q", err.Error(), tt.msg)
			}
		})
	}
	if err := mpls.PopTTL(mpls.TTLUniform, 5, mpls.PayloadNone, ipv4Hdr(t, 20)); !errors.Is(err, mpls.ErrUnknownPayload) {
		t.Errorf("PopTTL(PayloadNone) err = %v, want ErrUnknownPayload", err)
	}
	h := ipv4Hdr(t, 20)
	if allocs := testing.AllocsPerRun(100, func() {
		_ = mpls.PopTTL(mpls.TTLUniform, h[8]^1, mpls.PayloadIPv4, h)
	}); allocs != 0 {
		t.Errorf("PopTTL allocs = %v, want 0", allocs)
	}
}

// TestUniformEgress walks a uniform-model LSP end to end: IP TTL 64 pushed,
// two swaps, egress pop-and-forward; the IP packet leaves with TTL 61 and a
// valid checksum, as if it had crossed three IP routers.
func TestUniformEgress(t *testing.T) {
	h := ipv4Hdr(t, 20)
	ttl := mpls.PushTTL(mpls.TTLUniform, h[8], 0) // 64 on the wire after ingress
	for range 2 {                                 // two transit LSRs
		var err error
		if ttl, err = mpls.ForwardTTL(ttl); err != nil {
			t.Fatal(err)
		}
	}
	out, err := mpls.ForwardTTL(ttl) // egress hop
	if err != nil {
		t.Fatal(err)
	}
	if err := mpls.PopTTL(mpls.TTLUniform, out, mpls.PayloadIPv4, h); err != nil {
		t.Fatal(err)
	}
	if h[8] != 61 {
		t.Errorf("IP TTL at egress = %d, want 61", h[8])
	}
	if got, want := binary.BigEndian.Uint16(h[10:]), ipv4Checksum(h); got != want {
		t.Errorf("checksum = %#04x, want %#04x", got, want)
	}
}

package mpls_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/mplsnode/mplsnode/mpls"
)

// Golden label stack entries. Each hex string is what Wireshark dissects as
// the Entry next to it.
var entryGolden = []struct {
	name string
	hex  string
	e    mpls.Entry
}{
	// 00064 1 4 0: label 0x00064 = 100, TC 0, S 1, TTL 0x40 = 64
	{"label100-bos-ttl64", "00064140", mpls.Entry{Label: 100, S: true, TTL: 64}},
	// 00000 0 0 ff: label 0 (IPv4 explicit null), TC 0, S 0, TTL 255
	{"ipv4-explicit-null", "000000ff", mpls.Entry{Label: 0, TTL: 255}},
	// 000c8 b 0 01: label 200, TC 5 (0xb = 101 1: TC 101, S 1), TTL 1
	{"label200-tc5-bos", "000c8b01", mpls.Entry{Label: 200, TC: 5, S: true, TTL: 1}},
	// fffff e 0 00: label 1048575 (max), TC 7, S 0, TTL 0
	{"max-label-tc7", "fffffe00", mpls.Entry{Label: mpls.MaxLabel, TC: 7, TTL: 0}},
	// fffff f ff: every bit set
	{"all-ones", "ffffffff", mpls.Entry{Label: mpls.MaxLabel, TC: 7, S: true, TTL: 255}},
	// 00000 0 00: every bit clear
	{"all-zero", "00000000", mpls.Entry{}},
}

func TestEntryEncodeDecodeGolden(t *testing.T) {
	for _, tt := range entryGolden {
		t.Run(tt.name, func(t *testing.T) {
			want, err := hex.DecodeString(tt.hex)
			if err != nil {
				t.Fatal(err)
			}
			var got [4]byte
			tt.e.Encode(got[:])
			if !bytes.Equal(got[:], want) {
				t.Errorf("Encode(%+v) = %x, want %x", tt.e, got, want)
			}
			if d := mpls.DecodeEntry(want); d != tt.e {
				t.Errorf("DecodeEntry(%x) = %+v, want %+v", want, d, tt.e)
			}
		})
	}
}

// TestEntryAgainstGopacket uses gopacket's MPLS layer as an independent
// encoder and decoder.
func TestEntryAgainstGopacket(t *testing.T) {
	for _, tt := range entryGolden {
		t.Run(tt.name, func(t *testing.T) {
			var ours [4]byte
			tt.e.Encode(ours[:])

			buf := gopacket.NewSerializeBuffer()
			m := &layers.MPLS{Label: uint32(tt.e.Label), TrafficClass: tt.e.TC, StackBottom: tt.e.S, TTL: tt.e.TTL}
			if err := m.SerializeTo(buf, gopacket.SerializeOptions{}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), ours[:]) {
				t.Errorf("gopacket encodes %x, we encode %x", buf.Bytes(), ours)
			}

			// gopacket needs a payload after S=1; give it none for S=0 too.
			pkt := gopacket.NewPacket(ours[:], layers.LayerTypeMPLS, gopacket.NoCopy)
			l, ok := pkt.Layer(layers.LayerTypeMPLS).(*layers.MPLS)
			if !ok {
				t.Fatalf("gopacket did not decode an MPLS layer: %v", pkt.ErrorLayer())
			}
			got := mpls.Entry{Label: mpls.Label(l.Label), TC: l.TrafficClass, S: l.StackBottom, TTL: l.TTL}
			if got != tt.e {
				t.Errorf("gopacket decodes %+v, want %+v", got, tt.e)
			}
		})
	}
}

func TestEncodeMasksFields(t *testing.T) {
	var b [4]byte
	mpls.Entry{Label: mpls.MaxLabel + 1 + 5, TC: 8 + 1, TTL: 9}.Encode(b[:])
	if got, want := mpls.DecodeEntry(b[:]), (mpls.Entry{Label: 5, TC: 1, TTL: 9}); got != want {
		t.Errorf("Encode of out-of-range fields decodes as %+v, want %+v (low bits only)", got, want)
	}
}

func TestEncodeShortBufferPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Encode into 3 bytes did not panic")
		}
	}()
	mpls.Entry{}.Encode(make([]byte, 3))
}

func TestLabelIsReserved(t *testing.T) {
	for _, tt := range []struct {
		l    mpls.Label
		want bool
	}{
		{0, true}, {3, true}, {13, true}, {15, true}, {16, false}, {100, false}, {mpls.MaxLabel, false},
	} {
		if got := tt.l.IsReserved(); got != tt.want {
			t.Errorf("Label(%d).IsReserved() = %v, want %v", uint32(tt.l), got, tt.want)
		}
	}
	if got := mpls.MaxLabel.Valid(); !got {
		t.Errorf("MaxLabel.Valid() = false, want true")
	}
	if got := (mpls.MaxLabel + 1).Valid(); got {
		t.Errorf("(MaxLabel+1).Valid() = true, want false")
	}
}

func TestLabelString(t *testing.T) {
	for _, tt := range []struct {
		l    mpls.Label
		want string
	}{
		{0, "0 (ipv4-explicit-null)"}, {1, "1 (router-alert)"}, {2, "2 (ipv6-explicit-null)"},
		{3, "3 (implicit-null)"}, {7, "7 (entropy-label-indicator)"}, {13, "13 (gal)"},
		{14, "14 (oam-alert)"}, {15, "15"}, {100, "100"},
	} {
		if got := tt.l.String(); got != tt.want {
			t.Errorf("Label(%d).String() = %q, want %q", uint32(tt.l), got, tt.want)
		}
	}
}

func TestReservedLabelValues(t *testing.T) {
	// RFC 3032 §2.1, RFC 6790 (ELI), RFC 5586 (GAL), RFC 3429 (OAM alert).
	for _, tt := range []struct {
		name string
		got  mpls.Label
		want uint32
	}{
		{"IPv4ExplicitNull", mpls.LabelIPv4ExplicitNull, 0},
		{"RouterAlert", mpls.LabelRouterAlert, 1},
		{"IPv6ExplicitNull", mpls.LabelIPv6ExplicitNull, 2},
		{"ImplicitNull", mpls.LabelImplicitNull, 3},
		{"EntropyIndicator", mpls.LabelEntropyIndicator, 7},
		{"GAL", mpls.LabelGAL, 13},
		{"OAMAlert", mpls.LabelOAMAlert, 14},
		{"MaxLabel", mpls.MaxLabel, 1048575},
	} {
		if uint32(tt.got) != tt.want {
			t.Errorf("Label%s = %d, want %d", tt.name, uint32(tt.got), tt.want)
		}
	}
}

func TestEncodeLabels(t *testing.T) {
	// 100/200/300 with TC 1, TTL 63:
	//   00064 2 3f   label 100, TC 1, S 0
	//   000c8 2 3f   label 200, TC 1, S 0
	//   0012c 3 3f   label 300, TC 1, S 1
	want, _ := hex.DecodeString("0006423f" + "000c823f" + "0012c33f")
	b := make([]byte, 16)
	n, err := mpls.EncodeLabels(b, []mpls.Label{100, 200, 300}, 1, 63)
	if err != nil {
		t.Fatalf("EncodeLabels: %v", err)
	}
	if n != 12 {
		t.Errorf("EncodeLabels n = %d, want 12", n)
	}
	if !bytes.Equal(b[:n], want) {
		t.Errorf("EncodeLabels = %x, want %x", b[:n], want)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		_, _ = mpls.EncodeLabels(b, []mpls.Label{100, 200, 300}, 1, 63)
	}); allocs != 0 {
		t.Errorf("EncodeLabels allocs = %v, want 0", allocs)
	}
}

func TestEncodeLabelsErrors(t *testing.T) {
	b := make([]byte, 16)
	_, err := mpls.EncodeLabels(b, []mpls.Label{100, mpls.LabelImplicitNull}, 0, 64)
	var re *mpls.ReservedLabelError
	if !errors.As(err, &re) || re.Offset != 4 || re.Label != 3 || !errors.Is(err, mpls.ErrReservedLabel) {
		t.Errorf("EncodeLabels(100/3) err = %v, want *ReservedLabelError at offset 4", err)
	}
	_, err = mpls.EncodeLabels(b, []mpls.Label{100, 200, mpls.MaxLabel + 1}, 0, 64)
	var le *mpls.LabelRangeError
	if !errors.As(err, &le) || le.Offset != 8 || le.Label != mpls.MaxLabel+1 || !errors.Is(err, mpls.ErrLabelRange) {
		t.Errorf("EncodeLabels(100/200/2^20) err = %v, want *LabelRangeError at offset 8", err)
	}
	if got, want := err.Error(), "mpls: label 1048576 at stack offset 8 does not fit in 20 bits (max 1048575)"; got != want {
		t.Errorf("error text = %q, want %q", got, want)
	}
}

func TestTCFromDSCP(t *testing.T) {
	for _, tt := range []struct {
		name string
		tos  uint8
		want uint8
	}{
		{"best effort", 0x00, 0},
		{"CS1", 8 << 2, 1},
		{"AF11", 10 << 2, 1},
		{"AF41", 34 << 2, 4},
		{"EF", 46 << 2, 5},
		{"CS6", 48 << 2, 6},
		{"CS7 with ECN CE", 56<<2 | 3, 7},
		{"ECN bits only", 0x03, 0},
	} {
		if got := mpls.TCFromDSCP(tt.tos); got != tt.want {
			t.Errorf("TCFromDSCP(%#02x) [%s] = %d, want %d", tt.tos, tt.name, got, tt.want)
		}
	}
}

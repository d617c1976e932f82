package node_test

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/config"
	"github.com/mplsnode/mplsnode/internal/testkit/leakcheck"
	"github.com/mplsnode/mplsnode/internal/testkit/nodekit"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/mplstest"
	"github.com/mplsnode/mplsnode/node"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// Node-level helpers for the tests that run a whole node on channel
// endpoints (reload, mpls input); the label switch's own tests are in
// package forward.

// The in-process LSR: in0 (10.1.0.1) receives, out0 (10.2.0.1) sends to the
// next hop 10.2.0.2; obsConf's swap and two label routes more.
const lsrConf = obsConf + `-f mpls route add 101 as to 300/301 via inet 10.2.0.2
-f mpls route add 102 via inet 10.2.0.2
`

var (
	macIn   = tcpip.LinkAddress("\x02\x00\x00\x00\x01\x01")
	macOut  = tcpip.LinkAddress("\x02\x00\x00\x00\x02\x01")
	macPrev = tcpip.LinkAddress("\x02\x00\x00\x00\x01\x02") // 10.1.0.2
	macNext = tcpip.LinkAddress("\x02\x00\x00\x00\x02\x02") // 10.2.0.2
)

type lsr struct {
	n       *node.Node
	in, out *channel.Endpoint
}

// newLSR starts the node on channel endpoints; static neighbours make the
// next hops (and the previous hop, for ICMP) resolved when resolve is set.
func newLSR(t testing.TB, conf string, resolve bool) *lsr {
	t.Helper()
	l := &lsr{in: channel.New(256, 1500, macIn), out: channel.New(256, 1500, macOut)}
	l.n = nodekit.ChannelNode(t, "lsr.conf", conf, nil, map[string]*channel.Endpoint{"in0": l.in, "out0": l.out})
	if resolve {
		nodekit.StaticNeighbor(t, l.n, "in0", [4]byte{10, 1, 0, 2}, macPrev)
		nodekit.StaticNeighbor(t, l.n, "out0", [4]byte{10, 2, 0, 2}, macNext)
	}
	return l
}

// ipv4UDP returns an IPv4 UDP packet 10.1.0.2:1234 -> 10.9.9.9:5678 with
// the given TTL and a zero payload of size bytes, checksums valid
// (mplstest.UDP: the same bytes gopacket serializes).
func ipv4UDP(t testing.TB, ttl uint8, size int) []byte {
	t.Helper()
	return mplstest.UDP{Src: netip.MustParseAddrPort("10.1.0.2:1234"), Dst: netip.MustParseAddrPort("10.9.9.9:5678"),
		TTL: ttl, Payload: make([]byte, size)}.IPv4()
}

// labelled returns an MPLS (0x8847) Ethernet frame to in0 carrying the
// labels (outermost first, S on the last, TTL ttl) over payload.
func labelled(labels []uint32, ttl uint8, payload []byte) []byte {
	ls := make([]mpls.Label, len(labels))
	for i, l := range labels {
		ls[i] = mpls.Label(l)
	}
	return mplstest.Frame{Dst: macIn, Src: macPrev, EtherType: mplstest.EthertypeMPLS, Labels: mplstest.Stack(ttl, ls...), Payload: payload}.Bytes()
}

func inject(ep *channel.Endpoint, frame []byte) {
	pkt := gstack.NewPacketBuffer(gstack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
	ep.InjectInbound(0, pkt)
	pkt.DecRef()
}

// readFrame returns the next frame written to ep, or nil after 2 s.
func readFrame(t testing.TB, ep *channel.Endpoint) []byte {
	t.Helper()
	return mplstest.ReadFrame(ep, 2*time.Second)
}

func TestReload(t *testing.T) {
	l := newLSR(t, lsrConf, true)
	tests := []struct {
		name        string
		conf        string
		wantErr     string // prefix; "" = accepted
		wantRestart bool
	}{
		{"more label routes", lsrConf + "-f mpls route add 103 as to 400 via inet 10.2.0.2\n", "", false},
		{"link mtu", strings.Replace(lsrConf, "out0 type afpacket", "out0 type afpacket mtu 1400", 1), "lsr.conf:3:1: link out0 changed: a restart is needed", true},
		{"address", strings.Replace(lsrConf, "10.1.0.1/24", "10.1.0.5/24", 1), "lsr.conf:4:1: address 10.1.0.5/24 changed: a restart is needed", true},
		{"sysctl", lsrConf + "sysctl net.mpls.ip_ttl_propagate=0\n", "lsr.conf:9:1: a sysctl changed: a restart is needed", true},
		{"address on lo", lsrConf + "addr add 10.9.9.9/32 dev lo\n", "lsr.conf:9:1: address 10.9.9.9/32 changed: a restart is needed", true},
		{"subnet on lo", lsrConf + "addr add 10.9.9.0/24 dev lo\n", "lsr.conf:9:10: an address on lo must be a host address: 10.9.9.0/32", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse("lsr.conf", strings.NewReader(tc.conf))
			if err != nil {
				t.Fatal(err)
			}
			err = l.n.Reload(cfg)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want %s...", err, tc.wantErr)
			}
			if got := errors.Is(err, node.ErrRestartNeeded); got != tc.wantRestart {
				t.Errorf("got errors.Is(err, ErrRestartNeeded) = %v, want %v", got, tc.wantRestart)
			}
		})
	}
	// The accepted reload stays: label 103 swaps to 400.
	inject(l.in, labelled([]uint32{103}, 64, ipv4UDP(t, 64, 10)))
	f := readFrame(t, l.out)
	if f == nil || binary.BigEndian.Uint32(f[14:])>>12 != 400 {
		t.Errorf("after the rejected reloads, label 103 was not swapped to 400: %x", f)
	}
}

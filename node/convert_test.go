package node_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/nodekit"
	"github.com/mplsnode/mplsnode/internal/testkit/tshark"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
)

// TestConfigTTLModel starts a host node from a config with each setting of
// the sysctls net.mpls.ip_ttl_propagate and net.mpls.default_ttl and reads
// the label TTL of its first labelled frame (a TCP SYN towards a route
// `encap mpls 100`) off the link: the IP TTL 64 with propagation on (the
// default, RFC 3443 uniform model), default_ttl (255 unless set) with it off
// (pipe), as Linux's sysctls mean (Documentation/networking/mpls-sysctl).
// The IP TTL is 64 either way. tshark decodes the frame where installed.
//
// Checked by planting the bug: with the line of node/convert.go that maps
// ip_ttl_propagate=0 to mpls.TTLPipe deleted, both pipe cases fail with
// label TTL 64.
func TestConfigTTLModel(t *testing.T) {
	for _, c := range []struct {
		sysctl string
		want   uint8
	}{
		{"", 64},
		{"sysctl -w net.mpls.ip_ttl_propagate=1\nsysctl -w net.mpls.default_ttl=200\n", 64},
		{"sysctl -w net.mpls.ip_ttl_propagate=0\n", 255},
		{"sysctl -w net.mpls.ip_ttl_propagate=0\nsysctl -w net.mpls.default_ttl=200\n", 200},
	} {
		name := strings.NewReplacer("sysctl -w net.mpls.", "", "\n", ";").Replace(c.sysctl)
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			frame := firstLabelledFrame(t, `link add v0 type afpacket
addr add 10.0.0.1/24 dev v0
route add 10.9.9.9/32 encap mpls 100 via inet 10.0.0.2
`+c.sysctl)
			const ipOff = header.EthernetMinimumSize + 4
			if len(frame) < ipOff+header.IPv4MinimumSize || header.Ethernet(frame).Type() != 0x8847 {
				t.Fatalf("first frame is not labelled IPv4: %x", frame)
			}
			entry := frame[header.EthernetMinimumSize:ipOff]
			label, bottom, ttl := uint32(entry[0])<<12|uint32(entry[1])<<4|uint32(entry[2])>>4, entry[2]&1 == 1, entry[3]
			if label != 100 || !bottom || ttl != c.want {
				t.Errorf("got label %d S=%v TTL %d, want label 100 S=true TTL %d", label, bottom, ttl, c.want)
			}
			if got := header.IPv4(frame[ipOff:]).TTL(); got != 64 {
				t.Errorf("got IP TTL %d, want 64", got)
			}
			if !tshark.Installed() {
				return
			}
			rows := tshark.Rows(t, tshark.WritePcap(t, 1 /* LINKTYPE_ETHERNET */, [][]byte{frame}), "mpls.label", "mpls.ttl", "ip.ttl", "tcp.flags.syn")
			if want := fmt.Sprintf("100\t%d\t64\t1", c.want); len(rows) != 1 || rows[0] != want {
				t.Errorf("tshark: got mpls.label, mpls.ttl, ip.ttl, tcp.flags.syn %q, want %q", rows, want)
			}
		})
	}
}

// firstLabelledFrame starts a node from conf on an in-process link v0
// (next hop 10.0.0.2 resolved statically), dials 10.9.9.9:80 and returns
// the first MPLS frame the node writes; it fails the test after 10 s
// without one.
func firstLabelledFrame(t *testing.T, conf string) []byte {
	t.Helper()
	link := channel.New(16, 1500, tcpip.LinkAddress("\x02\x00\x00\x00\x00\x01"))
	n := nodekit.ChannelNode(t, "host.conf", conf, nil, map[string]*channel.Endpoint{"v0": link})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	nodekit.StaticNeighbor(t, n, "v0", [4]byte{10, 0, 0, 2}, tcpip.LinkAddress("\x02\x00\x00\x00\x00\x02"))
	go n.Stack().DialContext(ctx, "tcp", "10.9.9.9:80") // never answered: only its SYN matters
	var seen int
	for {
		pkt := link.ReadContext(ctx)
		if pkt == nil {
			t.Fatalf("no labelled frame within 10 s (%d other frames); stats %+v", seen, n.Stats())
		}
		v := pkt.ToView()
		frame := append([]byte(nil), v.AsSlice()...)
		v.Release()
		pkt.DecRef()
		if len(frame) >= header.EthernetMinimumSize && header.Ethernet(frame).Type() == 0x8847 {
			return frame
		}
		seen++
	}
}

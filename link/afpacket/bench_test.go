package afpacket_test

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/dispatch"
	"github.com/mplsnode/mplsnode/internal/testkit/linktest"
	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/link/afpacket"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/link/fdbased"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// BenchmarkAFPacketTCP measures a gVisor TCP stream to the kernel over a veth
// through this package, and through gVisor's stock fdbased endpoint on an
// AF_PACKET socket (RecvMMsg dispatch) for comparison.
func BenchmarkAFPacketTCP(b *testing.B) {
	for _, link := range []string{"afpacket-mmsg", "afpacket-ring", "fdbased"} {
		for _, dir := range []string{"tx", "rx"} {
			b.Run(link+"/"+dir, func(b *testing.B) {
				tp := newTopo(b)
				var lower stack.LinkEndpoint
				raw := false
				if link != "fdbased" {
					mode, _ := afpacket.ParseMode(link[len("afpacket-"):])
					ep, err := openIn(b, tp.a, afpacket.Options{Interface: tp.va, RXChecksumOffload: true, Mode: mode})
					if err != nil {
						b.Fatal(err)
					}
					lower = ep
				} else {
					lower = newFDBased(b, tp.a, tp.va)
					raw = true
				}
				s := linktest.NewStack(b, lower, gvisorAddr, raw)
				ln := linktest.ListenIn(b, tp.b, kernelAddr.Addr().String()+":5001")
				linktest.BenchStream(b, s, ln, netip.AddrPortFrom(kernelAddr.Addr(), 5001), dir)
			})
		}
	}
}

// newFDBased opens an AF_PACKET socket on ifname in ns and wraps it in
// gVisor's fdbased endpoint (which builds the Ethernet header itself).
func newFDBased(b *testing.B, ns *netns.NS, ifname string) stack.LinkEndpoint {
	var fd int
	var ifi *net.Interface
	err := ns.Run(func() (err error) {
		if ifi, err = net.InterfaceByName(ifname); err != nil {
			return err
		}
		proto := int(htons(unix.ETH_P_ALL))
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto); err != nil {
			return err
		}
		// Same socket setup as ours: no echo of our own frames, 4 MiB buffer.
		if err = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
			return err
		}
		if err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, afpacket.DefaultReceiveBufferSize); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index})
	})
	if err != nil {
		b.Fatalf("packet socket: %v", err)
	}
	b.Cleanup(func() { unix.Close(fd) })
	ep, err := fdbased.New(&fdbased.Options{
		FDs:                []int{fd},
		MTU:                uint32(ifi.MTU),
		EthernetHeader:     true,
		Address:            tcpip.LinkAddress(ifi.HardwareAddr),
		PacketDispatchMode: fdbased.RecvMMsg,
		// The veth peer's frames carry partial checksums; fdbased has no
		// per-frame status, so it must trust all of them.
		RXChecksumOffload: true,
	})
	if err != nil {
		b.Fatalf("fdbased.New: %v", err)
	}
	return ep
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// BenchmarkFrames measures one endpoint, in mmsg or ring mode (with
// PACKET_QDISC_BYPASS too, sending; with Options.BusyPoll, adaptive or not,
// receiving), sending
// ("tx") or receiving ("rx") 1000-byte frames to or from a peer endpoint
// in mmsg mode across a veth; an op is one frame. The frames sent are
// built once and written again and again, so the allocations reported
// are the two endpoints' own per frame: 0 on the ring paths.
func BenchmarkFrames(b *testing.B) {
	for _, v := range []struct {
		name   string
		mode   afpacket.Mode
		bypass bool
		busy   time.Duration
		adapt  bool
	}{{"mmsg", afpacket.ModeMMsg, false, 0, false}, {"ring", afpacket.ModeRing, false, 0, false}, {"ring-qdiscbypass", afpacket.ModeRing, true, 0, false},
		{"ring-busypoll", afpacket.ModeRing, false, 50 * time.Microsecond, false},
		{"ring-busypoll-adaptive", afpacket.ModeRing, false, 100 * time.Microsecond, true}} {
		mode := v.mode
		for _, dir := range []string{"tx", "rx"} {
			if v.bypass && dir == "rx" || v.busy != 0 && dir == "tx" {
				continue // PACKET_QDISC_BYPASS changes sending only, BusyPoll receiving
			}
			b.Run(v.name+"/"+dir, func(b *testing.B) {
				tp := newTopo(b)
				tp.a.MustExec("sysctl", "-qw", "net.ipv6.conf."+tp.va+".disable_ipv6=1")
				tp.b.MustExec("sysctl", "-qw", "net.ipv6.conf."+tp.vb+".disable_ipv6=1")
				ours, err := openIn(b, tp.a, afpacket.Options{Interface: tp.va, Mode: mode, QdiscBypass: v.bypass, BusyPoll: v.busy, BusyPollAdaptive: v.adapt})
				if err != nil {
					b.Fatal(err)
				}
				defer func() { ours.Close(); ours.Wait() }()
				peer, err := openIn(b, tp.b, afpacket.Options{Interface: tp.vb, Mode: afpacket.ModeMMsg})
				if err != nil {
					b.Fatal(err)
				}
				defer func() { peer.Close(); peer.Wait() }()
				from, to := ours, peer
				if dir == "rx" {
					from, to = peer, ours
				}
				var count dispatch.Counter
				to.Attach(&count)
				var l stack.PacketBufferList
				f := seqFrame(to.LinkAddress(), from.LinkAddress(), 1, 1000)
				for i := 0; i < 64; i++ {
					l.PushBack(stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(f)}))
				}
				defer l.DecRef()
				from.WritePackets(l) // warm up
				b.SetBytes(1000)
				b.ReportAllocs()
				b.ResetTimer()
				for sent := 0; sent < b.N; sent += 64 {
					if _, err := from.WritePackets(l); err != nil {
						b.Fatal(err)
					}
				}
				deadline := time.Now().Add(5 * time.Second)
				for count.Frames.Load()+to.Stats().RXDrops < uint64(b.N) && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				b.StopTimer()
				st := to.Stats()
				b.ReportMetric(float64(st.RXDrops)/float64(b.N), "drops/op")
			})
		}
	}
}

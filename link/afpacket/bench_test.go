package afpacket_test

import (
	"context"
	"io"
	"net"
	"net/netip"
	"testing"

	"github.com/mplsnode/mplsnode/internal/netns"
	"github.com/mplsnode/mplsnode/link/afpacket"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/link/fdbased"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// benchChunk is the bytes moved per benchmark op.
const benchChunk = 1 << 20

// benchStream measures one TCP stream between a gVisor client on s and the
// kernel listener ln: "tx" sends from gVisor to the kernel, "rx" the other
// way. The time includes draining the last bytes at the receiver.
func benchStream(b *testing.B, s *stack.Stack, ln net.Listener, dst netip.AddrPort, dir string) {
	srvDone := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			srvDone <- err
			return
		}
		defer c.Close()
		if dir == "tx" {
			_, err = io.Copy(io.Discard, c)
		} else {
			_, err = io.Copy(c, io.LimitReader(zeros{}, int64(b.N)*benchChunk))
		}
		srvDone <- err
	}()
	c, err := gonet.DialContextTCP(context.Background(), s, tcpip.FullAddress{
		NIC: nicID, Addr: tcpip.AddrFrom4(dst.Addr().As4()), Port: dst.Port(),
	}, ipv4.ProtocolNumber)
	if err != nil {
		b.Fatalf("dial: %v", err)
	}
	defer c.Close()
	buf := make([]byte, benchChunk)
	b.SetBytes(benchChunk)
	b.ReportAllocs()
	b.ResetTimer()
	if dir == "tx" {
		for i := 0; i < b.N; i++ {
			if _, err := c.Write(buf); err != nil {
				b.Fatalf("write: %v", err)
			}
		}
		c.CloseWrite()
		if err := <-srvDone; err != nil {
			b.Fatalf("server: %v", err)
		}
	} else {
		if n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{c}, buf); err != nil || n != int64(b.N)*benchChunk {
			b.Fatalf("read: got %d bytes, err %v; want %d", n, err, int64(b.N)*benchChunk)
		}
		<-srvDone
	}
	b.StopTimer()
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// BenchmarkAFPacketTCP measures a gVisor TCP stream to the kernel over a veth
// through this package, and through gVisor's stock fdbased endpoint on an
// AF_PACKET socket (RecvMMsg dispatch) for comparison.
func BenchmarkAFPacketTCP(b *testing.B) {
	for _, link := range []string{"afpacket", "fdbased"} {
		for _, dir := range []string{"tx", "rx"} {
			b.Run(link+"/"+dir, func(b *testing.B) {
				tp := newTopo(b)
				var lower stack.LinkEndpoint
				raw := false
				if link == "afpacket" {
					ep, err := openIn(b, tp.a, afpacket.Options{Interface: tp.va, RXChecksumOffload: true})
					if err != nil {
						b.Fatal(err)
					}
					lower = ep
				} else {
					lower = newFDBased(b, tp.a, tp.va)
					raw = true
				}
				s := newStack(b, lower, gvisorAddr, raw)
				ln := listenIn(b, tp.b, kernelAddr.Addr().String()+":5001")
				benchStream(b, s, ln, netip.AddrPortFrom(kernelAddr.Addr(), 5001), dir)
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

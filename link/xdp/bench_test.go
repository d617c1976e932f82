package xdp_test

import (
	"net"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/dispatch"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/mplsnode/mplsnode/link/xdp"
)

// testFrame is a 64-byte Ethernet frame (an IPv4/UDP packet) from src to
// dst.
func testFrame(src, dst net.HardwareAddr) []byte {
	f := make([]byte, 64)
	copy(f, dst)
	copy(f[6:], src)
	f[12], f[13] = 0x08, 0x00
	ip := header.IPv4(f[14:])
	ip.Encode(&header.IPv4Fields{TotalLength: 50, TTL: 64, Protocol: uint8(header.UDPProtocolNumber),
		SrcAddr: tcpip.AddrFrom4([4]byte{10, 99, 3, 2}), DstAddr: tcpip.AddrFrom4([4]byte{10, 99, 3, 1})})
	ip.SetChecksum(^ip.CalculateChecksum())
	return f
}

// BenchmarkRX has the kernel in ns b send 64-byte frames into the veth
// (one write each on a packet socket) and measures the AF_XDP endpoint's
// receive path up to a dispatcher: allocs/op is per frame (0 is the
// target; the sender makes none).
func BenchmarkRX(b *testing.B) {
	tp := newTopo(b, xdp.Options{})
	d := &dispatch.Counter{}
	tp.ep.Attach(d)
	var fd int
	var frame []byte
	if err := tp.b.Run(func() error {
		ifb, err := net.InterfaceByName(tp.vb)
		if err != nil {
			return err
		}
		frame = testFrame(ifb.HardwareAddr, net.HardwareAddr(tp.ep.LinkAddress()))
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifb.Index})
	}); err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	send := func(n uint64) {
		deadline := time.Now().Add(time.Minute)
		for d.Frames.Load() < n {
			if time.Now().After(deadline) {
				b.Fatalf("only %d of %d frames arrived: %+v", d.Frames.Load(), n, tp.ep.Stats())
			}
			for i := 0; i < 64; i++ {
				unix.Write(fd, frame)
			}
		}
	}
	send(1000) // warm the pools
	base := d.Frames.Load()
	b.ReportAllocs()
	b.ResetTimer()
	send(base + uint64(b.N))
	b.StopTimer()
	b.ReportMetric(float64(d.Frames.Load()-base)/float64(b.N), "frames/op")
}

// BenchmarkTX writes batches of 64 64-byte frames: allocs/op is per batch
// (0 is the target).
func BenchmarkTX(b *testing.B) {
	tp := newTopo(b, xdp.Options{})
	frame := testFrame(net.HardwareAddr(tp.ep.LinkAddress()), net.HardwareAddr{2, 0, 0, 0, 0, 1})
	var l stack.PacketBufferList
	for i := 0; i < 64; i++ {
		l.PushBack(stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)}))
	}
	defer l.DecRef()
	b.ReportAllocs()
	b.SetBytes(64 * 64)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := tp.ep.WritePackets(l); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	st := tp.ep.Stats()
	b.ReportMetric(float64(st.TXDropped)/float64(b.N*64), "dropped/frame")
}

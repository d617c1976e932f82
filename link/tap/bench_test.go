package tap_test

import (
	"context"
	"io"
	"net"
	"net/netip"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// benchChunk is the bytes moved per benchmark op.
const benchChunk = 1 << 20

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

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

// BenchmarkTAPTCP measures a gVisor TCP stream to the kernel through the TAP,
// a bridge and a veth.
func BenchmarkTAPTCP(b *testing.B) {
	for _, dir := range []string{"tx", "rx"} {
		b.Run(dir, func(b *testing.B) {
			tp := newTapTopo(b)
			s := newStack(b, tp.ep, gvisorAddr, false)
			ln := listenIn(b, tp.b, kernelAddr.Addr().String()+":5002")
			benchStream(b, s, ln, netip.AddrPortFrom(kernelAddr.Addr(), 5002), dir)
		})
	}
}

package udp_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/link/udp"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/stack"
)

// freePorts returns n UDP ports free on addr now.
func freePorts(t *testing.T, addr string, n int) []uint16 {
	t.Helper()
	var ps []uint16
	var cs []*net.UDPConn
	for range n {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(addr)})
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
		ps = append(ps, uint16(c.LocalAddr().(*net.UDPAddr).Port))
	}
	for _, c := range cs {
		c.Close()
	}
	return ps
}

// udpPair returns two stacks joined by a udp link over loopback: the
// client pushes label 100 towards 10.10.10.10, the server pops it.
func udpPair(t *testing.T, lo string, opts udp.Options) (client, server *stack.Stack) {
	t.Helper()
	ps := freePorts(t, lo, 2)
	ip := netip.MustParseAddr(lo)
	cl, sv := netip.AddrPortFrom(ip, ps[0]), netip.AddrPortFrom(ip, ps[1])
	so, co := opts, opts
	so.Local, so.Remote = sv, cl
	co.Local, co.Remote = cl, sv
	var inner4 = !ip.Is6()
	srvAddr, cliAddr, dst := "172.16.20.21/24", "172.16.20.20/24", "10.10.10.10/32"
	if !inner4 {
		srvAddr, cliAddr, dst = "fd00:20::21/64", "fd00:20::20/64", "fd00:10::10/128"
	}
	var err error
	server, err = stack.New(stack.Config{
		Links: []stack.Link{{Name: "mus0", Kind: stack.LinkUDP, UDP: so}},
		Addresses: []stack.Address{
			{Link: "mus0", Prefix: netip.MustParsePrefix(srvAddr)},
			{Link: "mus0", Prefix: netip.MustParsePrefix(dst)},
		},
		ILM: []mpls.ILMEntry{{Label: 100, Action: mpls.ILMPopLocal}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	client, err = stack.New(stack.Config{
		Links:     []stack.Link{{Name: "muc0", Kind: stack.LinkUDP, UDP: co}},
		Addresses: []stack.Address{{Link: "muc0", Prefix: netip.MustParsePrefix(cliAddr)}},
		Routes: []stack.Route{{
			Prefix: netip.MustParsePrefix(dst),
			Via:    netip.MustParsePrefix(srvAddr).Addr(),
			Labels: []mpls.Label{100},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client, server
}

// transfer sends n random bytes from client to server's dst:5001 and
// checks them, within a deadline.
func transfer(t *testing.T, client, server *stack.Stack, dst netip.AddrPort, n int) {
	t.Helper()
	ln, err := server.ListenTCP(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan [32]byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(60 * time.Second))
		h := sha256.New()
		io.Copy(h, c)
		got <- [32]byte(h.Sum(nil))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.DialTCP(ctx, dst)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(60 * time.Second))
	data := make([]byte, n)
	rand.Read(data)
	if _, err := io.Copy(c, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	want := sha256.Sum256(data)
	select {
	case g := <-got:
		if g != want {
			t.Fatalf("received data differ from sent")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("transfer did not finish in 60 s")
	}
}

func TestStackOverUDPLoopback(t *testing.T) {
	for _, tc := range []struct {
		name, lo, dst string
	}{{"ipv4", "127.0.0.1", "10.10.10.10:5001"}, {"ipv6", "::1", "[fd00:10::10]:5001"}} {
		t.Run(tc.name, func(t *testing.T) {
			client, server := udpPair(t, tc.lo, udp.Options{})
			transfer(t, client, server, netip.MustParseAddrPort(tc.dst), 32<<20)
			t.Logf("client %+v", client.Stats().Links)
		})
	}
}

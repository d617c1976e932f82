package stack_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/link/pipe"

	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/stack"
)

// Example fetches a page over a label-switched path: the client's route to
// 10.10.10.10 pushes label 100, the server pops it. The two stacks are
// joined in-process here; in production each Link names a veth
// (LinkAFPacket) or a TAP device.
func Example() {
	clientWire, serverWire := pipe.New("\x02\x00\x00\x00\x00\x01", "\x02\x00\x00\x00\x00\x02", 1500)

	server, err := stack.New(stack.Config{
		Links: []stack.Link{{Name: "srv0", Kind: stack.LinkEndpoint, Endpoint: serverWire}},
		Addresses: []stack.Address{
			{Link: "srv0", Prefix: netip.MustParsePrefix("172.16.20.21/24")},
			{Link: "srv0", Prefix: netip.MustParsePrefix("10.10.10.10/32")},
		},
		ILM: []mpls.ILMEntry{{Label: 100, Action: mpls.ILMPopLocal}},
	})
	if err != nil {
		panic(err)
	}
	defer server.Close()
	ln, err := server.ListenTCP(netip.MustParseAddrPort("10.10.10.10:80"))
	if err != nil {
		panic(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "hello over label 100")
	})}
	go srv.Serve(ln)
	defer srv.Close()

	client, err := stack.New(stack.Config{
		Links:     []stack.Link{{Name: "cli0", Kind: stack.LinkEndpoint, Endpoint: clientWire}},
		Addresses: []stack.Address{{Link: "cli0", Prefix: netip.MustParsePrefix("172.16.20.20/24")}},
		Routes: []stack.Route{{
			Prefix: netip.MustParsePrefix("10.10.10.10/32"),
			Via:    netip.MustParseAddr("172.16.20.21"),
			Labels: []mpls.Label{100},
		}},
	})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	hc := &http.Client{Transport: &http.Transport{DialContext: client.DialContext}}
	resp, err := hc.Get("http://10.10.10.10/")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	hc.CloseIdleConnections()
	fmt.Println(string(body))
	fmt.Println("labelled packets sent:", client.Stats().Links[0].MPLS.FIBPushes > 0)
	// Output:
	// hello over label 100
	// labelled packets sent: true
}

// ExampleStack_DialContext has a stack talk to itself over its loopback,
// as a program does over a kernel's lo, and shows that a destination with
// no route fails at once, as connect(2) does.
func ExampleStack_DialContext() {
	wire, _ := pipe.New("\x02\x00\x00\x00\x00\x01", "\x02\x00\x00\x00\x00\x02", 1500)
	s, err := stack.New(stack.Config{
		Links:     []stack.Link{{Name: "eth0", Kind: stack.LinkEndpoint, Endpoint: wire}},
		Addresses: []stack.Address{{Link: "eth0", Prefix: netip.MustParsePrefix("172.16.20.20/24")}},
	})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	ln, err := s.Listen("tcp", "127.0.0.1:7")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.WriteString(c, "hello from myself")
			c.Close()
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := s.DialContext(ctx, "tcp", "127.0.0.1:7")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(c)
	c.Close()
	fmt.Println(string(body))

	_, err = s.DialContext(ctx, "tcp", "192.0.2.1:80")
	fmt.Println(err, errors.Is(err, syscall.ENETUNREACH))
	// Output:
	// hello from myself
	// dial tcp 192.0.2.1:80: connect: network is unreachable true
}

package stack_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"gvisor.dev/gvisor/pkg/tcpip/link/pipe"

	"github.com/mplsnode/mplsnode/stack"
)

// serveDNS answers the queries that reach pc until it is closed: an A
// record (svc) for server.test., no records for its other types, and
// NXDOMAIN for every other name. It is written by hand with dnsmessage,
// so the answers come from outside the code under test.
func serveDNS(t *testing.T, pc net.PacketConn) {
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(buf[:n])
		if err != nil {
			t.Errorf("DNS server: bad query: %v", err)
			continue
		}
		q, err := p.Question()
		if err != nil {
			t.Errorf("DNS server: no question: %v", err)
			continue
		}
		rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
		known := q.Name.String() == "server.test."
		if !known {
			rh.RCode = dnsmessage.RCodeNameError
		}
		b := dnsmessage.NewBuilder(nil, rh)
		b.EnableCompression()
		b.StartQuestions()
		b.Question(q)
		b.StartAnswers()
		if known && q.Type == dnsmessage.TypeA {
			b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: svc.As4()})
		}
		msg, err := b.Finish()
		if err != nil {
			t.Errorf("DNS server: build answer: %v", err)
			continue
		}
		pc.WriteTo(msg, from)
	}
}

// TestResolver checks that a stack with Config.DNS resolves names over
// itself: B runs a DNS server on its link address and an echo service
// on svc, A knows B only as its DNS server and dials "server.test:80".
// An unknown name is a *net.DNSError with IsNotFound. Planted bug: a
// Resolver dialing the server Go read from /etc/resolv.conf (the address
// argument) instead of Config.DNS fails the lookup (no route, or no
// server, on the stack).
func TestResolver(t *testing.T) {
	la, lb := pipe.New(macA, macB, 1500)
	b, err := stack.New(stack.Config{
		Links: []stack.Link{{Name: "b0", Kind: stack.LinkEndpoint, Endpoint: lb}},
		Addresses: []stack.Address{
			{Link: "b0", Prefix: netip.PrefixFrom(ipB, 24)},
			{Link: "b0", Prefix: netip.PrefixFrom(svc, 32)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a, err := stack.New(stack.Config{
		Links:     []stack.Link{{Name: "a0", Kind: stack.LinkEndpoint, Endpoint: la}},
		Addresses: []stack.Address{{Link: "a0", Prefix: netip.PrefixFrom(ipA, 24)}},
		Routes:    []stack.Route{{Prefix: netip.PrefixFrom(svc, 32), Via: ipB}},
		DNS:       []netip.Addr{ipB},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	pc, err := b.ListenUDP(netip.AddrPortFrom(ipB, 53))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go serveDNS(t, pc)
	ln, err := b.ListenTCP(netip.AddrPortFrom(svc, 80))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.WriteString(c, "hello by name")
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := a.Resolver().LookupNetIP(ctx, "ip4", "server.test")
	if err != nil || !slices.Equal(got, []netip.Addr{svc}) {
		t.Fatalf("LookupNetIP(server.test) = %v, %v; want [%s]", got, err, svc)
	}
	c, err := a.DialContext(ctx, "tcp", "server.test:80")
	if err != nil {
		t.Fatalf("DialContext(server.test:80) = %v", err)
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	c.SetDeadline(deadline)
	body, err := io.ReadAll(c)
	if err != nil || string(body) != "hello by name" {
		t.Errorf("read = %q, %v; want \"hello by name\"", body, err)
	}

	_, err = a.DialContext(ctx, "tcp", "nosuch.test:80")
	var de *net.DNSError
	if !errors.As(err, &de) || !de.IsNotFound {
		t.Errorf("DialContext(nosuch.test:80) = %v, want a *net.DNSError with IsNotFound", err)
	}
}

// TestResolverNoServers checks that a stack without Config.DNS says so
// when asked for a name, rather than asking the host's servers.
func TestResolverNoServers(t *testing.T) {
	s := lone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := s.DialContext(ctx, "tcp", "server.test:80")
	want := "dial tcp: lookup server.test: dial udp: no DNS servers (stack.Config.DNS is empty)"
	if err == nil || err.Error() != want {
		t.Fatalf("DialContext(server.test:80) with no DNS servers = %v, want %q", err, want)
	}
}

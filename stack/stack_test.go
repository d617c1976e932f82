package stack_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/link/pipe"

	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/stack"
)

var (
	macA = tcpip.LinkAddress("\x02\x00\x00\x00\x01\x0a")
	macB = tcpip.LinkAddress("\x02\x00\x00\x00\x01\x0b")
	ipA  = netip.MustParseAddr("172.16.20.20")
	ipB  = netip.MustParseAddr("172.16.20.21")
	// svc is B's service address behind the LSP (like the seed's
	// 10.10.10.10).
	svc = netip.MustParseAddr("10.10.10.10")
)

// pair builds two stacks joined by an in-process wire. A reaches svc over
// an LSP with labels; B owns svc (on the same link, as a /32) and pops
// labels locally. With no labels, A routes to svc as plain IP.
func pair(t *testing.T, labels []mpls.Label) (a, b *stack.Stack) {
	t.Helper()
	la, lb := pipe.New(macA, macB, 1500)
	var ilm []mpls.ILMEntry
	for _, l := range labels {
		ilm = append(ilm, mpls.ILMEntry{Label: l, Action: mpls.ILMPopLocal})
	}
	var err error
	b, err = stack.New(stack.Config{
		Links: []stack.Link{{Name: "b0", Kind: stack.LinkEndpoint, Endpoint: lb}},
		Addresses: []stack.Address{
			{Link: "b0", Prefix: netip.PrefixFrom(ipB, 24)},
			{Link: "b0", Prefix: netip.PrefixFrom(svc, 32)},
		},
		ILM: ilm,
	})
	if err != nil {
		t.Fatalf("stack.New(B) = %v", err)
	}
	t.Cleanup(func() { b.Close() })
	a, err = stack.New(stack.Config{
		Links:     []stack.Link{{Name: "a0", Kind: stack.LinkEndpoint, Endpoint: la}},
		Addresses: []stack.Address{{Link: "a0", Prefix: netip.PrefixFrom(ipA, 24)}},
		Routes:    []stack.Route{{Prefix: netip.PrefixFrom(svc, 32), Via: ipB, Labels: labels}},
	})
	if err != nil {
		t.Fatalf("stack.New(A) = %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return a, b
}

// transfer sends n random bytes from a to b's listener and checks the
// SHA-256 on both ends.
func transfer(t *testing.T, a, b *stack.Stack, n int) {
	t.Helper()
	ln, err := b.ListenTCP(netip.AddrPortFrom(svc, 5001))
	if err != nil {
		t.Fatalf("ListenTCP = %v", err)
	}
	defer ln.Close()
	got := make(chan [32]byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- [32]byte{}
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		h := sha256.New()
		io.Copy(h, c)
		var sum [32]byte
		copy(sum[:], h.Sum(nil))
		got <- sum
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := a.DialContext(ctx, "tcp", netip.AddrPortFrom(svc, 5001).String())
	if err != nil {
		t.Fatalf("DialContext = %v", err)
	}
	h := sha256.New()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if w, err := io.CopyN(io.MultiWriter(c, h), rand.Reader, int64(n)); err != nil {
		t.Fatalf("write after %d of %d bytes: %v", w, n, err)
	}
	c.Close()
	var want [32]byte
	copy(want[:], h.Sum(nil))
	select {
	case sum := <-got:
		if sum != want {
			t.Fatalf("received SHA-256 %x, sent %x", sum, want)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("receiver did not finish")
	}
}

func TestTransferOverLSP(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels []mpls.Label
	}{
		{"plain", nil},
		{"1label", []mpls.Label{100}},
		{"3labels", []mpls.Label{100, 200, 300}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := pair(t, tc.labels)
			transfer(t, a, b, 8<<20)
			st := a.Stats()
			if len(st.Links) != 1 {
				t.Fatalf("len(Stats().Links) = %d, want 1", len(st.Links))
			}
			hits := st.Links[0].MPLS.FIBPushes
			if len(tc.labels) > 0 && hits == 0 {
				t.Errorf("FIB pushes = 0 on a labelled route")
			}
			if len(tc.labels) == 0 && hits != 0 {
				t.Errorf("FIB pushes = %d on a plain route, want 0", hits)
			}
			if bst := b.Stats(); len(tc.labels) > 0 && bst.Links[0].MPLS.ILMHits == 0 {
				t.Errorf("B's ILM hits = 0, want > 0")
			}
		})
	}
}

func TestDialRefused(t *testing.T) {
	a, _ := pair(t, []mpls.Label{100})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := a.DialContext(ctx, "tcp", "10.10.10.10:9")
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("DialContext to a closed port = %v, want ECONNREFUSED", err)
	}
	var op *net.OpError
	if !errors.As(err, &op) {
		t.Fatalf("error %T is not a *net.OpError", err)
	}
}

func TestDialBadAddress(t *testing.T) {
	a, _ := pair(t, nil)
	for _, addr := range []string{"example.com:80", "10.10.10.10", "10.10.10.10:99999"} {
		if _, err := a.DialContext(context.Background(), "tcp", addr); err == nil {
			t.Errorf("DialContext(%q) succeeded, want an error", addr)
		}
	}
	if _, err := a.DialContext(context.Background(), "tcp6", "10.10.10.10:80"); err == nil {
		t.Errorf("DialContext(tcp6, IPv4 address) succeeded, want an error")
	}
}

// TestRoutesChangeUnderTraffic swaps the route between labelled and plain
// and back while a connection runs: the connection survives, bytes intact.
func TestRoutesChangeUnderTraffic(t *testing.T) {
	a, b := pair(t, []mpls.Label{100})
	// B must also accept label 200 for the second route.
	if err := b.SetILM([]mpls.ILMEntry{
		{Label: 100, Action: mpls.ILMPopLocal},
		{Label: 200, Action: mpls.ILMPopLocal},
	}); err != nil {
		t.Fatalf("SetILM = %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		dst := netip.PrefixFrom(svc, 32)
		for i := 0; i < 20; i++ {
			var labels []mpls.Label
			switch i % 3 {
			case 0:
				labels = []mpls.Label{200}
			case 1:
				labels = nil
			case 2:
				labels = []mpls.Label{100}
			}
			if err := a.AddRoute(stack.Route{Prefix: dst, Via: ipB, Labels: labels}); err != nil {
				t.Errorf("AddRoute = %v", err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	transfer(t, a, b, 16<<20)
	<-done
}

func TestBadConfig(t *testing.T) {
	la, _ := pipe.New(macA, macB, 1500)
	base := func() stack.Config {
		return stack.Config{
			Links:     []stack.Link{{Name: "a0", Kind: stack.LinkEndpoint, Endpoint: la}},
			Addresses: []stack.Address{{Link: "a0", Prefix: netip.MustParsePrefix("172.16.20.20/24")}},
		}
	}
	for _, tc := range []struct {
		name   string
		modify func(*stack.Config)
		want   string
	}{
		{"unknown interface", func(c *stack.Config) {
			c.Links = append(c.Links, stack.Link{Name: "nosuchif0", Kind: stack.LinkAFPacket})
		}, "nosuchif0"},
		{"overlapping addresses", func(c *stack.Config) {
			c.Links = append(c.Links, stack.Link{Name: "a1", Kind: stack.LinkEndpoint, Endpoint: func() *pipe.Endpoint { x, _ := pipe.New(macA, macB, 1500); return x }()})
			c.Addresses = append(c.Addresses, stack.Address{Link: "a1", Prefix: netip.MustParsePrefix("172.16.20.30/24")})
		}, "overlaps"},
		{"label 3 in a route", func(c *stack.Config) {
			c.Routes = []stack.Route{{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Via: ipB, Labels: []mpls.Label{3}}}
		}, "3"},
		{"stack deeper than the maximum", func(c *stack.Config) {
			c.Routes = []stack.Route{{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Via: ipB, Labels: make([]mpls.Label, 17)}}
			for i := range c.Routes[0].Labels {
				c.Routes[0].Labels[i] = mpls.Label(100 + i)
			}
		}, "17"},
		{"next hop off-link", func(c *stack.Config) {
			c.Routes = []stack.Route{{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Via: netip.MustParseAddr("192.0.2.1")}}
		}, "192.0.2.1"},
		{"route to an unknown link", func(c *stack.Config) {
			c.Routes = []stack.Route{{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Link: "zz9"}}
		}, "zz9"},
		{"mtu above link MTU less labels", func(c *stack.Config) {
			c.Routes = []stack.Route{{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Via: ipB, Labels: []mpls.Label{100}, MTU: 1500}}
		}, "at most 1496"},
		{"host bits in a prefix", func(c *stack.Config) {
			c.Routes = []stack.Route{{Prefix: netip.MustParsePrefix("10.1.2.3/8"), Via: ipB}}
		}, "10.0.0.0/8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			tc.modify(&cfg)
			s, err := stack.New(cfg)
			if err == nil {
				s.Close()
				t.Fatalf("stack.New succeeded, want an error mentioning %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("stack.New error = %q, want it to mention %q", err, tc.want)
			}
		})
	}
}

// TestCloseReleasesGoroutines builds and closes stacks with live
// connections and checks the goroutine count returns to where it was.
func TestCloseReleasesGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	for i := 0; i < 3; i++ {
		la, lb := pipe.New(macA, macB, 1500)
		b, err := stack.New(stack.Config{
			Links:     []stack.Link{{Name: "b0", Kind: stack.LinkEndpoint, Endpoint: lb}},
			Addresses: []stack.Address{{Link: "b0", Prefix: netip.PrefixFrom(ipB, 24)}},
		})
		if err != nil {
			t.Fatal(err)
		}
		a, err := stack.New(stack.Config{
			Links:     []stack.Link{{Name: "a0", Kind: stack.LinkEndpoint, Endpoint: la}},
			Addresses: []stack.Address{{Link: "a0", Prefix: netip.PrefixFrom(ipA, 24)}},
		})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := b.ListenTCP(netip.AddrPortFrom(ipB, 80))
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			c, err := ln.Accept()
			if err == nil {
				c.SetDeadline(time.Now().Add(10 * time.Second))
				io.Copy(io.Discard, c)
			}
		}()
		c, err := a.DialTCP(context.Background(), netip.AddrPortFrom(ipB, 80))
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write(bytes.Repeat([]byte("x"), 1<<16))
		c.Close()
		ln.Close()
		a.Close()
		b.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("goroutines after Close = %d, before = %d\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// TestHTTPOverLSP plugs DialContext into http.Transport.
func TestHTTPOverLSP(t *testing.T) {
	a, b := pair(t, []mpls.Label{100})
	ln, err := b.ListenTCP(netip.AddrPortFrom(svc, 80))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello over MPLS")
	})}
	go srv.Serve(ln)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{DialContext: a.DialContext}, Timeout: 20 * time.Second}
	resp, err := client.Get("http://10.10.10.10/")
	if err != nil {
		t.Fatalf("GET = %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "hello over MPLS" {
		t.Fatalf("body = %q, want %q", body, "hello over MPLS")
	}
	client.CloseIdleConnections()
}

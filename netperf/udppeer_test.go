package netperf

import (
	"net"
	"testing"
	"time"
)

// TestUDPPeerAcceptsAnySource: a netserver answers UDP_RR from its route's
// source address, which need not be the address we sent to (make demo:
// requests to 10.10.10.10 over the LSP, answers from 172.16.21.22). Our
// UDP data socket is unconnected, as stock netperf's, so the answer counts;
// a connected socket (the first version) dropped it and UDP_RR printed 0.
// Here the answer comes from another port of the server's host.
func TestUDPPeerAcceptsAnySource(t *testing.T) {
	srv, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	other, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	cfg := NewConfig("127.0.0.1", UDPRR)
	c, err := udpPeerConn(&cfg, "udp", "127.0.0.1", uint32(srv.LocalAddr().(*net.UDPAddr).Port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_ = srv.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	_, from, err := srv.ReadFrom(buf)
	if err != nil {
		t.Fatalf("server read: %v", err)
	}
	if _, err := other.WriteTo([]byte("r"), from); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(buf); err != nil || n != 1 || buf[0] != 'r' {
		t.Fatalf("got %d bytes %q, %v; want the answer from the other address", n, buf[:n], err)
	}
}

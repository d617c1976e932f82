// Command udpfetch fetches a web page over an MPLS label-switched path
// whose first hop is reached by MPLS in UDP (RFC 7510): mplsnode's
// userspace stack pushes the labels and sends the labelled packets in UDP
// datagrams from an ordinary socket to the first LSR (an mplsnode udp
// link, or any RFC 7510 peer). It needs no root and no capability.
//
// Example (as any user; the LSR at 192.0.2.21 receives MPLS-in-UDP on
// port 6635, sends ours back to 192.0.2.20:16635, and pops label 100
// towards 10.10.10.10):
//
//	udpfetch -local 192.0.2.20:16635 -remote 192.0.2.21:6635 \
//	    -addr 172.16.20.20/24 -via 172.16.20.21 -labels 100 http://10.10.10.10/
//
// -addr and -via are the stack's own address and the LSR's on the link:
// the link is point to point, so they only need to share a subnet.
package main

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/mplsnode/mplsnode/examples/internal/webfetch"
	"github.com/mplsnode/mplsnode/link/udp"
	"github.com/mplsnode/mplsnode/stack"
)

func main() {
	local := flag.String("local", "", "our UDP address and port, e.g. 192.0.2.20:16635 (required; a port >= 1024 needs no privilege)")
	remote := flag.String("remote", "", "the first LSR's UDP address and port, e.g. 192.0.2.21:6635 (required)")
	addr := flag.String("addr", "", "our address on the link, with prefix length, e.g. 172.16.20.20/24 (required)")
	via := flag.String("via", "", "next hop (the first LSR) on the link (required)")
	labels := flag.String("labels", "", "label stack to push, outermost first, e.g. 100 or 100/200 (empty: plain IP under an explicit null)")
	timeout := flag.Duration("timeout", 30*time.Second, "overall timeout")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: udpfetch -local ADDR:PORT -remote ADDR:PORT -addr A/LEN -via NEXTHOP [-labels L1/L2] URL\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *local == "" || *remote == "" || *addr == "" || *via == "" || flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := fetch(*local, *remote, *addr, *via, *labels, flag.Arg(0), *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "udpfetch:", err)
		os.Exit(1)
	}
}

func fetch(local, remote, addr, via, labelText, rawURL string, timeout time.Duration) error {
	lo, err := netip.ParseAddrPort(local)
	if err != nil {
		return fmt.Errorf("-local: %w", err)
	}
	re, err := netip.ParseAddrPort(remote)
	if err != nil {
		return fmt.Errorf("-remote: %w", err)
	}
	args, err := webfetch.ParseArgs(addr, via, labelText, rawURL)
	if err != nil {
		return err
	}
	s, err := stack.New(stack.Config{
		Links:     []stack.Link{{Name: "mu0", Kind: stack.LinkUDP, UDP: udp.Options{Local: lo, Remote: re}}},
		Addresses: []stack.Address{{Link: "mu0", Prefix: args.Prefix}},
		Routes:    []stack.Route{{Prefix: args.Host, Via: args.Via, Labels: args.Labels}},
	})
	if err != nil {
		return err
	}
	defer s.Close()
	// s.DialContext dials TCP through the userspace stack, as
	// net.Dialer.DialContext does through the kernel's: an http.Transport
	// takes it as it is.
	status, err := webfetch.Get(s.DialContext, rawURL, timeout, os.Stdout)
	if err != nil {
		return err
	}
	st := s.Stats().Links[0].MPLS
	fmt.Fprintf(os.Stderr, "udpfetch: %s, %d packets out (%d labelled), %d in\n", status, st.TXFrames, st.FIBPushes, st.RXFrames)
	return nil
}

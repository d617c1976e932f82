// Command lspfetch fetches a web page over an MPLS label-switched path with
// mplsnode's userspace stack: the request leaves on an interface (a veth,
// through AF_PACKET) with the given labels pushed, and the reply comes back
// as whatever the network sends (plain IP or labelled).
//
// Example (as root, in a namespace where veth0 leads to an LSR at
// 172.16.20.21 that pops label 100 towards 10.10.10.10):
//
//	lspfetch -link veth0 -addr 172.16.20.20/24 -via 172.16.20.21 -labels 100 http://10.10.10.10/
//
// The kernel must hold no address on the interface (otherwise it answers
// ARP for the same address and resets connections it does not know).
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/mplsnode/mplsnode/examples/internal/webfetch"
	"github.com/mplsnode/mplsnode/stack"
)

func main() {
	link := flag.String("link", "", "interface to attach to with AF_PACKET (required)")
	addr := flag.String("addr", "", "our address on the link, with prefix length, e.g. 172.16.20.20/24 (required)")
	via := flag.String("via", "", "next hop (the first LSR) on the link (required)")
	labels := flag.String("labels", "", "label stack to push, outermost first, e.g. 100 or 100/200 (empty: plain IP)")
	timeout := flag.Duration("timeout", 30*time.Second, "overall timeout")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: lspfetch -link IF -addr A/LEN -via NEXTHOP [-labels L1/L2] URL\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *link == "" || *addr == "" || *via == "" || flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := fetch(*link, *addr, *via, *labels, flag.Arg(0), *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "lspfetch:", err)
		os.Exit(1)
	}
}

func fetch(link, addr, via, labelText, rawURL string, timeout time.Duration) error {
	args, err := webfetch.ParseArgs(addr, via, labelText, rawURL)
	if err != nil {
		return err
	}
	s, err := stack.New(stack.Config{
		Links:     []stack.Link{{Name: link}},
		Addresses: []stack.Address{{Link: link, Prefix: args.Prefix}},
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
	fmt.Fprintf(os.Stderr, "lspfetch: %s, %d frames out (%d labelled), %d in\n", status, st.TXFrames, st.FIBPushes, st.RXFrames)
	return nil
}

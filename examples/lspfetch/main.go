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
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mplsnode/mplsnode/mpls"
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
	prefix, err := netip.ParsePrefix(addr)
	if err != nil {
		return fmt.Errorf("-addr: %w", err)
	}
	hop, err := netip.ParseAddr(via)
	if err != nil {
		return fmt.Errorf("-via: %w", err)
	}
	var stackLabels []mpls.Label
	if labelText != "" {
		for _, f := range strings.Split(labelText, "/") {
			v, err := strconv.ParseUint(f, 10, 32)
			if err != nil {
				return fmt.Errorf("-labels: %q is not a label", f)
			}
			stackLabels = append(stackLabels, mpls.Label(v))
		}
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	dst, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return fmt.Errorf("URL host %q must be an IP literal: the example routes that one address over the label", u.Hostname())
	}
	s, err := stack.New(stack.Config{
		Links:     []stack.Link{{Name: link}},
		Addresses: []stack.Address{{Link: link, Prefix: prefix}},
		Routes:    []stack.Route{{Prefix: netip.PrefixFrom(dst, dst.BitLen()), Via: hop, Labels: stackLabels}},
	})
	if err != nil {
		return err
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return err
	}
	tr := &http.Transport{DialContext: s.DialContext}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(os.Stdout, resp.Body); err != nil {
		return err
	}
	st := s.Stats().Links[0].MPLS
	fmt.Fprintf(os.Stderr, "lspfetch: %s, %d frames out (%d labelled), %d in\n", resp.Status, st.TXFrames, st.FIBPushes, st.RXFrames)
	return nil
}

// Package webfetch is what the fetch examples (examples/lspfetch,
// examples/udpfetch) share that is not about embedding the stack: reading
// their -addr, -via and -labels arguments and the URL, and fetching the
// URL through a dialer.
package webfetch

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mplsnode/mplsnode/mpls"
)

// Args are a fetch example's arguments, parsed.
type Args struct {
	// Prefix is the stack's own address on the link, with its prefix
	// length (-addr).
	Prefix netip.Prefix
	// Via is the next hop, the first LSR (-via).
	Via netip.Addr
	// Labels is the label stack to push, outermost first (-labels).
	Labels []mpls.Label
	// Host is the URL's host as a host route: the one destination the
	// example routes over the labels.
	Host netip.Prefix
}

// ParseArgs parses -addr (A/LEN), -via (an address), -labels (labels
// separated by "/", empty for none) and the URL, whose host must be an IP
// literal.
func ParseArgs(addr, via, labels, rawURL string) (Args, error) {
	var a Args
	var err error
	if a.Prefix, err = netip.ParsePrefix(addr); err != nil {
		return a, fmt.Errorf("-addr: %w", err)
	}
	if a.Via, err = netip.ParseAddr(via); err != nil {
		return a, fmt.Errorf("-via: %w", err)
	}
	if labels != "" {
		for _, f := range strings.Split(labels, "/") {
			v, err := strconv.ParseUint(f, 10, 32)
			if err != nil {
				return a, fmt.Errorf("-labels: %q is not a label", f)
			}
			a.Labels = append(a.Labels, mpls.Label(v))
		}
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return a, err
	}
	dst, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return a, fmt.Errorf("URL host %q must be an IP literal: the example routes that one address over the label", u.Hostname())
	}
	a.Host = netip.PrefixFrom(dst, dst.BitLen())
	return a, nil
}

// Get fetches rawURL over HTTP with connections from dial (the embedded
// stack's DialContext), within timeout, copies the body to w and returns
// the response's status.
func Get(dial func(ctx context.Context, network, addr string) (net.Conn, error), rawURL string, timeout time.Duration, w io.Writer) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return "", err
	}
	tr := &http.Transport{DialContext: dial}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return "", err
	}
	return resp.Status, nil
}

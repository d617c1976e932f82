// Package lspweb is the far end the example programs' tests fetch from:
// an mplsnode stack that pops label 100 and serves one page over HTTP at
// Addr, so that a page coming back proves the request arrived over the
// LSP. Only tests import it.
package lspweb

import (
	"io"
	"net/http"
	"net/netip"
	"testing"

	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/stack"
)

// Label is the label the far end pops to deliver locally.
const Label = 100

// Page is the body the far end serves.
const Page = "page behind label 100\n"

// Addr is where the far end serves Page: its service address behind the
// LSP (the seed's 10.10.10.10), port 80.
var Addr = netip.MustParseAddrPort("10.10.10.10:80")

// Config is the far end's stack on link: 172.16.20.21/24 and Addr's
// address on it, and the ILM entry popping Label.
func Config(link stack.Link) stack.Config {
	return stack.Config{
		Links: []stack.Link{link},
		Addresses: []stack.Address{
			{Link: link.Name, Prefix: netip.MustParsePrefix("172.16.20.21/24")},
			{Link: link.Name, Prefix: netip.PrefixFrom(Addr.Addr(), 32)},
		},
		ILM: []mpls.ILMEntry{{Label: Label, Action: mpls.ILMPopLocal}},
	}
}

// Serve serves Page over HTTP on srv at Addr until t ends; it closes srv
// then too.
func Serve(t testing.TB, srv *stack.Stack) {
	t.Helper()
	t.Cleanup(func() { srv.Close() })
	ln, err := srv.ListenTCP(Addr)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, Page)
	})}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
}

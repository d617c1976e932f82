package main

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/lspweb"
	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/stack"
)

// TestFetchOverLSP runs fetch in one namespace against an HTTP server on
// an mplsnode stack in another that pops label 100.
func TestFetchOverLSP(t *testing.T) {
	netns.SkipUnlessRoot(t)
	a, b := netns.New(t, "fa"), netns.New(t, "fb")
	va, vb := netns.VethPair(t, a, b)
	var srv *stack.Stack
	if err := b.Run(func() (err error) {
		srv, err = stack.New(lspweb.Config(stack.Link{Name: vb}))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	lspweb.Serve(t, srv)

	// Capture fetch's stdout.
	r, w, _ := os.Pipe()
	old := os.Stdout
	os.Stdout = w
	err := a.Run(func() error {
		return fetch(va, "172.16.20.20/24", "172.16.20.21", "100", "http://10.10.10.10/", 20*time.Second)
	})
	os.Stdout = old
	w.Close()
	out, _ := io.ReadAll(r)
	if err != nil {
		t.Fatalf("fetch = %v", err)
	}
	if !strings.Contains(string(out), lspweb.Page) {
		t.Fatalf("fetch printed %q", out)
	}
	if hits := srv.Stats().Links[0].MPLS.ILMHits; hits == 0 {
		t.Fatalf("server ILM hits = 0: the request did not arrive labelled")
	}
}

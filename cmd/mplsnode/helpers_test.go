package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/config"
	"github.com/mplsnode/mplsnode/node"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// channelNode starts an in-process node from conf (parsed as file name),
// its links a0 and b0 on channel endpoints (no root needed), serving its
// control socket until t ends. It returns the socket's path and the two
// endpoints, to inject frames into.
func channelNode(t *testing.T, name, conf string) (path string, a, b *channel.Endpoint) {
	t.Helper()
	cfg, err := config.Parse(name, strings.NewReader(conf))
	if err != nil {
		t.Fatal(err)
	}
	a = channel.New(4, 1500, tcpip.LinkAddress("\x02\x00\x00\x00\x01\x01"))
	b = channel.New(4, 1500, tcpip.LinkAddress("\x02\x00\x00\x00\x02\x01"))
	n, err := node.New(cfg, node.Options{Logger: slog.New(slog.DiscardHandler),
		Endpoints: map[string]gstack.LinkEndpoint{"a0": a, "b0": b}})
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "n.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.ServeControl(ctx, n, path) }()
	t.Cleanup(func() {
		cancel()
		<-done
		n.Close()
		a.Drain()
		b.Drain()
	})
	waitSocket(t, path)
	return path, a, b
}

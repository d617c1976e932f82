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
	path = serveNode(t, n, a, b)
	return path, a, b
}

// serveNode serves n's control socket until t ends, then closes n and
// drains the channel links eps; it returns the socket's path once the
// socket answers.
func serveNode(t *testing.T, n *node.Node, eps ...*channel.Endpoint) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "n.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.ServeControl(ctx, n, path) }()
	t.Cleanup(func() {
		cancel()
		<-done
		n.Close()
		for _, ep := range eps {
			ep.Drain()
		}
	})
	waitSocket(t, path)
	return path
}

package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/mplsnode/mplsnode/internal/testkit/nodekit"
	"github.com/mplsnode/mplsnode/node"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
)

// channelNode starts an in-process node from conf (parsed as file name),
// its links a0 and b0 on channel endpoints (no root needed), serving its
// control socket until t ends. It returns the socket's path and the two
// endpoints, to inject frames into.
func channelNode(t *testing.T, name, conf string) (path string, a, b *channel.Endpoint) {
	t.Helper()
	a = channel.New(4, 1500, tcpip.LinkAddress("\x02\x00\x00\x00\x01\x01"))
	b = channel.New(4, 1500, tcpip.LinkAddress("\x02\x00\x00\x00\x02\x01"))
	n := nodekit.ChannelNode(t, name, conf, nil, map[string]*channel.Endpoint{"a0": a, "b0": b})
	return serveNode(t, n), a, b
}

// serveNode serves n's control socket until t ends (before n closes, when
// nodekit started n) and returns the socket's path once the socket
// answers.
func serveNode(t *testing.T, n *node.Node) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "n.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.ServeControl(ctx, n, path) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	waitSocket(t, path)
	return path
}

// Package nodekit starts in-process nodes for the tests of node and
// cmd/mplsnode: a node from config text whose links are gVisor channel
// endpoints (no root, no interfaces), closed with its endpoints drained
// when the test ends, and static neighbours on its links by name. It is
// for tests of node and cmd/mplsnode only.
package nodekit

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/config"
	"github.com/mplsnode/mplsnode/node"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// ChannelNode parses conf (name is its file name in errors) and starts a
// node whose links are the channel endpoints of links, by link name,
// logging to logger (discarded when nil). When t ends it closes the node
// and drains every endpoint.
func ChannelNode(t testing.TB, name, conf string, logger *slog.Logger, links map[string]*channel.Endpoint) *node.Node {
	t.Helper()
	cfg, err := config.Parse(name, strings.NewReader(conf))
	if err != nil {
		t.Fatal(err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	eps := make(map[string]gstack.LinkEndpoint, len(links))
	for dev, ep := range links {
		eps[dev] = ep
	}
	n, err := node.New(cfg, node.Options{Logger: logger, Endpoints: eps})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.Close()
		for _, ep := range links {
			ep.Drain()
		}
	})
	return n
}

// NICID returns the NIC of n's link named dev; it fails t when there is
// none.
func NICID(t testing.TB, n *node.Node, dev string) tcpip.NICID {
	t.Helper()
	for id, info := range n.Stack().Netstack().NICInfo() {
		if info.Name == dev {
			return id
		}
	}
	t.Fatalf("no NIC named %s", dev)
	return 0
}

// StaticNeighbor resolves the IPv4 address ip to mac on n's link dev, so
// that frames towards it leave without ARP.
func StaticNeighbor(t testing.TB, n *node.Node, dev string, ip [4]byte, mac tcpip.LinkAddress) {
	t.Helper()
	if err := n.Stack().Netstack().AddStaticNeighbor(NICID(t, n, dev), header.IPv4ProtocolNumber, tcpip.AddrFrom4(ip), mac); err != nil {
		t.Fatalf("static neighbour %v on %s: %v", ip, dev, err)
	}
}

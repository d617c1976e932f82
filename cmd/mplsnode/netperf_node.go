package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"

	"github.com/mplsnode/mplsnode/config"
	"github.com/mplsnode/mplsnode/netperf"
	"github.com/mplsnode/mplsnode/node"
)

// startNode builds the node a --config file describes (the host role: the
// netperf client or server then runs on its userspace stack, so the data
// crosses the node's links and labelled routes). Logs below warnings are
// dropped so they don't mix with netperf's output.
func startNode(path string, stderr io.Writer) (*node.Node, error) {
	cfg, err := config.ParseFile(path)
	if err != nil {
		return nil, err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return node.New(cfg, node.Options{Logger: logger})
}

// nodeDialer dials through the node's stack, from local (an IP literal;
// empty means the route's source address) and port (0: any), the way
// kernelDialer does on kernel sockets.
func nodeDialer(n *node.Node, local string, port int) (netperf.DialFunc, error) {
	bind := local != "" || port != 0
	var from netip.AddrPort
	if bind {
		var ip netip.Addr
		if local != "" {
			var err error
			if ip, err = netip.ParseAddr(local); err != nil {
				return nil, fmt.Errorf("local address %q is not an IP address", local)
			}
		}
		from = netip.AddrPortFrom(ip, uint16(port))
	}
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		if !bind {
			return n.Stack().DialContext(ctx, network, address)
		}
		to, err := netip.ParseAddrPort(address)
		if err != nil {
			return nil, &net.OpError{Op: "dial", Net: network, Err: err}
		}
		if strings.HasPrefix(network, "udp") {
			return n.Stack().DialUDP(from, to)
		}
		return n.Stack().DialTCPFrom(ctx, from, to)
	}, nil
}

// printNodeDrops writes where the node's frames went: per link frames, label
// hits and every non-zero drop counter (the lower link's losses included),
// then the TCP retransmissions, so a run over an LSP shows at once whether
// anything was lost and whether TCP had to recover.
func printNodeDrops(w io.Writer, n *node.Node) {
	r := n.Report()
	for _, l := range r.Links {
		fmt.Fprintf(w, "mplsnode %s: rx %d frames, tx %d frames, FIB pushes %d, ILM hits %d, GSO packets %d",
			l.Name, l.RXFrames, l.TXFrames, l.FIBPushes, l.ILMHits, l.GSOPackets)
		dropped := false
		for _, k := range sortedKeys(l.Drops) {
			if c := l.Drops[k]; c != 0 {
				fmt.Fprintf(w, ", drop %s %d", k, c)
				dropped = true
			}
		}
		if !dropped {
			fmt.Fprint(w, ", drops 0")
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "mplsnode TCP: %d segments sent, %d retransmitted, %d timeouts\n",
		r.TCP.SegmentsSent, r.TCP.Retransmits, r.TCP.Timeouts)
}

// nodePortDialer returns TCP_CRR's and TCP_CC's dialer on the node's
// stack: each connection from local (empty: the route's source address)
// and the port the client picks.
func nodePortDialer(n *node.Node, local string) (netperf.PortDialFunc, error) {
	var ip netip.Addr
	if local != "" {
		var err error
		if ip, err = netip.ParseAddr(local); err != nil {
			return nil, fmt.Errorf("local address %q is not an IP address", local)
		}
	}
	return func(ctx context.Context, network, address string, port int) (net.Conn, error) {
		to, err := netip.ParseAddrPort(address)
		if err != nil {
			return nil, &net.OpError{Op: "dial", Net: network, Err: err}
		}
		return n.Stack().DialTCPFrom(ctx, netip.AddrPortFrom(ip, uint16(port)), to)
	}, nil
}

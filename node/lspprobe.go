package node

import (
	"context"

	"github.com/mplsnode/mplsnode/stack"
)

// The prober is the stack's (stack.PingLSP, stack.TraceLSP); the node
// runs it for the control socket's `lsp ping` and `lsp trace`.

// Types of LSP ping and traceroute, as package stack defines them.
type (
	LSPProbeOptions = stack.LSPProbeOptions
	LSPProbe        = stack.LSPProbe
	LSPDownstream   = stack.LSPDownstream
	LSPPath         = stack.LSPPath
	LSPPingResult   = stack.LSPPingResult
	LSPTrace        = stack.LSPTrace
	LSPTraceResult  = stack.LSPTraceResult
)

// maxTracePaths bounds the paths a multipath traceroute follows.
const maxTracePaths = stack.MaxLSPTracePaths

// PingLSP sends MPLS echo requests for the FEC from the node's stack
// (stack.Stack.PingLSP).
func (n *Node) PingLSP(ctx context.Context, opts LSPProbeOptions) (*LSPPingResult, error) {
	return n.stack.PingLSP(ctx, opts)
}

// TraceLSP traces the FEC's LSP from the node's stack
// (stack.Stack.TraceLSP).
func (n *Node) TraceLSP(ctx context.Context, opts LSPProbeOptions) (*LSPTraceResult, error) {
	return n.stack.TraceLSP(ctx, opts)
}

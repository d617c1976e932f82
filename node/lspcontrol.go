package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/mplsnode/mplsnode/lspping"
)

// cmdLSP prefixes the control socket's LSP ping and traceroute commands:
// `lsp ping JSON` and `lsp trace JSON`, JSON an LSPRequest on one line.
const cmdLSP = "lsp "

// LSPRequest is the argument of the control socket's `lsp ping` and `lsp
// trace` commands (what `mplsnode ping mpls` and `mplsnode traceroute
// mpls` send).
type LSPRequest struct {
	// Prefix is the FEC's prefix, e.g. "10.10.10.10/32".
	Prefix string `json:"prefix"`
	// FEC is the Target FEC Stack sub-TLV: "ldp" (the default), "bgp",
	// "generic" or "nil" (a Nil FEC with the route's bottom label).
	FEC string `json:"fec,omitempty"`
	// Count, IntervalMS, TimeoutMS, Size, TC, TTL, MaxTTL, ReplyMode and
	// Multipath are LSPProbeOptions' (milliseconds for the times).
	Count      int   `json:"count,omitempty"`
	IntervalMS int   `json:"interval_ms,omitempty"`
	TimeoutMS  int   `json:"timeout_ms,omitempty"`
	Size       int   `json:"size,omitempty"`
	TC         uint8 `json:"tc,omitempty"`
	TTL        uint8 `json:"ttl,omitempty"`
	MaxTTL     uint8 `json:"max_ttl,omitempty"`
	ReplyMode  uint8 `json:"reply_mode,omitempty"`
	Multipath  bool  `json:"multipath,omitempty"`
}

// Options returns the probe options r asks for, checking its words.
func (r *LSPRequest) Options(n *Node) (LSPProbeOptions, error) {
	p, err := netip.ParsePrefix(r.Prefix)
	if err != nil {
		return LSPProbeOptions{}, fmt.Errorf("prefix %q: want an IPv4 or IPv6 prefix such as 10.10.10.10/32", r.Prefix)
	}
	p = p.Masked()
	o := LSPProbeOptions{Count: r.Count, Interval: time.Duration(r.IntervalMS) * time.Millisecond,
		Timeout: time.Duration(r.TimeoutMS) * time.Millisecond, Size: r.Size, TC: r.TC & 7, TTL: r.TTL,
		MaxTTL: r.MaxTTL, ReplyMode: lspping.ReplyMode(r.ReplyMode), Multipath: r.Multipath}
	kind := r.FEC
	if kind == "" {
		kind = "ldp"
	}
	if kind == "nil" {
		o.NilPrefix = p
		o.FEC = lspping.FEC{Type: lspping.FECNil}
		if n != nil {
			if e, ok := n.stack.Tables().FIB().Lookup(p.Addr()); ok {
				for _, h := range e.Group.Hops {
					if len(h.Labels) > 0 {
						o.FEC.Label = h.Labels[len(h.Labels)-1]
						break
					}
				}
			}
		}
		return o, nil
	}
	o.FEC, err = lspping.PrefixFEC(kind, p)
	return o, err
}

// lspTimeout bounds one `lsp` command.
func (r *LSPRequest) timeout(trace bool) time.Duration {
	per := time.Duration(max(r.TimeoutMS, 2000)) * time.Millisecond
	if trace {
		hops := int(r.MaxTTL)
		if hops == 0 {
			hops = 30
		}
		paths := 1
		if r.Multipath {
			paths = maxTracePaths
		}
		return time.Duration(hops*paths)*per + 5*time.Second
	}
	count := max(r.Count, 5)
	return time.Duration(count)*(per+time.Duration(max(r.IntervalMS, 1000))*time.Millisecond) + 5*time.Second
}

// maxLSPCommand bounds how long one `lsp` command may run.
const maxLSPCommand = 30 * time.Minute

// controlLSP runs `lsp ping JSON` or `lsp trace JSON` and writes the
// result as JSON (LSPPingResult, LSPTraceResult) or an error line.
func controlLSP(n *Node, c net.Conn, cmd string) {
	verb, arg, _ := strings.Cut(strings.TrimPrefix(cmd, cmdLSP), " ")
	var r LSPRequest
	if verb != "ping" && verb != "trace" {
		fmt.Fprintf(c, "error: unknown command %q: want lsp ping JSON or lsp trace JSON\n", cmd)
		return
	}
	if err := json.Unmarshal([]byte(arg), &r); err != nil {
		fmt.Fprintf(c, "error: lsp %s: bad argument: %v\n", verb, err)
		return
	}
	opts, err := r.Options(n)
	if err != nil {
		fmt.Fprintf(c, "error: lsp %s: %v\n", verb, err)
		return
	}
	d := min(r.timeout(verb == "trace"), maxLSPCommand)
	_ = c.SetDeadline(time.Now().Add(d + 5*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var answer any
	if verb == "ping" {
		answer, err = n.PingLSP(ctx, opts)
	} else {
		answer, err = n.TraceLSP(ctx, opts)
	}
	if err != nil {
		fmt.Fprintf(c, "error: lsp %s: %v\n", verb, err)
		return
	}
	enc := json.NewEncoder(c)
	enc.SetIndent("", "  ")
	_ = enc.Encode(answer)
}

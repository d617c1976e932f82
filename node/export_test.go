package node

import "github.com/mplsnode/mplsnode/stack"

// The node-wide ICMP error rate limit (the stack's bucket, which the label
// switch shares), for the tests that check the bound on the wire.
const (
	ICMPRate  = stack.ICMPRateLimit
	ICMPBurst = stack.ICMPBurst
)

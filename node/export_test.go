package node

// The label switch's ICMP error rate limit, for the tests that check the
// bound on the wire.
const (
	ICMPRate  = icmpRate
	ICMPBurst = icmpBurst
)

package node_test

import (
	"testing"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/internal/testkit/wiretest"
)

// line is three namespaces in a row joined by veth pairs: ns0's v01 faces
// ns1's v10, and ns1's v12 faces ns2's v21.
type line struct {
	ns0, ns1, ns2      *netns.NS
	v01, v10, v12, v21 string
}

// newLine skips t unless it runs as root, then builds a line of
// namespaces named prefix0, prefix1 and prefix2 (removed when t ends).
// The namespaces whose index is in quiet get IPv6 turned off before their
// links exist: the nodes there own the links, and the kernel's link-local
// chatter would reach them.
func newLine(t *testing.T, prefix string, quiet ...int) *line {
	t.Helper()
	netns.SkipUnlessRoot(t)
	l := &line{ns0: netns.New(t, prefix+"0"), ns1: netns.New(t, prefix+"1"), ns2: netns.New(t, prefix+"2")}
	nss := [...]*netns.NS{l.ns0, l.ns1, l.ns2}
	for _, i := range quiet {
		wiretest.DisableIPv6(t, nss[i])
	}
	l.v01, l.v10 = netns.VethPair(t, l.ns0, l.ns1)
	l.v12, l.v21 = netns.VethPair(t, l.ns1, l.ns2)
	return l
}

// seedKernel gives ns2's kernel the seed topology's addresses:
// 172.16.21.22 on v21 and 10.10.10.10 on lo, with its route back to ns0's
// subnet through ns1.
func (l *line) seedKernel() {
	l.ns2.MustExec("ip", "addr", "add", "172.16.21.22/24", "dev", l.v21)
	l.ns2.MustExec("ip", "addr", "add", "10.10.10.10/32", "dev", "lo")
	l.ns2.MustExec("ip", "route", "add", "172.16.20.0/24", "via", "172.16.21.21")
}

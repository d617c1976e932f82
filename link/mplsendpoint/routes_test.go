package mplsendpoint_test

import (
	"net/netip"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
)

// testDevice names the one link of the tests' FIB routes.
const testDevice = "ep"

// hostRoutes returns FIB routes to each of dsts (a host prefix) via via
// (dsts' own address when invalid) on testDevice, pushing labels.
func hostRoutes(labels []mpls.Label, via netip.Addr, dsts ...netip.Addr) []mpls.Route {
	out := make([]mpls.Route, 0, len(dsts))
	for _, d := range dsts {
		hop := via
		if !hop.IsValid() {
			hop = d
		}
		out = append(out, mpls.Route{Prefix: netip.PrefixFrom(d, d.BitLen()),
			NextHops: []mpls.NextHop{{Via: hop, Device: testDevice, Labels: labels}}})
	}
	return out
}

// routeTables returns tables holding routes.
func routeTables(tb testing.TB, routes []mpls.Route) *mpls.Tables {
	tb.Helper()
	tables := &mpls.Tables{}
	if err := tables.ReplaceRoutes(routes); err != nil {
		tb.Fatal(err)
	}
	return tables
}

// addHeader pushes pkt's link header as the node would for its
// destination: the labels of the FIB route's first hop when a route covers
// it (what the FIBEndpoint hands the link), else plain Ethernet
// (AddHeader: a connected subnet).
func addHeader(ep *mplsendpoint.Endpoint, pkt *stack.PacketBuffer, dst netip.Addr) {
	if ent, ok := ep.Tables().FIB().Lookup(dst); ok {
		ep.PushHeader(pkt, ent.Group.Hops[0].Labels, ent.TTL)
		return
	}
	ep.AddHeader(pkt)
}

// fibNICID is the test stacks' FIB NIC, beside their link (nicID).
const fibNICID = 2

// addFIBNIC gives st a FIB NIC over ep (NIC nicID, testDevice) that
// routes by tables' FIB, as package stack does, and routes each of dsts
// (host prefixes) to it: the labelled routes leave through it.
func addFIBNIC(tb testing.TB, st *stack.Stack, ep *mplsendpoint.Endpoint, tables *mpls.Tables, gso mplsendpoint.GSOMode, dsts ...netip.Addr) []tcpip.Route {
	tb.Helper()
	fib := mplsendpoint.NewFIB(mplsendpoint.FIBOptions{
		Tables:  tables,
		GSOMode: gso,
		Resolve: func(nic tcpip.NICID, addr tcpip.Address, proto tcpip.NetworkProtocolNumber, onResolve func(stack.LinkResolutionResult)) tcpip.Error {
			return st.GetLinkAddress(nic, addr, tcpip.Address{}, proto, onResolve)
		},
	})
	fib.SetLinks(map[string]*mplsendpoint.FIBLink{testDevice: {Endpoint: ep, NIC: nicID}}, ep)
	if err := st.CreateNICWithOptions(fibNICID, fib, stack.NICOptions{Name: ":fib"}); err != nil {
		tb.Fatal(err)
	}
	// gVisor takes a route out of one NIC for a source address of another
	// only when both forward (see package stack).
	for _, p := range []tcpip.NetworkProtocolNumber{ipv4.ProtocolNumber, ipv6.ProtocolNumber} {
		for _, nic := range []tcpip.NICID{nicID, fibNICID} {
			if _, err := st.SetNICForwarding(nic, p, true); err != nil {
				tb.Fatal(err)
			}
		}
	}
	var routes []tcpip.Route
	for _, d := range dsts {
		routes = append(routes, tcpip.Route{Destination: hostSubnet(d), NIC: fibNICID})
	}
	return routes
}

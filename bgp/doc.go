// Package bgp is the node's BGP labeled unicast speaker (RFC 8277, AFI 1
// and 2, SAFI 4): it runs an embedded GoBGP server, turns the labelled
// routes its neighbours send into labelled routes (mpls.Route: push the
// received label towards the BGP next hop), advertises the node's own networks with labels
// it binds in the ILM, and, towards neighbours marked next-hop-self,
// re-advertises what it learned with a local label that it swaps to the
// received one. It keeps no forwarding table of its own: everything goes
// through the Tables interface the node implements; bgp only remembers
// what it installed, so that a withdrawal or a lost session removes
// exactly that.
//
// # Why GoBGP v4
//
// github.com/osrg/gobgp/v4 (v4.8.0) rather than /v3 (v3.37.0):
//   - its Go API is native: paths are bgp.NLRI and netip.Addr values
//     (apiutil.Path) instead of protobuf Any blobs to marshal and unmarshal;
//   - it logs through log/slog, as this module does (v3 drags in logrus);
//   - its dependencies are current and agree with ours (protobuf 1.36,
//     grpc 1.8x, golang.org/x/net 0.5x; v3 pins grpc 1.56, the deprecated
//     github.com/golang/protobuf, hcl and viper 1.16), and it needs Go 1.25,
//     below our 1.26. Both pull in grpc and viper (the gRPC API server is
//     compiled in even when unused, as here), so neither is light; v4 at
//     least adds nothing obsolete. The v3 line only receives fixes.
//
// # Transport: the userspace stack, spliced to GoBGP over loopback
//
// GoBGP opens only kernel sockets (net.Dialer in its FSM, a kernel listener
// in StartBgp; the channel its listener feeds is unexported, so a
// connection cannot be handed in). A node owns its interface addresses in
// the userspace stack and the kernel holds none, so a kernel socket could
// not reach a neighbour. The BGP TCP sessions therefore run in the node's
// userspace stack (gonet), and a splice joins each one to GoBGP over the
// kernel loopback:
//
//   - GoBGP listens on 127.0.0.1:P (P a free port) and knows neighbour i
//     by a loopback alias 127.100.x.y (loopbackAlias); the splice listens
//     on alias:P in the kernel too;
//   - a session the neighbour opens arrives on the userspace listener at
//     LOCAL:179, and the splice connects from alias to 127.0.0.1:P;
//   - a session GoBGP opens arrives at alias:P, and the splice dials the
//     neighbour's :179 from LOCAL through the userspace stack.
//
// Consequences: the node's process needs a loopback interface that is up
// (`ip link set lo up` in a fresh namespace); GoBGP's per-socket options
// (TTL security, TCP MD5, TCP MSS, DSCP) apply to the loopback leg, not to
// the wire, so they are not offered; next hops GoBGP would derive from the
// session (127.0.0.1) are replaced by an export policy that sets the
// node's own address on the neighbour's link. GoBGP applies per-neighbour
// policies to route-server clients only, so that policy is the global
// export policy, one statement per neighbour matched by a neighbour set.
// It exports local paths only: GoBGP would otherwise pass received routes
// on with the label their sender bound, which this node does not switch.
// Its first statements are the split horizon (RFC 4271 §9.2): each
// re-advertised path carries large communities naming the neighbour it was
// learned from and whether that one is internal, and a route goes neither
// back to that neighbour nor, when it is internal, to another internal one
// (no route reflection); the accepting statements remove the communities.
// The global import policy keeps every received path out of GoBGP's RIB
// (horizon.go says why: GoBGP would withdraw a sender's own route towards
// it once the node's re-advertisement is best).
//
// # Route selection
//
// The node reads its neighbours' UPDATEs itself, in the splice, and GoBGP
// only those the node leaves to it (receive.go): one copy of each received
// route, the speaker's. What GoBGP does read reaches the speaker through
// its Adj-RIB-In watch (before policy); GoBGP's RIB holds only the node's
// local paths. The speaker picks, per
// prefix, the path with the shortest AS path (then the neighbour
// configured first), treats paths carrying its own AS as withdrawn, and
// remembers what it installed so that a withdrawal or a lost session
// removes exactly that. A re-advertised path keeps the received ORIGIN and
// AS path, and its local label: a prefix that goes keeps its label held
// for it for a while (labels.go), so that a neighbour's restart does not
// renumber the node's bindings.
//
// # Labels
//
// GoBGP decodes any number of labels in an NLRI (up to the bottom-of-stack
// bit) but does not implement the Multiple Labels capability (RFC 8277
// §2.1): it never advertises it, so conforming peers send one label per
// route, and so do we. A route that does arrive with several labels is
// treated as withdrawn (RFC 7606 §2). Reserved labels that may not be
// pushed where they stand (router alert 1, entropy label indicator 7, ...)
// keep a route out of the tables; every route not installed is logged and
// counted by Reason.
//
// Received routes are resolved through the node's connected and static
// routes and, recursively, through labelled ones (the transport labels go
// on top of the BGP label). A received implicit null (3) pushes nothing for
// BGP: the route becomes plain IP towards the resolved next hop. An IPv6
// route whose next hop is IPv4-mapped (::ffff:a.b.c.d) is 6PE (RFC 4798):
// installed via the IPv4 next hop under its label.
// Routes from the config file win over BGP routes to the same prefix
// (administrative distance: static 1, BGP 20; see Tables).
package bgp

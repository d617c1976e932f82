package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
)

// Topo is one built namespace set: the seed's ns0, ns1 and ns2.
type Topo struct {
	// Kind is the topology kind.
	Kind Topology
	// NS holds the namespaces' names (ns0, ns1, ns2).
	NS [3]string
}

// Namespaces tracks every namespace the bench made, so that Close removes
// them on every exit path.
type Namespaces struct {
	prefix string
	mu     sync.Mutex
	made   []string
	topos  map[Topology]*Topo
}

// NewNamespaces returns a tracker whose namespaces are named
// prefix<letter><0|1|2>, e.g. mpb4242-l0.
func NewNamespaces(prefix string) *Namespaces {
	return &Namespaces{prefix: prefix, topos: map[Topology]*Topo{}}
}

// ipCmd runs ip(8) or another tool, returning its combined output in the
// error.
func ipCmd(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// nsx runs a command inside namespace ns.
func nsx(ctx context.Context, ns string, args ...string) error {
	return ipCmd(ctx, "ip", append([]string{"netns", "exec", ns}, args...)...)
}

// Get returns the namespace set of kind k, building it on first use.
func (n *Namespaces) Get(ctx context.Context, k Topology) (*Topo, error) {
	n.mu.Lock()
	t := n.topos[k]
	n.mu.Unlock()
	if t != nil {
		return t, nil
	}
	t = &Topo{Kind: k}
	for i := range t.NS {
		t.NS[i] = n.prefix + topoLetters[k] + strconv.Itoa(i)
	}
	for _, ns := range t.NS {
		if err := ipCmd(ctx, "ip", "netns", "add", ns); err != nil {
			return nil, err
		}
		n.mu.Lock()
		n.made = append(n.made, ns)
		n.mu.Unlock()
	}
	if err := buildTopo(ctx, t); err != nil {
		return nil, fmt.Errorf("building the %s namespaces: %w", k, err)
	}
	n.mu.Lock()
	n.topos[k] = t
	n.mu.Unlock()
	return t, nil
}

// buildTopo creates the veths and addresses of a namespace set, as the seed
// script does, with the differences its kind names.
func buildTopo(ctx context.Context, t *Topo) error {
	ns0, ns1, ns2 := t.NS[0], t.NS[1], t.NS[2]
	// Each step is (namespace or "" for the root namespace, argv).
	type step struct {
		ns   string
		argv []string
	}
	s := func(ns string, argv ...string) step { return step{ns, argv} }
	steps := []step{
		s(ns0, "ip", "link", "set", "lo", "up"),
		s(ns1, "ip", "link", "set", "lo", "up"),
		s(ns2, "ip", "link", "set", "lo", "up"),
		// The veths are made inside the namespaces, so the seed's names
		// never clash with another run's or another kind's.
		s("", "ip", "link", "add", "virt01", "netns", ns0, "type", "veth", "peer", "name", "virt10", "netns", ns1),
		s("", "ip", "link", "add", "virt12", "netns", ns1, "type", "veth", "peer", "name", "virt21", "netns", ns2),
		s(ns0, "ip", "link", "set", "virt01", "up"),
		s(ns1, "ip", "link", "set", "virt10", "up"),
		s(ns1, "ip", "link", "set", "virt12", "up"),
		s(ns2, "ip", "link", "set", "virt21", "up"),
		// ns2 is the kernel's in every kind: the TCP peer.
		s(ns2, "ip", "addr", "add", "172.16.21.22/24", "dev", "virt21"),
		s(ns2, "ip", "addr", "add", "10.10.10.10/32", "dev", "lo"),
		s(ns2, "ip", "route", "add", "172.16.20.0/24", "via", "172.16.21.21"),
		s(ns2, "ip", "-6", "addr", "add", "fd00:21::22/64", "dev", "virt21", "nodad"),
		s(ns2, "ip", "-6", "addr", "add", "fd00:10::10/128", "dev", "lo"),
		s(ns2, "ip", "-6", "route", "add", "fd00:20::/64", "via", "fd00:21::21"),
	}
	kernelNS1 := []step{
		s(ns1, "ip", "addr", "add", "172.16.20.21/24", "dev", "virt10"),
		s(ns1, "ip", "addr", "add", "172.16.21.21/24", "dev", "virt12"),
		s(ns1, "sysctl", "-qw", "net.ipv4.ip_forward=1"),
		s(ns1, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0"),
		s(ns1, "sysctl", "-qw", "net.ipv4.conf.default.rp_filter=0"),
	}
	if t.Kind < 0 || t.Kind >= numTopologies {
		return fmt.Errorf("unknown topology %d", t.Kind)
	}
	switch t.Kind {
	case TopoKernel, TopoKernelNoTSO:
		steps = append(steps,
			s(ns0, "ip", "addr", "add", "172.16.20.20/24", "dev", "virt01"),
			s(ns0, "ip", "route", "add", "172.16.21.0/24", "via", "172.16.20.21", "mtu", "lock", "1496"))
		steps = append(steps, kernelNS1...)
		if t.Kind == TopoKernelNoTSO {
			steps = append(steps, s(ns0, "ethtool", "-K", "virt01", "tso", "off", "gso", "off"))
		}
	case TopoUserHost:
		steps = append(steps, kernelNS1...)
	}
	if t.Kind == TopoUDP {
		steps = append(steps,
			s(ns0, "ip", "addr", "add", "192.168.77.20/24", "dev", "virt01"),
			s(ns1, "ip", "addr", "add", "192.168.77.21/24", "dev", "virt10"))
	}
	if t.Kind == TopoUserLSRPeerGRO {
		steps = append(steps, s(ns2, "ethtool", "-K", "virt21", "gro", "on"))
	}
	if t.Kind == TopoUserLSRXDP {
		steps = append(steps, s(ns2, "ethtool", "-K", "virt21", "tx", "off"))
	}
	if t.Kind == TopoTAP {
		for _, b := range []struct{ ns, br, member string }{{ns0, "br0", "virt01"}, {ns1, "br10", "virt10"}, {ns1, "br12", "virt12"}} {
			steps = append(steps,
				s(b.ns, "ip", "link", "add", b.br, "type", "bridge"),
				s(b.ns, "ip", "link", "set", b.member, "master", b.br),
				s(b.ns, "ip", "link", "set", b.br, "up"))
		}
		// With br_netfilter loaded (it is here), every bridged frame
		// also runs the namespace's iptables hooks (br_nf_pre_routing,
		// br_nf_forward in the profiles): a cost of the bridges this
		// topology needs, not of TAP. The switches are per namespace.
		if _, err := os.Stat("/proc/sys/net/bridge/bridge-nf-call-iptables"); err == nil {
			for _, ns := range []string{ns0, ns1} {
				steps = append(steps, s(ns, "sysctl", "-q", "-w", "net.bridge.bridge-nf-call-iptables=0",
					"net.bridge.bridge-nf-call-ip6tables=0", "net.bridge.bridge-nf-call-arptables=0"))
			}
		}
	}
	for _, st := range steps {
		var err error
		if st.ns == "" {
			err = ipCmd(ctx, st.argv[0], st.argv[1:]...)
		} else {
			err = nsx(ctx, st.ns, st.argv...)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Close removes every namespace the tracker made, and any other namespace
// whose name starts with its prefix (one left by an interrupted build).
// Processes in them must have been stopped first.
func (n *Namespaces) Close() error {
	n.mu.Lock()
	names := append([]string(nil), n.made...)
	n.made, n.topos = nil, map[Topology]*Topo{}
	n.mu.Unlock()
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], n.prefix) {
				names = append(names, f[0])
			}
		}
	}
	var first error
	seen := map[string]bool{}
	for _, ns := range names {
		if seen[ns] {
			continue
		}
		seen[ns] = true
		if err := ipCmd(context.Background(), "ip", "netns", "del", ns); err != nil && first == nil && !strings.Contains(err.Error(), "No such file") {
			first = err
		}
	}
	return first
}

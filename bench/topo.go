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
	if t.Kind < 0 || t.Kind >= numTopologies {
		return fmt.Errorf("unknown topology %d", t.Kind)
	}
	return runSteps(ctx, append(baseSteps(t), kindSteps(t)...))
}

// step is one command of a topology's build: its namespace ("" for the
// root namespace) and argv.
type step struct {
	ns   string
	argv []string
}

// st is a step in namespace ns.
func st(ns string, argv ...string) step { return step{ns, argv} }

// baseSteps are the steps every kind shares: the two veths (made inside
// the namespaces, so the seed's names never clash with another run's or
// another kind's), up, and ns2 as the kernel TCP peer.
func baseSteps(t *Topo) []step {
	ns0, ns1, ns2 := t.NS[0], t.NS[1], t.NS[2]
	return []step{
		st(ns0, "ip", "link", "set", "lo", "up"),
		st(ns1, "ip", "link", "set", "lo", "up"),
		st(ns2, "ip", "link", "set", "lo", "up"),
		st("", "ip", "link", "add", "virt01", "netns", ns0, "type", "veth", "peer", "name", "virt10", "netns", ns1),
		st("", "ip", "link", "add", "virt12", "netns", ns1, "type", "veth", "peer", "name", "virt21", "netns", ns2),
		st(ns0, "ip", "link", "set", "virt01", "up"),
		st(ns1, "ip", "link", "set", "virt10", "up"),
		st(ns1, "ip", "link", "set", "virt12", "up"),
		st(ns2, "ip", "link", "set", "virt21", "up"),
		// ns2 is the kernel's in every kind: the TCP peer.
		st(ns2, "ip", "addr", "add", "172.16.21.22/24", "dev", "virt21"),
		st(ns2, "ip", "addr", "add", "10.10.10.10/32", "dev", "lo"),
		st(ns2, "ip", "route", "add", "172.16.20.0/24", "via", "172.16.21.21"),
		st(ns2, "ip", "-6", "addr", "add", "fd00:21::22/64", "dev", "virt21", "nodad"),
		st(ns2, "ip", "-6", "addr", "add", "fd00:10::10/128", "dev", "lo"),
		st(ns2, "ip", "-6", "route", "add", "fd00:20::/64", "via", "fd00:21::21"),
	}
}

// kindSteps are the steps that make t's kind what it is.
func kindSteps(t *Topo) []step {
	ns0, ns1, ns2 := t.NS[0], t.NS[1], t.NS[2]
	kernelNS1 := []step{
		st(ns1, "ip", "addr", "add", "172.16.20.21/24", "dev", "virt10"),
		st(ns1, "ip", "addr", "add", "172.16.21.21/24", "dev", "virt12"),
		st(ns1, "sysctl", "-qw", "net.ipv4.ip_forward=1"),
		st(ns1, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0"),
		st(ns1, "sysctl", "-qw", "net.ipv4.conf.default.rp_filter=0"),
	}
	var steps []step
	switch t.Kind {
	case TopoKernel, TopoKernelNoTSO:
		steps = append(steps,
			st(ns0, "ip", "addr", "add", "172.16.20.20/24", "dev", "virt01"),
			st(ns0, "ip", "route", "add", "172.16.21.0/24", "via", "172.16.20.21", "mtu", "lock", "1496"))
		steps = append(steps, kernelNS1...)
		if t.Kind == TopoKernelNoTSO {
			steps = append(steps, st(ns0, "ethtool", "-K", "virt01", "tso", "off", "gso", "off"))
		}
	case TopoUserHost:
		steps = append(steps, kernelNS1...)
	case TopoUDP:
		steps = append(steps,
			st(ns0, "ip", "addr", "add", "192.168.77.20/24", "dev", "virt01"),
			st(ns1, "ip", "addr", "add", "192.168.77.21/24", "dev", "virt10"))
	case TopoUserLSRPeerGRO:
		steps = append(steps, st(ns2, "ethtool", "-K", "virt21", "gro", "on"))
	case TopoUserLSRXDP:
		steps = append(steps, st(ns2, "ethtool", "-K", "virt21", "tx", "off"))
	case TopoTAP:
		steps = append(steps, tapSteps(ns0, ns1)...)
	}
	return steps
}

// tapSteps bridge the veths of ns0 and ns1 for the TAP kind.
func tapSteps(ns0, ns1 string) []step {
	var steps []step
	for _, b := range []struct{ ns, br, member string }{{ns0, "br0", "virt01"}, {ns1, "br10", "virt10"}, {ns1, "br12", "virt12"}} {
		steps = append(steps,
			st(b.ns, "ip", "link", "add", b.br, "type", "bridge"),
			st(b.ns, "ip", "link", "set", b.member, "master", b.br),
			st(b.ns, "ip", "link", "set", b.br, "up"))
	}
	// With br_netfilter loaded (it is here), every bridged frame
	// also runs the namespace's iptables hooks (br_nf_pre_routing,
	// br_nf_forward in the profiles): a cost of the bridges this
	// topology needs, not of TAP. The switches are per namespace.
	if _, err := os.Stat("/proc/sys/net/bridge/bridge-nf-call-iptables"); err == nil {
		for _, ns := range []string{ns0, ns1} {
			steps = append(steps, st(ns, "sysctl", "-q", "-w", "net.bridge.bridge-nf-call-iptables=0",
				"net.bridge.bridge-nf-call-ip6tables=0", "net.bridge.bridge-nf-call-arptables=0"))
		}
	}
	return steps
}

// runSteps runs the steps in order, stopping at the first that fails.
func runSteps(ctx context.Context, steps []step) error {
	for _, s := range steps {
		var err error
		if s.ns == "" {
			err = ipCmd(ctx, s.argv[0], s.argv[1:]...)
		} else {
			err = nsx(ctx, s.ns, s.argv...)
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

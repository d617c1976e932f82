package main

import (
	"context"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
)

// TestRouteShowKernelConnected runs `mplsnode run` (the binary) in a
// namespace and asks it with `mplsnode route show` (the binary, over the
// control socket): its connected route for an address is the line the
// Linux kernel writes for the same address on the peer end of the veth
// ("PREFIX dev DEV proto kernel scope link", the kernel's "src ADDR" left
// out), and each line it prints goes back through `mplsnode route
// replace` (exit 0) and leaves route show as it was but for the connected
// route, now static too. Planted bug (connected routes shown as "scope
// host") caught: the line differs from the kernel's.
func TestRouteShowKernelConnected(t *testing.T) {
	bin := rootBinary(t)
	nsNode, nsKernel := netns.New(t, "cl1"), netns.New(t, "cl2")
	vNode, vKernel := netns.VethPair(t, nsNode, nsKernel)
	nsKernel.MustExec("ip", "addr", "add", "172.16.30.22/24", "dev", vKernel)
	kernelOut := nsKernel.MustExec("ip", "-4", "route", "show") // no filter: ip leaves out the words it filters on
	src := regexp.MustCompile(` src \S+`)
	var kernel []string
	for _, l := range strings.Split(strings.TrimSpace(kernelOut), "\n") {
		kernel = append(kernel, strings.ReplaceAll(src.ReplaceAllString(strings.TrimSpace(l), ""), " dev "+vKernel+" ", " dev DEV "))
	}
	if !slices.Equal(kernel, []string{"172.16.30.0/24 dev DEV proto kernel scope link"}) {
		t.Fatalf("the kernel's connected routes: %q", kernelOut)
	}
	p := startLSR(t, bin, nsNode, "link add "+vNode+" type afpacket\naddr add 172.16.30.21/24 dev "+vNode+
		"\nroute add 10.9.0.0/16 encap mpls 100 via 172.16.30.22\n")
	cli := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", nsNode.Name(), bin}, append(args, "--socket", p.sock)...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := cli("route", "show")
	if err != nil {
		t.Fatalf("route show: %v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var connected []string
	for _, l := range lines {
		if strings.Contains(l, " proto kernel") {
			connected = append(connected, strings.ReplaceAll(l, " dev "+vNode+" ", " dev DEV "))
		}
	}
	if !slices.Equal(connected, kernel) {
		t.Errorf("connected routes: mplsnode shows %q, the kernel %q (route show:\n%s)", connected, kernel, out)
	}
	for _, l := range lines {
		if o, err := cli(append([]string{"route", "replace"}, strings.Fields(l)...)...); err != nil {
			t.Errorf("route replace %s: %v: %s", l, err, o)
		}
	}
	want := slices.Clone(lines)
	want = append(want, strings.TrimSuffix(connectedLine(lines), " proto kernel scope link")+" proto static metric 1")
	slices.Sort(want)
	out, err = cli("route", "show")
	got := strings.Split(strings.TrimSpace(out), "\n")
	slices.Sort(got)
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("route show after replacing each line (%v):\n%s\nwant\n%s", err, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// connectedLine returns the first connected route of route show's lines.
func connectedLine(lines []string) string {
	for _, l := range lines {
		if strings.HasSuffix(l, " proto kernel scope link") {
			return l
		}
	}
	return ""
}

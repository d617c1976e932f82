package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestRouteChangeCommands drives `mplsnode route add|del` and `mplsnode -f
// mpls route add|del` against an in-process node's control socket: a
// change shows in route show, a refusal exits 1 with the node's
// positioned error, and usage errors exit 2 without asking the node.
// (Checked by planting the bug: runRouteChange sending "route show"
// fails the first route show check.)
func TestRouteChangeCommands(t *testing.T) {
	path := statsNode(t)
	mplsnode := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, errs := mplsnode("route", "add", "10.9.0.0/16", "encap", "mpls", "100", "via", "10.2.0.2", "--socket", path)
	if code != exitOK || out != "added: route add 10.9.0.0/16 encap mpls 100 via inet 10.2.0.2 dev b0\n" {
		t.Errorf("route add: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, out, errs = mplsnode("route", "show", "--socket", path); code != exitOK || !strings.Contains(out, "10.9.0.0/16 encap mpls 100 via 10.2.0.2 dev b0") {
		t.Errorf("route show after add: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, out, errs = mplsnode("route", "add", "10.8.0.0/16", "via", "10.2.0.2", "dev", "c0", "--socket="+path)
	if code != exitFailure || out != "" || !strings.Contains(errs, "node answered: control:1:40: unknown device \"c0\"") {
		t.Errorf("route add to an unknown device: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, out, errs = mplsnode("route", "del", "10.9.0.0/16", "--socket", path); code != exitOK || !strings.HasPrefix(out, "removed: route add 10.9.0.0/16 ") {
		t.Errorf("route del: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, out, errs = mplsnode("route", "show", "--socket", path); code != exitOK || strings.Contains(out, "10.9.0.0/16") {
		t.Errorf("route show after del: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, _, errs = mplsnode("route", "del", "10.9.0.0/16", "--socket", path); code != exitFailure || !strings.Contains(errs, "no static route to 10.9.0.0/16") {
		t.Errorf("second route del: exit %d, stderr %q", code, errs)
	}

	if code, out, errs = mplsnode("-f", "mpls", "route", "add", "300", "as", "301", "via", "inet", "10.2.0.2", "--socket", path); code != exitOK || !strings.HasPrefix(out, "added: mpls route add 300 as to 301 via inet 10.2.0.2") {
		t.Errorf("-f mpls route add: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, out, errs = mplsnode("-f", "mpls", "route", "show", "--socket", path); code != exitOK || !strings.Contains(out, "300 as to 301 via 10.2.0.2 dev b0") {
		t.Errorf("-f mpls route show after add: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, out, errs = mplsnode("-f", "mpls", "route", "del", "300", "--socket", path); code != exitOK || !strings.HasPrefix(out, "removed: ") {
		t.Errorf("-f mpls route del: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, out, errs = mplsnode("-f", "mpls", "route", "show", "--socket", path); code != exitOK || strings.Contains(out, "300 as") {
		t.Errorf("-f mpls route show after del: exit %d, stdout %q, stderr %q", code, out, errs)
	}

	for _, args := range [][]string{
		{"route", "add", "--socket", path},
		{"route", "del", "10.9.0.0/16", "via", "10.2.0.2", "--socket", path},
		{"-f", "mpls", "route", "del", "--socket", path},
		{"route", "add", "10.9.0.0/16", "via", "10.2.0.2", "--socket"},
	} {
		if code, _, errs := mplsnode(args...); code != exitUsage {
			t.Errorf("%q: exit %d (stderr %q), want %d", args, code, errs, exitUsage)
		}
	}
}

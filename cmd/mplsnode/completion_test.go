package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCompletionBash loads `mplsnode completion bash` into bash itself
// (the oracle) and asks it to complete command lines as a user's Tab
// would: command names, each command's options as its -h lists them, and
// file names after an option that takes a FILE. Planted bugs: a command
// missing from the list (version), or run's -c not completing files.
func TestCompletionBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("needs bash")
	}
	var script, errb bytes.Buffer
	if code := run(context.Background(), []string{"completion", "bash"}, &script, &errb); code != 0 {
		t.Fatalf("completion bash: exit %d: %s", code, errb.String())
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "completion.bash")
	if err := os.WriteFile(file, script.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ns1.conf"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	complete := func(words ...string) string {
		t.Helper()
		q := make([]string, len(words))
		for i, w := range words {
			q[i] = "'" + w + "'"
		}
		prog := "source " + file + "; COMP_WORDS=(" + strings.Join(q, " ") + "); COMP_CWORD=" +
			strconv.Itoa(len(words)-1) + "; _mplsnode; printf '%s\\n' \"${COMPREPLY[@]}\""
		cmd := exec.Command(bash, "--norc", "-c", prog)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v: %s", err, out)
		}
		return strings.Join(strings.Fields(string(out)), " ")
	}
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"mplsnode", "ve"}, "version"},
		{[]string{"mplsnode", "--ver"}, "--version"},
		{[]string{"mplsnode", "com"}, "completion"},
		{[]string{"mplsnode", "completion", ""}, "bash zsh"},
		{[]string{"mplsnode", "run", "--pc"}, "--pcap"},
		{[]string{"mplsnode", "run", "--metrics"}, "--metrics-addr"},
		{[]string{"mplsnode", "run", "-c", "ns"}, "ns1.conf"},
		{[]string{"mplsnode", "check", "-c", "ns"}, "ns1.conf"},
		{[]string{"mplsnode", "stats", "--j"}, "--json"},
		{[]string{"mplsnode", "help", "st"}, "stats"},
		{[]string{"mplsnode", "ping", "m"}, "mpls"},
		{[]string{"mplsnode", "traceroute", "mpls", "ip"}, "ipv4 ipv6"},
		{[]string{"mplsnode", "traceroute", "mpls", "ipv4", "10.0.0.0/8", "--multi"}, "--multipath"},
	} {
		if got := complete(tc.words...); got != tc.want {
			t.Errorf("complete %q: got %q, want %q", tc.words, got, tc.want)
		}
	}
	// zsh loads the same through bashcompinit, where zsh is installed.
	if zsh, err := exec.LookPath("zsh"); err == nil {
		var z bytes.Buffer
		run(context.Background(), []string{"completion", "zsh"}, &z, &errb)
		zfile := filepath.Join(dir, "completion.zsh")
		if err := os.WriteFile(zfile, z.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(zsh, "-f", "-c", "source "+zfile+"; print -r -- ${_comps[mplsnode]}")
		cmd.Dir, cmd.Env = dir, append(os.Environ(), "HOME="+dir) // compinit writes ~/.zcompdump
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "-F _mplsnode") {
			t.Errorf("zsh: %v: %q; want mplsnode completed by _mplsnode", err, out)
		}
	}
	if code := run(context.Background(), []string{"completion", "fish"}, &script, &errb); code != exitUsage {
		t.Errorf("completion fish: exit %d, want 2", code)
	}
}

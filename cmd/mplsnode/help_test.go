package main

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// longOptionOneDash finds an options-list line that names a long option
// with a single dash ("  -control-socket PATH"), where the usage texts
// write --control-socket.
var longOptionOneDash = regexp.MustCompile(`(?m)^  -[a-zA-Z][a-zA-Z0-9-]+`)

// TestHelpEveryCommand: each command's help, asked as `mplsnode help CMD`,
// `mplsnode CMD --help` and `mplsnode CMD -h`, goes to stdout with exit 0,
// starts with its usage, lists its exit codes, and names long options in
// its options list with two dashes as its usage does. Planted bugs caught:
// route's verb check before the help (exit 2, "want show..."), the
// options list printed by flag.PrintDefaults (-control-socket), netserver's
// usage without its exit codes.
func TestHelpEveryCommand(t *testing.T) {
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range commands {
			if !yield(n) {
				return
			}
		}
	})
	for _, name := range names {
		for _, args := range [][]string{{"help", name}, {name, "--help"}, {name, "-h"}} {
			var out, errb strings.Builder
			got := run(context.Background(), args, &out, &errb)
			if got != exitOK || errb.Len() != 0 {
				t.Errorf("%v: exit %d, stderr %q; want 0 and nothing on stderr", args, got, errb.String())
				continue
			}
			text := out.String()
			if !strings.HasPrefix(text, "usage: mplsnode ") || !strings.Contains(text, name) {
				t.Errorf("%v: stdout does not start with the usage of %s: %q", args, name, firstLine(text))
			}
			if !strings.Contains(text, "Exit code") {
				t.Errorf("%v: the help lists no exit codes", args)
			}
			if m := longOptionOneDash.FindString(text); m != "" {
				t.Errorf("%v: the options list names a long option with one dash: %q", args, m)
			}
		}
	}
}

// TestHelpRouteForms: route's help in ip(8)'s -f mpls form, and with a
// verb; the route usage error names the verbs. Planted bug (the -f mpls
// rewrite putting --mpls before --help, which route then took as its verb
// check's input) caught as exit 2.
func TestHelpRouteForms(t *testing.T) {
	for _, args := range [][]string{
		{"-f", "mpls", "route", "--help"},
		{"-f", "mpls", "route", "-h"},
		{"route", "show", "--help"},
		{"route", "add", "--help"},
		{"route", "replace", "--help"},
		{"-f", "mpls", "route", "show", "--help"},
	} {
		var out, errb strings.Builder
		got := run(context.Background(), args, &out, &errb)
		if got != exitOK || errb.Len() != 0 || !strings.HasPrefix(out.String(), "usage: mplsnode [-f mpls] route") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 0 and route's usage", args, got, firstLine(out.String()), errb.String())
		}
	}
	var out, errb strings.Builder
	if got := run(context.Background(), []string{"route"}, &out, &errb); got != exitUsage || !strings.Contains(errb.String(), "replace") {
		t.Errorf("route: exit %d, stderr %q; want 2 and the verbs", got, errb.String())
	}
}

// TestHelpUnknownCommand: `mplsnode help bogus` is a usage error (exit 2,
// "unknown command" and the usage on stderr, nothing on stdout), as
// `mplsnode bogus` is; plain `mplsnode help` is the usage on stdout with
// exit 0 and the exit codes. Planted bug (help of an unknown name falling
// through to the usage with exit 0) caught.
func TestHelpUnknownCommand(t *testing.T) {
	for _, args := range [][]string{{"help", "bogus"}, {"--help", "bogus"}, {"bogus"}} {
		var out, errb strings.Builder
		got := run(context.Background(), args, &out, &errb)
		if got != exitUsage || out.Len() != 0 || !strings.Contains(errb.String(), `unknown command "bogus"`) || !strings.Contains(errb.String(), "usage: mplsnode") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2, unknown command and the usage on stderr", args, got, out.String(), errb.String())
		}
	}
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}, {"help", "help"}} {
		var out, errb strings.Builder
		got := run(context.Background(), args, &out, &errb)
		if got != exitOK || errb.Len() != 0 || !strings.HasPrefix(out.String(), "usage: mplsnode <command>") || !strings.Contains(out.String(), "Exit codes") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 0 and the usage with exit codes", args, got, out.String(), errb.String())
		}
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// Command mplsnode is the CLI of the mplsnode userspace TCP/IP endpoint and
// MPLS node. It holds flag parsing and wiring only; the logic lives in the
// packages below it. The subcommands are listed in commands.
//
// Exit codes: 0 success, 1 runtime failure, 2 usage error or a feature that
// is not available yet.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"syscall"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// usageError prints a usage error of the named subcommand to stderr
// ("mplsnode NAME: " and the message) and returns exitUsage.
func usageError(stderr io.Writer, name, format string, args ...any) int {
	fmt.Fprintf(stderr, "mplsnode "+name+": "+format+"\n", args...)
	return exitUsage
}

// command is one subcommand. run gets the arguments after the subcommand's
// name and returns the process exit code.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands holds every subcommand by name. init fills it from one table:
// completion and help read commands, so naming their run functions in its
// declaration would make an initialization cycle.
var commands = map[string]command{}

func init() {
	for _, c := range []command{
		{name: "run", summary: "run a node (host, LER, LSR) from a config file", run: runNode},
		{name: "check", summary: "validate a node config file without touching the network", run: runCheck},
		{name: "stats", summary: "print a running node's counters (links, drops, label switch, TCP)", run: runStats},
		{name: "route", summary: "show or change a running node's routes (route show|add|replace|del; -f mpls route ... for the ILM)", run: runRoute},
		{name: "bgp", summary: "show a running node's BGP sessions and routes (summary, neighbor, routes)", run: runBGP},
		{name: "ping", summary: "LSP ping (RFC 8029) from a running node: mplsnode ping mpls ipv4 PREFIX", run: runPing},
		{name: "traceroute", summary: "LSP traceroute (RFC 8029) from a running node: mplsnode traceroute mpls ipv4 PREFIX", run: runTraceroute},
		{name: "netperf", summary: "netperf-compatible client (TCP_STREAM/MAERTS/RR/CRR/CC, UDP_STREAM/RR)", run: runNetperf},
		{name: "netserver", summary: "netserver-compatible server", run: runNetserver},
		{name: "completion", summary: "print a bash or zsh completion script: source <(mplsnode completion bash)", run: runCompletion},
		{name: "version", summary: "print the module version and VCS revision of this binary", run: runVersion},
	} {
		if _, dup := commands[c.name]; dup {
			panic("mplsnode: duplicate command " + c.name)
		}
		commands[c.name] = c
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches to a subcommand.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 && args[1] != "help" {
			c, ok := commands[args[1]]
			if !ok {
				fmt.Fprintf(stderr, "mplsnode help: unknown command %q\n\n", args[1])
				usage(stderr)
				return exitUsage
			}
			return c.run(ctx, []string{"--help"}, stdout, stderr)
		}
		usage(stdout)
		return exitOK
	case "-version", "--version":
		return runVersion(ctx, nil, stdout, stderr)
	}
	// `mplsnode -f mpls route show`, as ip(8) writes it.
	if len(args) >= 3 && args[0] == "-f" && args[1] == "mpls" && args[2] == "route" {
		args = append([]string{"route"}, append(slices.Clone(args[3:]), "--mpls")...)
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "mplsnode: unknown command %q\n\n", args[0])
		usage(stderr)
		return exitUsage
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: mplsnode <command> [arguments]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "  %-10s %s\n", "help", "show this help, or a command's: mplsnode help <command>")
	fmt.Fprintln(w, "\nmplsnode <command> --help explains a command's options and its exit codes.")
	fmt.Fprintln(w, "Exit codes: 0 ok, 1 runtime failure, 2 usage error (an unknown command).")
}

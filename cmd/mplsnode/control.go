package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
)

// controlCall sends one command line to a running node's control socket
// at path and returns the node's answer, read to its close. A deadline of
// ctx bounds the exchange; cancelling ctx (the user's ^C) ends it at once.
// An answer that starts with "error: " is the node's refusal, returned as
// an error.
func controlCall(ctx context.Context, path, line string) ([]byte, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) { // the deadline ends the I/O itself
			c.Close()
		}
	})
	defer stop()
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return nil, err
	}
	body, err := io.ReadAll(c)
	if err != nil {
		return nil, err
	}
	if msg, ok := strings.CutPrefix(string(body), "error: "); ok {
		return nil, fmt.Errorf("node answered: %s", strings.TrimSpace(msg))
	}
	return body, nil
}

// controlError prints the failure of command name's exchange with the
// node on socket (saying how to choose the socket when no node answers
// there) and returns the exit code.
func controlError(stderr io.Writer, name, socket string, err error) int {
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
		fmt.Fprintf(stderr, "mplsnode %s: no node answers on %s: is `mplsnode run` running? (choose the socket with --socket PATH)\n", name, socket)
	} else {
		fmt.Fprintf(stderr, "mplsnode %s: %v\n", name, err)
	}
	return exitFailure
}

package lowerlink_test

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/mplsnode/mplsnode/link/lowerlink"
)

// TestOpenError checks the error a lower link's New returns: a
// *net.OpError naming the link kind and the interface, the first remedy
// for the cause in the message (none when no remedy is for it), and the
// cause still visible to errors.Is.
func TestOpenError(t *testing.T) {
	err := lowerlink.OpenError("tap", "tap7", syscall.EPERM,
		lowerlink.Remedy{Err: syscall.ENOENT, Hint: "load the module"},
		lowerlink.Remedy{Err: syscall.EPERM, Hint: "run as root"},
		lowerlink.Remedy{Err: syscall.EPERM, Hint: "not the first remedy that matches"})
	if !errors.Is(err, syscall.EPERM) {
		t.Errorf("OpenError: %v is not EPERM to errors.Is", err)
	}
	var op *net.OpError
	if !errors.As(err, &op) {
		t.Fatalf("OpenError: got %T, want *net.OpError", err)
	}
	if op.Op != "open" || op.Net != "tap" || op.Addr.Network() != "tap" || op.Addr.String() != "tap7" {
		t.Errorf("OpenError: Op %q Net %q Addr %s/%s, want open tap tap/tap7", op.Op, op.Net, op.Addr.Network(), op.Addr)
	}
	if want := "open tap tap7: operation not permitted (run as root)"; err.Error() != want {
		t.Errorf("OpenError: message %q, want %q", err, want)
	}
	plain := lowerlink.OpenError("xdp", "veth0", syscall.ENODEV, lowerlink.Remedy{Err: syscall.EPERM, Hint: "run as root"})
	if strings.Contains(plain.Error(), "(") || !errors.Is(plain, syscall.ENODEV) {
		t.Errorf("OpenError with no remedy for the cause: %q, want the cause alone", plain)
	}
}

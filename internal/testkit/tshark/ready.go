package tshark

import (
	"strings"

	"github.com/mplsnode/mplsnode/internal/testkit/syncbuf"
)

// Ready reports whether tshark's standard error so far says its capture is
// live. tshark prints "Capturing on 'DEV'" before it even starts dumpcap,
// so a test that sends on that word can send before the socket exists (a
// loaded machine takes seconds to get there) and capture nothing. "Capture
// started." comes when dumpcap has opened the interface with the capture
// filter and created the file: from then on every matching frame is
// captured. (tshark 4.0, Debian's; -Q would silence it.)
func Ready(stderr string) bool {
	return strings.Contains(stderr, "Capture started.")
}

// Stderr collects a tshark's standard error: exec.Cmd writes it from its
// own goroutine while the test reads it.
type Stderr = syncbuf.Buffer

// Package pcaptest opens capture files for tests whose oracle is tshark
// reading what link/pcap wrote.
package pcaptest

import (
	"path/filepath"
	"testing"

	"github.com/mplsnode/mplsnode/internal/testkit/tshark"
	"github.com/mplsnode/mplsnode/link/pcap"
)

// File skips t unless tshark is installed, then creates the capture file
// name in a temporary directory of t's with a writer of options o
// (pcap.Create), closed when t ends if the test did not close it first.
// It returns the file's path and the writer.
func File(t testing.TB, name string, o pcap.Options) (string, *pcap.Writer) {
	t.Helper()
	tshark.Need(t)
	file := filepath.Join(t.TempDir(), name)
	w, err := pcap.Create(file, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return file, w
}

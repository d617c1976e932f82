// Package tshark runs Wireshark's tshark, the tests' independent decoder of
// frames: the oracle that says what a frame we built or captured holds,
// with checksum verification on. It owns nothing in the product: only
// tests import it, and they skip (Need) or note (Installed) its absence;
// scripts/deps.sh installs it.
//
// Typical use:
//
//	tshark.Need(t)
//	file := tshark.WritePcap(t, pcap.LinkTypeEthernet, frames)
//	for _, row := range tshark.Fields(t, file, "mpls.label", "ip.checksum.status") { ... }
package tshark

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/link/pcap"
)

// Installed reports whether tshark is on PATH.
func Installed() bool {
	_, err := exec.LookPath("tshark")
	return err == nil
}

// Need skips t unless tshark is installed.
func Need(t testing.TB) {
	t.Helper()
	if !Installed() {
		t.Skip("needs tshark (Debian package tshark; scripts/deps.sh installs it) as an independent decoder")
	}
}

// WritePcap writes frames, records of the given pcap link type, to a new
// file in t's temporary directory and returns its path.
func WritePcap(t testing.TB, linkType uint32, frames [][]byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "frames.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pcap.NewWriterLinkType(f, 0, linkType)
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(0, 0)
	for _, fr := range frames {
		w.WriteFrame(ts, [][]byte{fr})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// Rows decodes the pcap file with tshark and returns one line a frame: the
// fields' values joined by tabs, empty for a field the frame lacks, several
// occurrences of one field joined by commas. IP, TCP and UDP checksums are
// verified, so their *.checksum.status fields read 1 (good) or 0 (bad);
// frame.md5_hash is the MD5 of the whole frame.
func Rows(t testing.TB, file string, fields ...string) []string {
	t.Helper()
	args := []string{"-r", file, "-T", "fields",
		"-o", "ip.check_checksum:TRUE", "-o", "tcp.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
		"-o", "frame.generate_md5_hash:TRUE"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	cmd := exec.Command("tshark", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr // "Running as user root" and the like
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	s := strings.TrimRight(string(out), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// Fields is Rows split into columns, one a field.
func Fields(t testing.TB, file string, fields ...string) [][]string {
	t.Helper()
	var rows [][]string
	for _, line := range Rows(t, file, fields...) {
		row := strings.Split(line, "\t")
		for len(row) < len(fields) {
			row = append(row, "")
		}
		rows = append(rows, row)
	}
	return rows
}

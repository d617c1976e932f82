package main

import (
	"strconv"
	"strings"
	"testing"
)

// TestKernelFragmentsToConfigServer sends UDP_STREAM datagrams of 8000
// bytes from the kernel (netperf --kernel in its namespace) to our
// netserver on the userspace stack over a 1500-byte veth: Linux fragments
// them and computes their checksums (the oracle), the node's link
// endpoint holds each datagram's fragments, verifies the UDP checksum over
// the whole datagram (link/mplsendpoint/fragsum.go) and hands them to
// gVisor, whose socket must receive them (the server's received rate is
// above 0), over IPv4 and IPv6. With every datagram's sum taken as wrong
// (verifyFragmentSum planted to fail) the server's received rate was 0.
func TestKernelFragmentsToConfigServer(t *testing.T) {
	bin := rootBinary(t)
	nsC, srvLogs := configServer(t, bin, "f", 79)
	for _, host := range []string{"10.79.0.1", "fd00:79::1"} {
		t.Run(host, func(t *testing.T) {
			out, err := kernelNetperf(nsC, bin, "-H", host, "-l", "1", "-t", "UDP_STREAM", "-P", "0", "--", "-m", "8000")
			if err != nil {
				t.Fatalf("netperf: %v: %s\nserver: %s", err, out, srvLogs.String())
			}
			lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
			if len(lines) < 2 {
				t.Fatalf("netperf printed %q: want the client's and the server's lines", out)
			}
			f := strings.Fields(lines[1]) // what the server received
			if v, err := strconv.ParseFloat(f[len(f)-1], 64); err != nil || v <= 0 {
				t.Errorf("server received rate in %q: want > 0\nserver: %s", out, srvLogs.String())
			}
			t.Logf("%s", out)
		})
	}
}

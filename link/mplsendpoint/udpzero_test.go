package mplsendpoint_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
)

// scapyPython is the Debian python3 that has python3-scapy.
const scapyPython = "/usr/bin/python3"

// scapyRows runs script with scapyPython (t skips when scapy is missing;
// a minute at most) and returns the fields of each line of its output
// that has the given number of fields (the other lines are scapy's
// warnings), and the whole output for failure messages.
func scapyRows(t *testing.T, script string, fields int) (rows [][]string, out []byte) {
	t.Helper()
	if err := exec.Command(scapyPython, "-c", "import scapy.all").Run(); err != nil {
		t.Skipf("needs python3-scapy (Debian package; scripts/deps.sh installs it) to craft packets: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, scapyPython, "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("scapy: %v: %s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) == fields {
			rows = append(rows, f)
		}
	}
	return rows, out
}

// udpZeroScapy builds, for IPv4, IPv6 and IPv6 behind a destination
// options header, a UDP datagram whose checksum computes to zero: the
// payload's last word is the checksum the datagram has with that word
// zero, so the full sum is all ones and its complement 0. scapy then
// transmits it as 0xffff (its UDP post_build, after RFC 768) and the
// script insists on that. Each line: name, the IP packet in hex, the
// offset of the UDP header.
const udpZeroScapy = `
from scapy.all import IP, IPv6, IPv6ExtHdrDestOpt, UDP, Raw
def zero(mk):
    body = b"issue 28: sum to zero" + b"\x00"  # even length: the last word is aligned
    p = mk(body + b"\x00\x00")
    c = p.__class__(bytes(p))[UDP].chksum  # scapy's checksum with the last word zero
    q = mk(body + c.to_bytes(2, "big"))
    b = bytes(q)
    got = q.__class__(b)[UDP].chksum
    assert got == 0xffff, hex(got)
    return b, len(b) - len(bytes(q[UDP]))
for name, mk in [
    ("ipv4", lambda pl: IP(src="192.0.2.1", dst="10.0.0.1", id=0x2828, ttl=64)/UDP(sport=53, dport=40000)/Raw(pl)),
    ("ipv6", lambda pl: IPv6(src="2001:db8::1", dst="fd00::a", hlim=64)/UDP(sport=53, dport=40000)/Raw(pl)),
    ("ipv6-destopts", lambda pl: IPv6(src="2001:db8::1", dst="fd00::a", hlim=64)/IPv6ExtHdrDestOpt()/UDP(sport=53, dport=40000)/Raw(pl)),
]:
    b, off = zero(mk)
    print(name, b.hex(), off)
`

// TestFinishPartialUDPChecksumZero: a flagged UDP datagram (the lower
// link says CHECKSUM_PARTIAL: the checksum field holds the pseudo-header
// sum, as veth hands over what a local socket sent) reaching a forwarding
// endpoint has its checksum finished before it goes on (ingress.go,
// checkRX with finish). When the finished checksum computes to zero it
// must be carried as 0xffff (RFC 768: "If the computed checksum is zero,
// it is transmitted as all one bits"; RFC 8200 §8.1 for IPv6, where a
// zero UDP checksum is not allowed at all): the packet delivered must be
// byte for byte the one scapy builds with its own checksum (0xffff).
//
// Guards the RFC 768 rule in finishing a partial checksum (mutant w02).
// Checked by planting the bug: with `final = 0xffff` changed to
// `final = 0` in link/mplsendpoint/ingress.go, every case fails with
// "UDP checksum 0000, want ffff (RFC 768)"; IPv4 would then read as "no
// checksum", IPv6 as a datagram every receiver must drop.
func TestFinishPartialUDPChecksumZero(t *testing.T) {
	rows, out := scapyRows(t, udpZeroScapy, 3)
	for _, f := range rows {
		name := f[0]
		want, err := hex.DecodeString(f[1])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		uoff, err := strconv.Atoi(f[2])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Run(name, func(t *testing.T) {
			v6 := want[0]>>4 == 6
			ulen := len(want) - uoff
			if got := binary.BigEndian.Uint16(want[uoff+6:]); got != 0xffff {
				t.Fatalf("scapy's datagram carries checksum %04x, want ffff", got)
			}
			// The pseudo-header sum (RFC 768; RFC 8200 §8.1), folded and
			// not complemented: what CHECKSUM_PARTIAL leaves in the field.
			var ph uint32
			typ := uint16(0x0800)
			if v6 {
				typ = 0x86dd
				ph = gopacket.ComputeChecksum(want[8:40], 0) + uint32(ulen) + 17
			} else {
				ph = gopacket.ComputeChecksum(want[12:20], 0) + uint32(ulen) + 17
			}
			partial := append([]byte(nil), want...)
			binary.BigEndian.PutUint16(partial[uoff+6:], ^gopacket.FoldChecksum(ph))
			// The datagram must not look complete already.
			if gopacket.FoldChecksum(gopacket.ComputeChecksum(partial[uoff:], 0)+ph) == 0 {
				t.Fatalf("the partial datagram verifies as it is: pick another payload")
			}

			ep, err := mplsendpoint.New(channel.New(8, 1500, macA), mplsendpoint.Options{Tables: &mpls.Tables{}, LinkAddress: macA, Forwarding: true})
			if err != nil {
				t.Fatal(err)
			}
			rec := newRecorder()
			ep.Attach(rec)
			inject(ep, ethFrame(macA, typ, partial), true)
			if len(rec.pkts) != 1 {
				t.Fatalf("got %d packets delivered, want 1 (drops %v)", len(rec.pkts), ep.Stats().Drops)
			}
			got := rec.pkts[0]
			if len(got) != len(want) {
				t.Fatalf("delivered %d bytes, want %d", len(got), len(want))
			}
			if c := binary.BigEndian.Uint16(got[uoff+6:]); c != 0xffff {
				t.Errorf("UDP checksum %04x, want ffff (RFC 768: a computed zero is transmitted as all ones)", c)
			}
			if gopacket.FoldChecksum(gopacket.ComputeChecksum(got[uoff:], 0)+ph) != 0 {
				t.Errorf("the finished datagram does not verify")
			}
			if !bytes.Equal(got, want) {
				t.Errorf("delivered\n% x\nwant (scapy)\n% x", got, want)
			}
		})
	}
	if n := len(rows); n != 3 {
		t.Fatalf("scapy gave %d datagrams, want 3: %s", n, out)
	}
}

#!/usr/bin/python3
"""hostile.py crafts malformed and hostile frames with scapy and writes them
to an interface through an AF_PACKET socket, for node/hostile_netns_test.go.

It is the test's independent frame maker: nothing here comes from
mplsnode's code. The frames are addressed to the LSR's link (--dst) from
--src; the labelled ones carry an IPv4 UDP datagram from 172.16.20.20 (the
seed's host, so ICMP errors have a route back) to 10.10.10.10 port 9.

Usage (inside the sending namespace):

    hostile.py --iface IF --dst MAC --src MAC

then one command per line on stdin:

    CLASS COUNT [SECONDS]

sends COUNT frames of CLASS (spread over SECONDS if given, else as fast as
the socket takes them, a short pause every 50 frames so no queue on the way
overflows) and answers one JSON line:

    {"class": ..., "sent": N, "min_len": ..., "max_len": ..., "seconds": ...,
     "start_unix": ...}

(seconds: how long the sending took; start_unix: when the first frame
was sent, in seconds since the Unix epoch).

"list" answers the class names; EOF ends the program. Errors go to stderr
and end it with status 1.

    hostile.py --corpus DIR --dst MAC --src MAC

writes frame 0 of each class as a Go fuzz seed instead: whole frames to
DIR/FuzzIngress/scapy-CLASS, the bytes after the Ethernet header to
DIR/FuzzParseLabelStack/scapy-CLASS (see link/mplsendpoint/testdata/fuzz
and mpls/testdata/fuzz, made with --dst 02:00:00:00:00:0a --src
02:00:00:00:00:0b, the MACs of FuzzIngress's endpoint and its peer).
"""

import argparse
import json
import os
import socket
import sys
import time

from scapy.all import IP, UDP, Dot1Q, Ether, Raw
from scapy.contrib.mpls import MPLS

LSR_LABEL = 100  # the seed LSR's ILM: 100 pops and forwards to 10.10.10.10
HOST = "172.16.20.20"  # the seed's host (ns0), reachable from the LSR
PEER = "10.10.10.10"  # the kernel peer behind the LSR
PEER_LINK = "172.16.21.22"  # the kernel peer's address on the LSR's other link
MPLS_MC = 0x8848  # RFC 5332 multicast MPLS ethertype
MPLS_MC_MAC = "01:00:5e:80:00:01"  # RFC 5332 §4 multicast MAC for MPLS
BATCH = 50  # frames between pauses when no SECONDS are given


def udp(i, size=32):
    """An IPv4 UDP datagram, made distinct per frame by its source port."""
    return IP(src=HOST, dst=PEER, ttl=64) / UDP(sport=20000 + i % 40000, dport=9) / Raw(b"h" * size)


def entries(n, label=LSR_LABEL, ttl=64, bottom=False):
    """n label stack entries as bytes; only the last has S set, and only if
    bottom. Each distinct entry is built by scapy once and repeated."""
    mid = bytes(MPLS(label=label, s=0, ttl=ttl))
    last = bytes(MPLS(label=label, s=1 if bottom else 0, ttl=ttl))
    return mid * (n - 1) + last


def build(cls, i, dst, src):
    """Frame i of class cls, as bytes."""
    eth = Ether(dst=dst, src=src, type=0x8847)
    if cls == "truncated_stack":
        # 11 whole entries without S, then 2 bytes of a 12th: 60 bytes in
        # all, the Ethernet minimum, so no padding can complete the entry.
        return bytes(eth) + entries(11) + b"\x00\x06"
    if cls == "runt_1to3":
        # 1, 2 or 3 bytes after the Ethernet header: the start of an entry
        # for label 100 without S. Zero padding to 60 bytes (if any) adds
        # entries without S and leaves 2 bytes over: still truncated.
        return bytes(eth) + b"\x00\x06\x40"[: 1 + i % 3]
    if cls == "no_bos_64":
        return bytes(eth) + entries(64)
    if cls == "no_bos_12":
        # 12 entries without S and nothing after: 62 bytes, no padding.
        return bytes(eth) + entries(12)
    if cls == "entries_1000":
        return bytes(eth) + entries(1000, bottom=True) + bytes(udp(i))
    if cls == "ttl_0":
        return bytes(eth / MPLS(label=LSR_LABEL, s=1, ttl=0) / udp(i))
    if cls == "ttl_1":
        return bytes(eth / MPLS(label=LSR_LABEL, s=1, ttl=1) / udp(i))
    if cls == "null_top":  # label 3 (implicit null) on top: never on the wire
        return bytes(eth / MPLS(label=3, s=1, ttl=64) / udp(i))
    if cls == "reserved_top":
        # RFC 3032/7274 reserved labels: router alert, ELI, GAL, OAM
        # alert, 15 (unassigned), cycled; implicit null is null_top's.
        label = (1, 7, 13, 14, 15, 1)[i % 6]
        return bytes(eth / MPLS(label=label, s=1, ttl=64) / udp(i))
    if cls == "unknown_label":
        label = (999, 1048575, 16, 101)[i % 4]  # none is in the LSR's ILM
        return bytes(eth / MPLS(label=label, s=1, ttl=64) / udp(i))
    if cls == "null_middle":
        # IPv4 explicit null on top and in the middle (RFC 4182: pop and
        # go on), then label 777, which the LSR does not know.
        return bytes(eth / MPLS(label=0, s=0, ttl=64) / MPLS(label=0, s=0, ttl=64)
                     / MPLS(label=777, s=1, ttl=64) / udp(i))
    if cls == "bad_ihl":
        ihl = (0, 3, 4)[i % 3]  # below the minimum of 5 words
        return bytes(eth / MPLS(label=LSR_LABEL, s=1, ttl=64)
                     / IP(src=HOST, dst=PEER, ihl=ihl) / UDP(sport=20000 + i, dport=9) / Raw(b"h" * 32))
    if cls == "bad_version":
        version = (0, 5, 7, 15)[i % 4]  # neither 4 nor 6
        return bytes(eth / MPLS(label=LSR_LABEL, s=1, ttl=64)
                     / IP(src=HOST, dst=PEER, version=version) / UDP(sport=20000 + i, dport=9) / Raw(b"h" * 32))
    if cls in ("jumbo", "jumbo_df"):
        # A labelled IPv4 datagram of 4000 bytes, above the 1500-byte link
        # MTU of the LSR's links (the veths carry 9000); with DF it may not
        # be fragmented.
        ip = IP(src=HOST, dst=PEER, ttl=64, flags="DF" if cls == "jumbo_df" else 0)
        return bytes(eth / MPLS(label=LSR_LABEL, s=1, ttl=64) / ip
                     / UDP(sport=20000 + i, dport=9) / Raw(b"h" * (4000 - 28)))
    if cls == "null_bad_version":
        # IPv4 explicit null (popped by the LSR itself) over an IP version
        # that is not 4.
        version = (0, 5, 6, 15)[i % 4]
        return bytes(eth / MPLS(label=0, s=1, ttl=64)
                     / IP(src=HOST, dst=PEER, version=version) / UDP(sport=20000 + i, dport=9) / Raw(b"h" * 32))
    if cls == "null_bad_ihl":
        ihl = (0, 3, 4)[i % 3]
        return bytes(eth / MPLS(label=0, s=1, ttl=64)
                     / IP(src=HOST, dst=PEER, ihl=ihl) / UDP(sport=20000 + i, dport=9) / Raw(b"h" * 32))
    if cls == "v6null_over_v4":
        # IPv6 explicit null over an IPv4 datagram.
        return bytes(eth / MPLS(label=2, s=1, ttl=64) / udp(i))
    # Unlabelled IP with a malformed header, to the LSR's MAC.
    if cls == "plain_bad_version":
        return bytes(Ether(dst=dst, src=src, type=0x0800) / IP(src=HOST, dst=PEER, version=(5, 6, 0)[i % 3])
                     / UDP(sport=20000 + i, dport=9) / Raw(b"h" * 32))
    if cls == "plain_bad_ihl":
        return bytes(Ether(dst=dst, src=src, type=0x0800) / IP(src=HOST, dst=PEER, ihl=(0, 3, 4)[i % 3])
                     / UDP(sport=20000 + i, dport=9) / Raw(b"h" * 32))
    if cls == "plain_v6_bad_version":
        # An IPv4 datagram under the IPv6 ethertype.
        return bytes(Ether(dst=dst, src=src, type=0x86dd)) + bytes(udp(i))
    if cls == "plain_ttl_1":
        # Unlabelled IPv4 with TTL 1 to the kernel's address on the LSR's
        # other link (the LSR routes it; 10.10.10.10 it reaches by label
        # only): the LSR's stack answers time exceeded (rate-limited).
        return bytes(Ether(dst=dst, src=src, type=0x0800) / IP(src=HOST, dst=PEER_LINK, ttl=1)
                     / UDP(sport=20000 + i % 40000, dport=9) / Raw(b"h" * 32))
    if cls == "plain_short_len":
        return bytes(Ether(dst=dst, src=src, type=0x0800) / IP(src=HOST, dst=PEER, len=500)
                     / UDP(sport=20000 + i, dport=9) / Raw(b"h" * 32))
    if cls == "bcast_mpls":
        # Unicast MPLS (0x8847) with a good label, to the broadcast MAC.
        return bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src=src, type=0x8847) / MPLS(label=LSR_LABEL, s=1, ttl=64) / udp(i))
    if cls == "vlan_mpls":
        # Label 100 inside an 802.1Q tag (VLAN 5): this node has no VLANs.
        return bytes(Ether(dst=dst, src=src, type=0x8100) / Dot1Q(vlan=5, type=0x8847) / MPLS(label=LSR_LABEL, s=1, ttl=64) / udp(i))
    if cls == "multicast_mpls":
        return bytes(Ether(dst=MPLS_MC_MAC, src=src, type=MPLS_MC) / MPLS(label=LSR_LABEL, s=1, ttl=64) / udp(i))
    raise ValueError("unknown class " + cls)


CLASSES = ["truncated_stack", "runt_1to3", "no_bos_64", "no_bos_12", "entries_1000", "ttl_0", "ttl_1",
           "reserved_top", "null_top", "unknown_label", "null_middle", "bad_ihl", "bad_version",
           "null_bad_version", "null_bad_ihl", "v6null_over_v4", "jumbo", "jumbo_df",
           "plain_bad_version", "plain_bad_ihl", "plain_v6_bad_version", "plain_short_len", "plain_ttl_1",
           "multicast_mpls", "bcast_mpls", "vlan_mpls"]


def go_bytes(b):
    """b as a Go []byte literal of a fuzz corpus file."""
    q = "".join(chr(c) if 0x20 <= c < 0x7f and c not in (0x22, 0x5c) else "\\x%02x" % c for c in b)
    return 'go test fuzz v1\n[]byte("%s")\n' % q


def write_corpus(root, dst, src):
    """Writes frame 0 of each class as a seed of the Go fuzz targets:
    FuzzIngress (link/mplsendpoint, the whole frame) and
    FuzzParseLabelStack (mpls, the bytes after the Ethernet header)."""
    targets = {"FuzzIngress": lambda f: f,
               "FuzzParseLabelStack": lambda f: f[14:]}
    for target, part in targets.items():
        d = os.path.join(root, target)
        os.makedirs(d, exist_ok=True)
        for cls in CLASSES:
            with open(os.path.join(d, "scapy-" + cls.replace("_", "-")), "w") as f:
                f.write(go_bytes(part(build(cls, 0, dst, src))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iface", help="interface to send on")
    ap.add_argument("--dst", required=True, help="destination MAC (the LSR's link)")
    ap.add_argument("--src", required=True, help="source MAC")
    ap.add_argument("--corpus", metavar="DIR",
                    help="write one frame of each class as Go fuzz seeds under DIR/<target>/ and exit")
    args = ap.parse_args()
    if args.corpus:
        write_corpus(args.corpus, args.dst, args.src)
        return
    if not args.iface:
        ap.error("--iface is required to send")
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    s.bind((args.iface, 0))
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "list":
            print(json.dumps({"classes": CLASSES}), flush=True)
            continue
        cls, count = words[0], int(words[1])
        seconds = float(words[2]) if len(words) > 2 else 0.0
        frames = [build(cls, i, args.dst, args.src) for i in range(count)]
        start_unix = time.time()
        start = time.monotonic()
        for i, f in enumerate(frames):
            if seconds > 0:
                # Pace: frame i leaves no earlier than i/count of the way.
                due = start + seconds * i / count
                now = time.monotonic()
                if due > now:
                    time.sleep(due - now)
            elif i and i % BATCH == 0:
                time.sleep(0.002)
            n = s.send(f)
            if n != len(f):
                raise OSError("short send of %d of %d bytes" % (n, len(f)))
        took = time.monotonic() - start
        print(json.dumps({"class": cls, "sent": count, "min_len": min(map(len, frames)),
                          "max_len": max(map(len, frames)), "seconds": took,
                          "start_unix": start_unix}), flush=True)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # report and fail loudly
        print("hostile.py: %s" % e, file=sys.stderr)
        sys.exit(1)

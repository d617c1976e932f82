#!/usr/bin/python3
"""issue12.py crafts issues 12's and 22's hostile frames with scapy and
sends them, for cmd/mplsnode/issue12_netns_test.go: the test's independent
frame maker (nothing here comes from mplsnode's code).

Usage (inside the sending namespace):

    issue12.py --iface IF --dst MAC --src MAC CLASS COUNT

sends COUNT frames of CLASS to the seed LSR (--dst, label 100 pops towards
10.10.10.10, label 200 swaps to 300 towards it) back to back and prints {"class": ..., "sent": N, "len": L}.

    issue12.py --corpus DIR --dst MAC --src MAC

writes frame 0 of each class as a Go fuzz seed under DIR/FuzzForward/.
"""

import argparse
import json
import os
import socket
import sys

from scapy.all import IP, TCP, UDP, Ether, IPv6, Raw
from scapy.contrib.mpls import MPLS

LSR_LABEL = 100  # the seed LSR pops 100 towards 10.10.10.10
SWAP_LABEL = 200  # and swaps 200 to 300 towards it
HOST = "172.16.20.20"  # the seed's host on the LSR's ingress subnet
PEER = "10.10.10.10"  # the kernel behind the LSR
MSS = 1456  # full-size segments: 1500-byte link MTU less one label, IP and TCP headers


def udp(src, i):
    return IP(src=src, dst=PEER, ttl=64) / UDP(sport=20000 + i, dport=9) / Raw(b"h" * 32)


def segment(i, bad):
    """Full-size ACK segment i of one flow (contiguous sequence numbers,
    DF), with a wrong TCP ("tcp") or IPv4 header ("ip") checksum: scapy
    computes the right one, which is then flipped."""
    p = IP(src=HOST, dst=PEER, ttl=64, flags="DF", id=i) / TCP(
        sport=40000, dport=9, flags="A", seq=1000 + i * MSS, ack=1, window=512) / Raw(bytes((i + k) % 251 for k in range(MSS)))
    p = IP(bytes(p))  # fills in the checksums
    if bad == "tcp":
        p[TCP].chksum ^= 0x5A5A
    else:
        p[IP].chksum ^= 0x5A5A
    return p


def build(cls, i, dst, src):
    eth = Ether(dst=dst, src=src, type=0x8847)
    if cls == "null_v4_trunc":  # the 23-byte frame
        return bytes(eth / MPLS(label=LSR_LABEL, s=0, ttl=1) / MPLS(label=0, s=1, ttl=64) / Raw(b"\x45"))
    if cls == "null_v6_trunc":
        return bytes(eth / MPLS(label=LSR_LABEL, s=0, ttl=1) / MPLS(label=2, s=1, ttl=64) / Raw(b"\x60"))
    if cls == "implicit_null_under":
        return bytes(eth / MPLS(label=LSR_LABEL, s=0, ttl=64) / MPLS(label=3, s=1, ttl=64) / udp(HOST, i))
    if cls == "gal_under":
        return bytes(eth / MPLS(label=LSR_LABEL, s=0, ttl=64) / MPLS(label=13, s=1, ttl=64) / udp(HOST, i))
    if cls == "reserved_under":
        label = (1, 4, 5, 6, 8, 9, 10, 11, 12, 14, 15)[i % 11]
        return bytes(eth / MPLS(label=LSR_LABEL, s=0, ttl=64) / MPLS(label=label, s=1, ttl=64) / udp(HOST, i))
    if cls == "bcast_src_ttl1":  # the subnet broadcast of 172.16.20.0/24
        return bytes(eth / MPLS(label=LSR_LABEL, s=1, ttl=1) / udp("172.16.20.255", i))
    if cls == "own_src_ttl1":  # the LSR's own address on that link
        return bytes(eth / MPLS(label=LSR_LABEL, s=1, ttl=1) / udp("172.16.20.21", i))
    if cls in ("bad_tcp_csum", "bad_ip_csum"):
        return bytes(eth / MPLS(label=LSR_LABEL, s=1, ttl=64) / segment(i, cls[4:-5]))
    # Frames a router must drop, which no plane may forward.
    mpls = Ether(dst=dst, src=src, type=0x8847)
    u = udp(HOST, i)
    if cls == "no_bottom":  # 11 entries without S, then 2 bytes
        return bytes(mpls / Raw(bytes.fromhex("00064040" * 11 + "0000")))
    if cls == "too_deep":  # 16 entries without S, the 17th with it
        return bytes(mpls / Raw(bytes.fromhex("00064040" * 16 + "00064140")) / u)
    if cls == "implicit_null_swap":
        return bytes(eth / MPLS(label=SWAP_LABEL, s=0, ttl=64) / MPLS(label=3, s=1, ttl=64) / u)
    if cls == "implicit_null_mid":
        return bytes(eth / MPLS(label=SWAP_LABEL, s=0, ttl=64) / MPLS(label=3, s=0, ttl=64) /
                     MPLS(label=LSR_LABEL, s=1, ttl=64) / u)
    if cls == "ip_len_below_header":  # total length 10 or 19, the checksum right
        return bytes(eth / MPLS(label=LSR_LABEL, s=1, ttl=64) / IP(bytes(IP(src=HOST, dst=PEER, len=(10, 19)[i % 2]) / UDP(dport=9) / Raw(b"h" * 8))))
    if cls == "ip_len_beyond":  # total length 200 in a 44-byte packet
        return bytes(eth / MPLS(label=LSR_LABEL, s=1, ttl=64) / IP(bytes(IP(src=HOST, dst=PEER, len=200) / UDP(dport=9) / Raw(b"h" * 16))))
    if cls == "ip6_short":  # IPv6 payload length 500 in a 25-byte packet
        return bytes(eth / MPLS(label=LSR_LABEL, s=1, ttl=64) / Raw(bytes(IPv6(src="2001:db8::1", dst="2001:db8::2", plen=500, nh=17))[:25]))
    if cls == "ip6_plen0":  # payload length 0 and 23 bytes after the header
        return bytes(eth / MPLS(label=LSR_LABEL, s=1, ttl=64) / IPv6(src="2001:db8::1", dst="2001:db8::2", plen=0, nh=59) / Raw(b"t" * 23))
    if cls in ("inner_ttl0_ll", "inner_ttl1_ll"):  # link-local source: no ICMP back
        return bytes(eth / MPLS(label=LSR_LABEL, s=1, ttl=64) / IP(src="169.254.1.1", dst=PEER, ttl=int(cls[9])) / UDP(sport=20000 + i, dport=9) / Raw(b"h" * 32))
    if cls == "ll_src_ttl1":  # a link-local source gets no ICMP
        return bytes(eth / MPLS(label=LSR_LABEL, s=1, ttl=1) / udp("169.254.1.1", i))
    if cls == "net_src_ttl1":  # nor the subnet's network address
        return bytes(eth / MPLS(label=LSR_LABEL, s=1, ttl=1) / udp("172.16.20.0", i))
    raise ValueError("unknown class " + cls)


CLASSES = ["null_v4_trunc", "null_v6_trunc", "implicit_null_under", "gal_under", "reserved_under",
           "bcast_src_ttl1", "own_src_ttl1", "bad_tcp_csum", "bad_ip_csum",
           "no_bottom", "too_deep", "implicit_null_swap", "implicit_null_mid", "ip_len_below_header",
           "ip_len_beyond", "ip6_short", "ip6_plen0", "inner_ttl0_ll", "inner_ttl1_ll", "ll_src_ttl1", "net_src_ttl1"]


def go_bytes(b):
    q = "".join(chr(c) if 0x20 <= c < 0x7f and c not in (0x22, 0x5c) else "\\x%02x" % c for c in b)
    return 'go test fuzz v1\n[]byte("%s")\n' % q


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iface")
    ap.add_argument("--dst", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--corpus", metavar="DIR")
    ap.add_argument("cls", nargs="?")
    ap.add_argument("count", nargs="?", type=int, default=1)
    args = ap.parse_args()
    if args.corpus:
        d = os.path.join(args.corpus, "FuzzForward")
        os.makedirs(d, exist_ok=True)
        for cls in CLASSES:
            with open(os.path.join(d, "scapy-" + cls.replace("_", "-")), "w") as f:
                f.write(go_bytes(build(cls, 0, args.dst, args.src)))
        return
    frames = [build(args.cls, i, args.dst, args.src) for i in range(args.count)]
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    s.bind((args.iface, 0))
    for f in frames:
        if s.send(f) != len(f):
            raise OSError("short send")
    print(json.dumps({"class": args.cls, "sent": len(frames), "len": len(frames[0])}), flush=True)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:
        print("issue12.py: %s" % e, file=sys.stderr)
        sys.exit(1)

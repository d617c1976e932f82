#!/usr/bin/python3
"""Craft TCP SYNs (with payload) for link/xdp's checksum tests.

The "partial" frame carries, in its TCP checksum field, the folded
pseudo-header sum: what Linux leaves there for a CHECKSUM_PARTIAL packet.
Its payload makes the real checksum differ from that value, so the frame is
corrupt. The "good" frame is the same SYN, from another source port, with the
checksum scapy computes. Sends the partial frame, then the good one, on
--iface, and prints one line per frame: "sent KIND HEX". With --sniff it also
listens for the SYN-ACKs of --dst and prints "synack DPORT" for each one seen
until the good frame's SYN-ACK arrives (or --timeout passes).
"""
import argparse
import socket
import struct
import sys
import time

from scapy.all import AsyncSniffer, Ether, IP, TCP, Raw, sendp


def fold(s):
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def words(b):
    if len(b) % 2:
        b += b"\0"
    return sum(struct.unpack("!%dH" % (len(b) // 2), b))


def pseudo_sum(src, dst, l4len):
    return fold(words(socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, l4len)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iface", required=True)
    ap.add_argument("--dst-mac", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--dst", required=True)
    ap.add_argument("--dport", type=int, required=True)
    ap.add_argument("--bad-sport", type=int, default=40001)
    ap.add_argument("--good-sport", type=int, default=40002)
    ap.add_argument("--sniff", action="store_true")
    ap.add_argument("--timeout", type=float, default=30)
    a = ap.parse_args()

    payload = Raw(b"partial-form checksum, wrong data" * 4)
    syn = lambda sport: Ether(dst=a.dst_mac) / IP(src=a.src, dst=a.dst, ttl=64) / TCP(
        sport=sport, dport=a.dport, flags="S", seq=1000, window=8192) / payload

    bad = syn(a.bad_sport)
    l4 = bytes(bad[TCP])
    psum = pseudo_sum(a.src, a.dst, len(l4))
    good_csum = Ether(bytes(bad))[TCP].chksum  # what a full checksum would be
    assert good_csum != psum, "the pseudo-header sum happens to be the real checksum: change the payload"
    bad[TCP].chksum = psum
    bad = Ether(bytes(bad))
    good = Ether(bytes(syn(a.good_sport)))

    sniffer = None
    if a.sniff:
        def is_good_synack(p):
            return TCP in p and p[TCP].flags & 0x12 == 0x12 and p[TCP].dport == a.good_sport
        sniffer = AsyncSniffer(iface=a.iface, filter="tcp and src host %s" % a.dst,
                               stop_filter=is_good_synack, timeout=a.timeout, store=True)
        sniffer.start()
        # AsyncSniffer opens its socket in its thread and defines stop_cb
        # after: wait for it, so that no SYN-ACK can come before it listens.
        deadline = time.monotonic() + 20
        while getattr(sniffer, "stop_cb", None) is None:
            if time.monotonic() > deadline:
                sys.exit("the sniffer did not start within 20 s")
            time.sleep(0.05)
    for kind, f in (("partial", bad), ("good", good)):
        sendp(f, iface=a.iface, verbose=False)
        print("sent", kind, bytes(f).hex(), flush=True)
    if sniffer is not None:
        sniffer.join()
        for p in sniffer.results or []:
            if TCP in p and p[TCP].flags & 0x12 == 0x12:
                print("synack", p[TCP].dport, flush=True)


if __name__ == "__main__":
    main()

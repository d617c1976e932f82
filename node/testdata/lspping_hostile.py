# Crafts MPLS echo requests (RFC 8029) with scapy for node's
# TestLSPPingHostile, independently of package lspping: each labelled
# (label 200, TTL 64) over IPv4 with the router alert option, UDP from
# port 40000 to 3503, the echo message packed here by hand.
#
# usage: lspping_hostile.py IFACE DST_MAC SRC_IP CASE COUNT RATE
#   CASE: good | truncated | badlen | unknown | notlocal | flood
# Prints the seconds the sending took.
import socket
import struct
import sys
import time

from scapy.all import Ether, IP, UDP, Raw, sendp, conf
from scapy.contrib.mpls import MPLS
from scapy.layers.inet import IPOption_Router_Alert

iface, dmac, src, case, count, rate = sys.argv[1:7]
count, rate = int(count), float(rate)
conf.verb = 0


def header(seq):
    # version 1, flags 0, request, reply mode 2, code 0, subcode 0,
    # handle, sequence number, timestamps sent and received
    return struct.pack("!HHBBBBIIQQ", 1, 0, 1, 2, 0, 0, 0x5ca9, seq, 0, 0)


def tlv(typ, value, length=None):
    n = len(value) if length is None else length
    pad = b"\0" * (-len(value) % 4)
    return struct.pack("!HH", typ, n) + value + pad


# LDP IPv4 prefix sub-TLV 10.10.10.10/32 in a Target FEC Stack TLV
ldp = tlv(1, socket.inet_aton("10.10.10.10") + bytes([32]))
fec = tlv(1, ldp)


def message(seq):
    if case == "truncated":
        return header(seq) + struct.pack("!HH", 1, 40) + ldp
    if case == "badlen":
        return header(seq) + tlv(1, tlv(1, socket.inet_aton("10.10.10.10")))
    if case == "unknown":
        return header(seq) + fec + tlv(99, b"\x01\x02\x03\x04")
    return header(seq) + fec


dst = "172.16.21.22" if case == "notlocal" else "127.0.0.1"
pkts = [
    Ether(dst=dmac)
    / MPLS(label=200, s=1, ttl=64)
    / IP(src=src, dst=dst, ttl=1, options=[IPOption_Router_Alert()])
    / UDP(sport=40000, dport=3503)
    / Raw(message(i + 1))
    for i in range(count)
]
start = time.monotonic()
if count == 1:
    sendp(pkts[0], iface=iface)
else:
    s = conf.L2socket(iface=iface)
    gap = 1.0 / rate
    for i, p in enumerate(pkts):
        s.send(p)
        delay = start + (i + 1) * gap - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    s.close()
print("%.3f" % (time.monotonic() - start))

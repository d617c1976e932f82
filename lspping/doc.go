// Package lspping owns MPLS echo request and reply (LSP ping and LSP
// traceroute, RFC 8029) with no I/O and no gVisor:
//
//   - the message codec (Decode, Message.Append): the fixed header
//     (version, global flags, message type, reply mode, return code and
//     subcode, sender's handle, sequence number, NTP timestamps) and the
//     TLVs: Target FEC Stack (sub-TLVs LDP, BGP labeled and generic IPv4
//     and IPv6 prefixes, Nil FEC), Downstream Detailed Mapping with its
//     multipath and label stack sub-TLVs, Interface and Label Stack,
//     Errored TLVs, Pad and Reply TOS; every other TLV is kept as bytes,
//     the mandatory ones (type below 32768) listed so that a responder
//     answers return code 2;
//   - the return codes and subcodes of RFC 8029 §3.1 as named constants
//     with the RFC's words (ReturnCode.String, ReturnCode.Describe);
//   - the IP and UDP around a request (BuildIP, ParseIP, IsRequest: a
//     127/8 or ::ffff:127/104 destination, UDP port 3503);
//   - the responder's decision (Respond): a request, how it arrived (the
//     label stack received, whether its TTL ran out here) and the node's
//     tables in, the reply (return code, Downstream Detailed Mappings
//     naming the next hops and the labels pushed, multipath information)
//     or the reason none is sent out. Both forwarding planes hand their
//     echo requests to the same decision, so they give the same answer.
//
// Every read of a received message is bounds-checked; a malformed message
// is a *DecodeError with the byte offset and what was wrong, matching
// ErrMalformed.
package lspping

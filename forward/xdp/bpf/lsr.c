// SPDX-License-Identifier: (MIT OR GPL-2.0)
//
// lsr.c: mplsnode's label switch as an XDP program (package forward/xdp).
//
// For a labelled frame addressed to the ingress link whose top label has an
// ILM entry that the program may carry (swap to at most MAX_OUT labels, or
// pop and forward) towards a resolved neighbour on a healthy egress link, it
// rewrites the frame exactly as the userspace label switch would (RFC 3032
// TTL rule, RFC 3443 TTL models, Ethernet rewrite) and redirects it to the
// egress link. Everything else is passed up (XDP_PASS) untouched to the
// userspace path, and the reason is counted in `counters`. What it carries
// is counted per incoming label in `label_stats`.
//
// What it never carries, so that it never sends on what userspace would
// drop: a label stack without a bottom-of-stack entry within MAX_DEPTH
// entries (cut short, no S bit, or too deep, also once a swap has pushed
// its labels), label 3 (implicit null, signalled but never sent: RFC 3032
// §2.1) anywhere in it, and, under a popped bottom label or in IP transit,
// an IP packet that is not whole (IPv4 total length below its header or
// beyond the frame, IPv6 payload beyond the frame) or an IPv4 header whose
// checksum does not verify (RFC 1812 §5.2.2). Bytes after the IP packet
// (Ethernet padding) are trimmed, as userspace sends the IP packet alone.
//
// TTL: the label TTL must be above 1 in both models. Uniform: the exposed
// label or the IP header gets the label TTL - 1. Pipe: the exposed label or
// the IP header keeps its own TTL, decremented by one for this hop (the
// node forwards the packet), and passed up when that TTL is 0 or 1.
//
// Regenerate lsr_bpfel.o and lsr_bpfel.go with `make bpf` (go generate
// ./forward/xdp; needs clang). Both are committed so builds need no
// compiler.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define MAX_OUT 4

// Deepest label stack walked, received or sent (mpls.DefaultMaxDepth, the
// userspace endpoint's default MaxLabels).
#define MAX_DEPTH 16

// Label 3, implicit null: never on the wire (RFC 3032 §2.1).
#define LABEL_IMPLICIT_NULL 3

// ILM actions (mirror forward/xdp's Go constants).
#define ACTION_SWAP 1
#define ACTION_POP_FORWARD 2
#define ACTION_ECMP 3 // several next hops: userspace hashes the flow

// Payload bindings (mirror mpls.Payload).
#define PAYLOAD_NONE 0
#define PAYLOAD_IPV4 1
#define PAYLOAD_IPV6 2

// Entry flags.
#define FLAG_RESOLVED 1  // dst holds the next hop's MAC address
#define FLAG_EGRESS_OK 2 // the egress link takes redirected frames

// TTL models (mirror mpls.TTLModel).
#define TTL_UNIFORM 0
#define TTL_PIPE 1

// Counter indexes (mirror forward/xdp's Reason constants and names).
enum reason {
	R_SWAPPED = 0,         // redirected after a swap
	R_POPPED_LABELLED,     // redirected after a pop, still labelled
	R_POPPED_IP,           // redirected after a pop to IP
	R_PASS_NOT_MPLS,       // not unicast MPLS over Ethernet: the stack's
	R_PASS_NOT_FOR_US,     // MPLS to another MAC (userspace: not_for_us)
	R_PASS_TRUNCATED,      // the frame ends inside a label entry
	R_PASS_RESERVED_LABEL, // reserved label on top or under a popped one
	R_PASS_NO_ILM_ENTRY,   // unknown label, or one the program does not carry
	R_PASS_TTL_EXPIRED,    // TTL 0 or 1: userspace sends ICMP (RFC 4950)
	R_PASS_NO_NEIGHBOR,    // next hop MAC not resolved yet
	R_PASS_EGRESS_DOWN,    // egress link not taking redirects
	R_PASS_MTU_EXCEEDED,   // frame over the egress MTU: userspace fragments or sends ICMP
	R_PASS_UNKNOWN_PAYLOAD, // popped payload not IP, or an IP header cut short
	R_PASS_ADJUST_FAILED,  // the kernel refused to move the frame head
	R_DROP_INTERNAL,       // a bound the verifier needs failed after a rewrite (never seen)
	R_IP_FORWARDED,        // IP transit redirected (FIB), with or without labels pushed
	R_IP_PUSHED,           // of those, with a label stack pushed (LER)
	R_PASS_LOCAL,          // IP to one of the node's addresses: the stack's
	R_PASS_NOT_TRANSIT,    // IP to multicast, broadcast, loopback, link-local, unspecified
	R_PASS_MARTIAN_SOURCE, // IP from the node's own, a non-host or link-local address
	R_PASS_NO_ROUTE,       // no FIB entry (userspace sends ICMP unreachable)
	R_PASS_ECMP,           // FIB or ILM entry with several next hops (flow hash in userspace)
	R_PASS_FIB_NOT_CARRIED, // FIB entry the program does not carry (see forward/xdp)
	R_PASS_CHECKSUM_PARTIAL, // TCP/UDP checksum field in Linux's partial form: userspace finishes it
	R_PASS_MULTI_BUFFER,   // frame in several buffers (a veth MTU above a page): userspace forwards it
	R_PASS_NO_BOTTOM_OF_STACK, // the frame ends after whole label entries, none with S
	R_PASS_LABEL_STACK_TOO_DEEP, // no S within MAX_DEPTH entries, received or after a swap's push
	R_PASS_IMPLICIT_NULL,  // label 3 anywhere in the stack: userspace drops it (implicit_null_label)
	R_PASS_BAD_CHECKSUM,   // IPv4 header checksum does not verify: userspace drops it
	R_PASS_MALFORMED_IP,   // IP length field contradicting the packet: userspace drops it
	R_MAX,
};

struct ilm_value {
	__u8 action;
	__u8 n_out;
	__u8 payload;
	__u8 flags;
	__u32 ifindex; // egress link
	__u32 mtu;     // egress link MTU
	__u8 dst[6];   // next hop MAC
	__u8 src[6];   // egress link MAC
	__u32 out[MAX_OUT];
};

// Ingress flags.
#define INGRESS_MPLS 1 // labelled frames may be switched (net.mpls.conf.DEV.input=1)

struct ingress_value {
	__u8 mac[6];
	__u16 flags;
};

// FIB entry kinds (mirror forward/xdp's Go constants): FIB_FORWARD is
// carried; the others are markers that pass the frame up with a reason, so
// that a prefix the program does not carry never falls through to a
// shorter one that it does.
#define FIB_FORWARD 1
#define FIB_LOCAL 2       // one of the node's addresses (or subnet broadcast)
#define FIB_NOT_TRANSIT 3 // multicast, loopback, link-local, unspecified, broadcast
#define FIB_ECMP 4        // several next hops
#define FIB_NOT_CARRIED 5 // carried by userspace only
#define FIB_ON_LINK 6     // on-link prefix: only resolved hosts are carried (/32, /128)

struct fib4_key {
	__u32 prefixlen;
	__u8 addr[4];
};

struct fib6_key {
	__u32 prefixlen;
	__u8 addr[16];
};

struct fib_value {
	__u8 kind;
	__u8 n_out;     // labels pushed (0: plain IP)
	__u8 flags;     // FLAG_RESOLVED, FLAG_EGRESS_OK
	__u8 label_ttl; // TTL of pushed labels; 0: the decremented IP TTL
	__u32 ifindex;  // egress link
	__u32 mtu;      // largest IP packet sent as is
	__u8 dst[6];    // next hop MAC
	__u8 src[6];    // egress link MAC
	__u32 out[MAX_OUT];
};

struct settings {
	__u32 ttl_model;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct ilm_value);
} ilm SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct ingress_value);
} ingress SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} egress SEC(".maps");

#ifndef FIB_MAX
#define FIB_MAX 65536 // per family; the Go side may change it at load
#endif

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, FIB_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct fib4_key);
	__type(value, struct fib_value);
} fib4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, FIB_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct fib6_key);
	__type(value, struct fib_value);
} fib6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct settings);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, R_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

// Packets and bytes per incoming label of the frames the program carries
// (forward/xdp LabelStats; the userspace plane counts the frames passed
// up). Apart from the ilm map, which the userspace mirror rewrites, so the
// counts survive every sync.
struct label_count {
	__u64 packets;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct label_count);
} label_stats SEC(".maps");

static __always_inline int count(__u32 r, int action)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &r);
	if (c)
		*c += 1;
	return action;
}

// count_label counts a frame the program carries under its incoming (top)
// label: bytes is its length from the label stack on, as received. The
// entry is made on a label's first frame; a full map (as many labels as
// the ILM map holds) leaves a new label uncounted, never the frame
// unforwarded.
static __always_inline void count_label(__u32 label, __u32 bytes)
{
	struct label_count *c = bpf_map_lookup_elem(&label_stats, &label);
	if (!c) {
		struct label_count zero = {};
		bpf_map_update_elem(&label_stats, &label, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&label_stats, &label);
		if (!c)
			return;
	}
	c->packets += 1;
	c->bytes += bytes;
}

static __always_inline int mac_equal(const __u8 *a, const __u8 *b)
{
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3] && a[4] == b[4] &&
	       a[5] == b[5];
}

static __always_inline void write_eth(__u8 *p, const struct ilm_value *v, __u16 proto)
{
	__builtin_memcpy(p, v->dst, 6);
	__builtin_memcpy(p + 6, v->src, 6);
	*(__u16 *)(p + 12) = bpf_htons(proto);
}

static __always_inline __u32 encode_label(__u32 label, __u32 tc, int s, __u32 ttl)
{
	return bpf_htonl((label & 0xfffff) << 12 | (tc & 7) << 9 | (s ? 1 : 0) << 8 | (ttl & 0xff));
}

// csum_replace16 updates the Internet checksum *sum for one 16-bit word
// changing from old to new (RFC 1624 eqn. 3), in network byte order.
static __always_inline void csum_replace16(__u16 *sum, __u16 old, __u16 new)
{
	__u32 s = (__u16)~bpf_ntohs(*sum) + (__u32)(__u16)~bpf_ntohs(old) + (__u32)bpf_ntohs(new);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	*sum = bpf_htons((__u16)~s);
}

static __always_inline int fib_pass(const struct fib_value *f)
{
	switch (f->kind) {
	case FIB_LOCAL:
		return count(R_PASS_LOCAL, XDP_PASS);
	case FIB_NOT_TRANSIT:
		return count(R_PASS_NOT_TRANSIT, XDP_PASS);
	case FIB_ECMP:
		return count(R_PASS_ECMP, XDP_PASS);
	case FIB_ON_LINK:
		return count(R_PASS_NO_NEIGHBOR, XDP_PASS);
	}
	return count(R_PASS_FIB_NOT_CARRIED, XDP_PASS);
}

static __always_inline __u32 sum16(const __u8 *p, int words)
{
	__u32 s = 0;
	for (int i = 0; i < words; i++)
		s += ((__u32)p[2 * i] << 8) | p[2 * i + 1];
	return s;
}

// partial_form reports whether the TCP or UDP header at l4 (l4len bytes
// of transport header and data) holds in its checksum field what Linux
// leaves there in a CHECKSUM_PARTIAL packet: the folded pseudo-header sum,
// not complemented (link/xdp's partialChecksum). A veth peer with TX
// checksum offload sends its own segments so, and a redirect would lose
// the kernel's note that the sum is unfinished: such frames go up to
// userspace, which finishes them. Returns -1 when l4 is cut short.
static __always_inline int partial_form(__u8 *l4, void *end, __u8 proto, const __u8 *addrs, int addr_words, __u32 l4len)
{
	__u8 *field;
	if (proto == 6) {
		if ((void *)(l4 + 20) > end)
			return -1;
		field = l4 + 16;
	} else if (proto == 17) {
		if ((void *)(l4 + 8) > end)
			return -1;
		field = l4 + 6;
	} else {
		return 0;
	}
	__u32 s = sum16(addrs, addr_words) + proto + l4len;
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	__u32 f = ((__u32)field[0] << 8) | field[1];
	return f == s || (f == 0 && s == 0xffff) || (f == 0xffff && s == 0);
}

// walk_stack walks the received label stack at p (len bytes to the end of
// the frame) as userspace's mpls.ParseStack does with MAX_DEPTH: it
// returns R_MAX and the number of entries in *depth when an entry with S
// ends the stack within MAX_DEPTH entries, else the reason the stack is
// not carried (no_bottom_of_stack, truncated_label_stack,
// label_stack_too_deep, in ParseStack's order). *null_below says whether
// an entry under the top one holds label 3 (the top one is judged as a
// reserved label).
static __always_inline int walk_stack(__u8 *p, void *end, __u32 len, __u32 *depth, int *null_below)
{
	for (int i = 0; i < MAX_DEPTH; i++) {
		__u8 *e = p + 4 * i;
		if ((void *)(e + 4) > end)
			return len == 4 * (__u32)i ? R_PASS_NO_BOTTOM_OF_STACK : R_PASS_TRUNCATED;
		__u32 v = bpf_ntohl(*(__u32 *)e);
		if (i > 0 && (v >> 12) == LABEL_IMPLICIT_NULL)
			*null_below = 1;
		if (v & 0x100) {
			*depth = i + 1;
			return R_MAX;
		}
	}
	return len == 4 * MAX_DEPTH ? R_PASS_NO_BOTTOM_OF_STACK : R_PASS_LABEL_STACK_TOO_DEEP;
}

// ipv4_checksum_ok verifies the IPv4 header checksum over the hl bytes at
// ip (RFC 1071: the ones' complement sum of the header's 16-bit words,
// checksum included, is 0xffff). hl is at most 60 bytes, 30 words; a
// header running past end does not verify.
static __always_inline int ipv4_checksum_ok(const __u8 *ip, const void *end, __u32 hl)
{
	__u32 s = 0;
	for (int i = 0; i < 30; i++) {
		if (2 * (__u32)i >= hl)
			break;
		if ((const void *)(ip + 2 * i + 2) > end)
			return 0;
		s += ((__u32)ip[2 * i] << 8) | ip[2 * i + 1];
	}
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return s == 0xffff;
}

// ip_judge judges the IP packet at ip (IPv6 if v6, else IPv4), with have
// bytes from ip to the end of the frame, before it is carried, the same
// way for a popped payload and for IP transit, in the userspace plane's
// order: the version nibble must match and the header be there (IPv4: its
// IHL's worth; else unknown_payload), an IPv4 header checksum verify
// (bad_checksum), the length fields fit the packet (IPv4 total length
// from its header length up to have; IPv6 40 + payload length up to have;
// else malformed_ip). Bytes beyond the IP length are padding, trimmed by
// trim_to. Returns 0 with the IP packet's length in *size and its
// header's in *hl, or the reason to pass the frame up.
static __always_inline int ip_judge(__u8 *ip, void *end, int v6, __u32 have, __u32 *size, __u32 *hl)
{
	if (v6) {
		if ((void *)(ip + 40) > end || ip[0] >> 4 != 6)
			return R_PASS_UNKNOWN_PAYLOAD;
		*size = 40 + bpf_ntohs(*(__u16 *)(ip + 4));
		*hl = 40;
	} else {
		if ((void *)(ip + 20) > end || ip[0] >> 4 != 4 || (ip[0] & 0xf) < 5)
			return R_PASS_UNKNOWN_PAYLOAD;
		*size = bpf_ntohs(*(__u16 *)(ip + 2));
		*hl = (ip[0] & 0xf) * 4;
		if (*hl > have)
			return R_PASS_UNKNOWN_PAYLOAD;
		if (!ipv4_checksum_ok(ip, end, *hl))
			return R_PASS_BAD_CHECKSUM;
	}
	if (*size < *hl || *size > have)
		return R_PASS_MALFORMED_IP;
	return 0;
}

// trim_to cuts the frame's bytes after the IP packet (have bytes from the
// IP header to the end of the frame, size of them the packet): userspace
// sends the IP packet alone. Returns nonzero if the kernel refused; packet
// pointers are invalid afterwards.
static __always_inline int trim_to(struct xdp_md *ctx, __u32 have, __u32 size)
{
	if (have > size)
		return bpf_xdp_adjust_tail(ctx, -(int)(have - size));
	return 0;
}

// forward_ip forwards a unicast IP packet for another host per the FIB
// (forward/ip.go's ForwardIP): TTL/hop limit decremented (RFC 1812
// §5.3.1), optionally a label stack pushed (LER), Ethernet rewritten.
static __always_inline int forward_ip(struct xdp_md *ctx, int v6)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u8 *ip = data + ETH_HLEN;
	struct fib_value *f, *s;
	__u32 size, hl, ttl;

	if (v6) {
		if ((void *)(ip + 40) > end || ip[0] >> 4 != 6)
			return count(R_PASS_UNKNOWN_PAYLOAD, XDP_PASS);
		ttl = ip[7];
		struct fib6_key k = {.prefixlen = 128};
		__builtin_memcpy(k.addr, ip + 24, 16);
		f = bpf_map_lookup_elem(&fib6, &k);
		if (f && (f->kind == FIB_LOCAL || f->kind == FIB_NOT_TRANSIT))
			return fib_pass(f);
		// Martian sources (forward/ip.go): unspecified, loopback,
		// multicast, link-local, or one of the node's own.
		__u8 *sa = ip + 8;
		__u32 w0 = *(__u32 *)sa, w1 = *(__u32 *)(sa + 4), w2 = *(__u32 *)(sa + 8);
		if (sa[0] == 0xff || (sa[0] == 0xfe && (sa[1] & 0xc0) == 0x80) ||
		    (w0 == 0 && w1 == 0 && w2 == 0 && (sa[12] | sa[13] | sa[14]) == 0 && sa[15] <= 1))
			return count(R_PASS_MARTIAN_SOURCE, XDP_PASS);
		struct fib6_key sk = {.prefixlen = 128};
		__builtin_memcpy(sk.addr, sa, 16);
		s = bpf_map_lookup_elem(&fib6, &sk);
	} else {
		if ((void *)(ip + 20) > end || ip[0] >> 4 != 4 || (ip[0] & 0xf) < 5)
			return count(R_PASS_UNKNOWN_PAYLOAD, XDP_PASS);
		ttl = ip[8];
		struct fib4_key k = {.prefixlen = 32};
		__builtin_memcpy(k.addr, ip + 16, 4);
		f = bpf_map_lookup_elem(&fib4, &k);
		if (f && (f->kind == FIB_LOCAL || f->kind == FIB_NOT_TRANSIT))
			return fib_pass(f);
		__u8 *sa = ip + 12;
		if (sa[0] == 0 || sa[0] == 127 || sa[0] >= 224 || (sa[0] == 169 && sa[1] == 254))
			return count(R_PASS_MARTIAN_SOURCE, XDP_PASS);
		struct fib4_key sk = {.prefixlen = 32};
		__builtin_memcpy(sk.addr, sa, 4);
		s = bpf_map_lookup_elem(&fib4, &sk);
	}
	if (s && s->kind == FIB_LOCAL)
		return count(R_PASS_MARTIAN_SOURCE, XDP_PASS);
	// The whole packet must be there (a frame may be longer: Ethernet
	// padding, trimmed below), its header inside it, an IPv4 header's
	// checksum valid.
	__u32 have = (__u32)(end - data) - ETH_HLEN;
	int bad = ip_judge(ip, end, v6, have, &size, &hl);
	if (bad)
		return count(bad, XDP_PASS);
	if (!f)
		return count(R_PASS_NO_ROUTE, XDP_PASS);
	if (f->kind != FIB_FORWARD)
		return fib_pass(f);
	int partial;
	if (v6) {
		partial = partial_form(ip + 40, end, ip[6], ip + 8, 16, size - 40);
	} else {
		// Fragments never carry a partial sum (the kernel finishes it
		// before it fragments).
		if (*(__u16 *)(ip + 6) & bpf_htons(0x3fff))
			partial = 0;
		else
			partial = partial_form(ip + hl, end, ip[9], ip + 12, 4, size - hl);
	}
	if (partial < 0)
		return count(R_PASS_UNKNOWN_PAYLOAD, XDP_PASS);
	if (partial)
		return count(R_PASS_CHECKSUM_PARTIAL, XDP_PASS);
	if (ttl <= 1)
		return count(R_PASS_TTL_EXPIRED, XDP_PASS);
	if (!(f->flags & FLAG_RESOLVED))
		return count(R_PASS_NO_NEIGHBOR, XDP_PASS);
	if (!(f->flags & FLAG_EGRESS_OK))
		return count(R_PASS_EGRESS_DOWN, XDP_PASS);
	if (size > f->mtu)
		return count(R_PASS_MTU_EXCEEDED, XDP_PASS);
	__u32 n = f->n_out;
	if (n > MAX_OUT)
		return count(R_PASS_FIB_NOT_CARRIED, XDP_PASS);
	__u32 out_ttl = ttl - 1;
	// TTL / hop limit first, while the header is where it was.
	if (v6) {
		ip[7] = out_ttl;
	} else {
		__u16 old = *(__u16 *)(ip + 8);
		ip[8] = out_ttl;
		csum_replace16((__u16 *)(ip + 10), old, *(__u16 *)(ip + 8));
	}
	if (trim_to(ctx, have, size))
		return count(R_DROP_INTERNAL, XDP_DROP); // the TTL is already rewritten
	if (n > 0 && bpf_xdp_adjust_head(ctx, -(int)(n * 4)))
		return count(R_DROP_INTERNAL, XDP_DROP);
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	if (data + ETH_HLEN > end)
		return count(R_DROP_INTERNAL, XDP_DROP);
	__u32 lttl = f->label_ttl ? f->label_ttl : out_ttl;
	__u32 *lbl = data + ETH_HLEN;
	for (int i = 0; i < MAX_OUT; i++) {
		if (i >= n)
			break;
		if ((void *)(lbl + i + 1) > end)
			return count(R_DROP_INTERNAL, XDP_DROP);
		lbl[i] = encode_label(f->out[i], 0, i == n - 1, lttl);
	}
	__builtin_memcpy(data, f->dst, 6);
	__builtin_memcpy(data + 6, f->src, 6);
	*(__u16 *)(data + 12) = n > 0 ? bpf_htons(ETH_P_MPLS_UC) : (v6 ? bpf_htons(ETH_P_IPV6) : bpf_htons(ETH_P_IP));
	count(R_IP_FORWARDED, 0);
	if (n > 0)
		count(R_IP_PUSHED, 0);
	return bpf_redirect_map(&egress, f->ifindex, 0);
}

// Multi-buffer aware (xdp.frags): the kernel lets a veth's MTU grow past a
// page while the program runs; a frame in several buffers is passed up.
SEC("xdp.frags")
int mplsnode_lsr(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u8 *eth = data;

	if (data + ETH_HLEN + 4 > end)
		return count(R_PASS_NOT_MPLS, XDP_PASS);
	// Every length below is the linear buffer's: a frame with fragments
	// is not judged.
	if (bpf_xdp_get_buff_len(ctx) != (__u64)(end - data))
		return count(R_PASS_MULTI_BUFFER, XDP_PASS);
	__u16 etype = *(__u16 *)(eth + 12);
	__u32 in_if = ctx->ingress_ifindex;
	if (etype == bpf_htons(ETH_P_IP) || etype == bpf_htons(ETH_P_IPV6)) {
		struct ingress_value *in = bpf_map_lookup_elem(&ingress, &in_if);
		if (!in || !mac_equal(eth, in->mac))
			return count(R_PASS_NOT_MPLS, XDP_PASS);
		return forward_ip(ctx, etype == bpf_htons(ETH_P_IPV6));
	}
	if (etype != bpf_htons(ETH_P_MPLS_UC))
		return count(R_PASS_NOT_MPLS, XDP_PASS);

	struct ingress_value *in = bpf_map_lookup_elem(&ingress, &in_if);
	if (!in || !(in->flags & INGRESS_MPLS) || !mac_equal(eth, in->mac))
		return count(R_PASS_NOT_FOR_US, XDP_PASS);

	__u32 l2len = (__u32)(end - data) - ETH_HLEN; // labels + payload
	// The whole stack first, as userspace parses it before it looks at
	// any label: a frame carried always has its bottom within MAX_DEPTH.
	__u32 depth = 0;
	int null_below = 0;
	int bad = walk_stack(eth + ETH_HLEN, end, l2len, &depth, &null_below);
	if (bad != R_MAX)
		return count(bad, XDP_PASS);

	__u32 top = bpf_ntohl(*(__u32 *)(eth + ETH_HLEN));
	__u32 label = top >> 12;
	__u32 tc = (top >> 9) & 7;
	int bottom = (top >> 8) & 1;
	__u32 ttl = top & 0xff;
	// Label 3 anywhere in the stack is counted first, as the stack walk
	// does (verdict.Walk): userspace drops it as implicit_null_label.
	if (label == 3 || null_below)
		return count(R_PASS_IMPLICIT_NULL, XDP_PASS);
	if (label < 16)
		return count(R_PASS_RESERVED_LABEL, XDP_PASS);

	struct ilm_value *v = bpf_map_lookup_elem(&ilm, &label);
	if (!v)
		return count(R_PASS_NO_ILM_ENTRY, XDP_PASS);
	if (v->action == ACTION_ECMP)
		return count(R_PASS_ECMP, XDP_PASS);
	if (ttl <= 1)
		return count(R_PASS_TTL_EXPIRED, XDP_PASS);
	__u32 out_ttl = ttl - 1;
	if (!(v->flags & FLAG_RESOLVED))
		return count(R_PASS_NO_NEIGHBOR, XDP_PASS);
	if (!(v->flags & FLAG_EGRESS_OK))
		return count(R_PASS_EGRESS_DOWN, XDP_PASS);

	__u32 model = TTL_UNIFORM;
	__u32 zero = 0;
	struct settings *set = bpf_map_lookup_elem(&config, &zero);
	if (set)
		model = set->ttl_model;

	if (v->action == ACTION_SWAP) {
		__u32 n = v->n_out;
		if (n < 1 || n > MAX_OUT)
			return count(R_PASS_NO_ILM_ENTRY, XDP_PASS);
		// The swapped label and the ones it pushes replace the top
		// entry: the stack sent must have its bottom within MAX_DEPTH too.
		if (depth + n - 1 > MAX_DEPTH)
			return count(R_PASS_LABEL_STACK_TOO_DEEP, XDP_PASS);
		if (l2len + (n - 1) * 4 > v->mtu)
			return count(R_PASS_MTU_EXCEEDED, XDP_PASS);
		// Grow the head by the labels pushed beyond the swapped one;
		// the Ethernet header and the top label are rewritten whole.
		if (n > 1 && bpf_xdp_adjust_head(ctx, -(int)((n - 1) * 4)))
			return count(R_PASS_ADJUST_FAILED, XDP_PASS);
		data = (void *)(long)ctx->data;
		end = (void *)(long)ctx->data_end;
		__u32 *lbl = data + ETH_HLEN;
		for (int i = 0; i < MAX_OUT; i++) {
			if (i >= n)
				break;
			// Cannot fail: the frame held ETH_HLEN + 4 bytes and grew
			// by (n - 1) * 4; the verifier needs the bound.
			if ((void *)(lbl + i + 1) > end)
				return count(R_DROP_INTERNAL, XDP_DROP);
			lbl[i] = encode_label(v->out[i], tc, bottom && i == n - 1, out_ttl);
		}
		if (data + ETH_HLEN > end)
			return count(R_DROP_INTERNAL, XDP_DROP);
		write_eth(data, v, ETH_P_MPLS_UC);
		count(R_SWAPPED, 0);
		count_label(label, l2len);
		return bpf_redirect_map(&egress, v->ifindex, 0);
	}

	if (v->action != ACTION_POP_FORWARD)
		return count(R_PASS_NO_ILM_ENTRY, XDP_PASS);

	// Judge what is under the popped label before touching the frame, so
	// that everything passed up is passed up as it came. new_ttl is the
	// TTL the exposed label or IP header leaves with (mpls.PopTTL, and the
	// label switch's pop to a label): uniform, the label TTL - 1; pipe,
	// its own decremented for this hop, which must not expire here.
	__u8 *under = eth + ETH_HLEN + 4;
	__u16 proto = ETH_P_MPLS_UC;
	__u32 new_ttl = out_ttl;
	__u32 have = l2len - 4; // bytes under the popped label
	__u32 size = have;      // of them, the bytes sent
	if (!bottom) {
		// walk_stack saw this entry whole; the verifier needs the bound.
		if ((void *)(under + 4) > end)
			return count(R_PASS_TRUNCATED, XDP_PASS);
		__u32 next = bpf_ntohl(*(__u32 *)under);
		if ((next >> 12) < 16)
			return count(R_PASS_RESERVED_LABEL, XDP_PASS);
		if (model == TTL_PIPE) {
			if ((next & 0xff) <= 1)
				return count(R_PASS_TTL_EXPIRED, XDP_PASS);
			new_ttl = (next & 0xff) - 1;
		}
	} else {
		// Pop to IP: the payload type from the binding or the version
		// nibble (mpls.InferPayload), then the packet judged whole.
		__u32 payload = v->payload;
		if ((void *)(under + 1) > end)
			return count(R_PASS_UNKNOWN_PAYLOAD, XDP_PASS);
		if (payload == PAYLOAD_NONE) {
			__u8 ver = under[0] >> 4;
			if (ver == 4)
				payload = PAYLOAD_IPV4;
			else if (ver == 6)
				payload = PAYLOAD_IPV6;
		}
		if (payload == PAYLOAD_IPV4)
			proto = ETH_P_IP;
		else if (payload == PAYLOAD_IPV6)
			proto = ETH_P_IPV6;
		else
			return count(R_PASS_UNKNOWN_PAYLOAD, XDP_PASS);
		__u32 hl;
		bad = ip_judge(under, end, proto == ETH_P_IPV6, have, &size, &hl);
		if (bad)
			return count(bad, XDP_PASS);
		if (model == TTL_PIPE) {
			__u32 inner = proto == ETH_P_IPV6 ? under[7] : under[8];
			if (inner <= 1)
				return count(R_PASS_TTL_EXPIRED, XDP_PASS);
			new_ttl = inner - 1;
		}
	}
	// What leaves: the frame less the popped label, or the IP packet
	// alone.
	if (size > v->mtu)
		return count(R_PASS_MTU_EXCEEDED, XDP_PASS);
	if (bpf_xdp_adjust_head(ctx, 4))
		return count(R_PASS_ADJUST_FAILED, XDP_PASS);
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	under = data + ETH_HLEN;
	if ((void *)(under + 40) > end && proto == ETH_P_IPV6)
		return count(R_DROP_INTERNAL, XDP_DROP);
	if ((void *)(under + 20) > end && proto != ETH_P_MPLS_UC)
		return count(R_DROP_INTERNAL, XDP_DROP);
	if ((void *)(under + 4) > end)
		return count(R_DROP_INTERNAL, XDP_DROP);
	if (proto == ETH_P_MPLS_UC) {
		__u32 next = bpf_ntohl(*(__u32 *)under);
		*(__u32 *)under = bpf_htonl((next & ~0xffu) | new_ttl);
	} else if (proto == ETH_P_IP) {
		if ((void *)(under + 20) > end)
			return count(R_DROP_INTERNAL, XDP_DROP);
		if (under[8] != new_ttl) {
			__u16 old = *(__u16 *)(under + 8);
			under[8] = new_ttl;
			csum_replace16((__u16 *)(under + 10), old, *(__u16 *)(under + 8));
		}
	} else {
		if ((void *)(under + 40) > end)
			return count(R_DROP_INTERNAL, XDP_DROP);
		under[7] = new_ttl;
	}
	if (trim_to(ctx, have, size))
		return count(R_DROP_INTERNAL, XDP_DROP); // the TTL is already rewritten
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	if (data + ETH_HLEN > end)
		return count(R_DROP_INTERNAL, XDP_DROP);
	write_eth(data, v, proto);
	count(proto == ETH_P_MPLS_UC ? R_POPPED_LABELLED : R_POPPED_IP, 0);
	count_label(label, l2len);
	return bpf_redirect_map(&egress, v->ifindex, 0);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";

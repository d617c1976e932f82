// SPDX-License-Identifier: (MIT OR GPL-2.0)
//
// trafficgen.c: the XDP programs of bench/lsrrate's generator and sink.
//
// lsrrate_gen runs under BPF_PROG_TEST_RUN in live-frames mode
// (BPF_F_TEST_XDP_LIVE_FRAMES): the kernel hands it the generated frame
// once per repetition and transmits what it redirects, without a socket or
// an skb. Like xdp-trafficgen (xdp-tools) it varies the frame on every
// repetition so that flow hashing on the path sees many flows: it writes
// the next UDP source port, port_start + (n mod port_count) where n counts
// the repetitions on this CPU, and updates the UDP checksum incrementally
// (RFC 1624). The kernel initialises a page of the frame pool once and
// recycles it, so the program reads the port the page holds and writes
// the whole header instead of assuming the original frame: whoever got
// the page before (a forwarder rewriting the Ethernet header, swapping
// the label, decrementing the IP TTL) wrote into it, and the page comes
// back with those changes. The program therefore copies the frame's first
// TMPL_LEN bytes (every header) from gen_template on every repetition.
//
// Paced (gen_pace non-zero), each CPU sends one frame every gen_pace
// nanoseconds and lets the repetitions in between go (XDP_DROP: nothing
// is sent), so the frames are spread evenly instead of sent in bursts
// with sleeps between them. gen_state counts, per CPU, the frames sent.
//
// lsrrate_sink runs on the sink's veth and counts, per CPU, the frames that
// one correct forwarding hop produces (the same test as the counter's
// classic BPF filter in sink.go: MPLS unicast whose first label entry is
// want_label with S=1, or, for want_label 0, IPv4 UDP to want_dst), then
// drops them, except the first ones while samples_left is above zero,
// which it passes up so that the counter socket keeps them for checking.
// Every other frame (ARP, the LSR's neighbour solicitations) is passed up
// to the kernel and counted as other.
//
// Regenerate trafficgen_bpfel.o and trafficgen_bpfel.go with `make bpf`
// (go generate ./bench/lsrrate; needs clang and libbpf-dev). Both are
// committed so builds need no compiler.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define ETH_P_MPLS_UC_ 0x8847
#define IPPROTO_UDP_ 17

// Generator settings, written before load.
const volatile __u32 ifindex_out = 0; // the generator's veth
const volatile __u16 port_start = 0;
const volatile __u16 port_count = 1;

// Sink settings, written before load.
const volatile __u32 want_label = 0; // 0: plain IPv4 UDP
const volatile __u32 want_dst = 0;   // IPv4 destination, network order

// TMPL_LEN covers Ethernet, a label, IPv4 and UDP (46 bytes) and fits the
// shortest frame (60 bytes).
#define TMPL_LEN 48

// The headers of the frame to send, written by the generator before each
// run: the first TMPL_LEN bytes of the frame as built.
struct template {
	__u8 head[TMPL_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct template);
} gen_template SEC(".maps");

// The generator's pace, written by the generator before each run: entry
// PACE_INTERVAL is 0 for as fast as the kernel takes frames, else the
// nanoseconds between two frames on one CPU; entry PACE_SLACK is how far
// (nanoseconds) a CPU may fall behind and still catch up by sending the
// frames it missed at once (it was preempted, or held up by a batch of
// the test run); beyond that the missed time is forgotten rather than
// sent as one burst.
#define PACE_INTERVAL 0
#define PACE_SLACK 1

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} gen_pace SEC(".maps");

// Per-CPU state of the generator.
struct gen_state {
	__u64 sent;    // frames redirected on this CPU
	__u64 next_ns; // paced: when the next frame is due (bpf_ktime_get_ns)
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_state);
} gen_state SEC(".maps");


// Sink counters, per CPU.
enum sink_counter {
	SINK_MATCHED = 0, // correctly forwarded frames (dropped or sampled)
	SINK_OTHER,       // everything else, passed up
	SINK_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SINK_MAX);
	__type(key, __u32);
	__type(value, __u64);
} sink_counters SEC(".maps");

// How many more matched frames to pass up as samples (shared by all CPUs).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s64);
} samples_left SEC(".maps");

// csum_replace16 updates the Internet checksum *sum for one 16-bit word
// changing from old to new (RFC 1624 eqn. 3), all in network byte order.
static __always_inline void csum_replace16(__u16 *sum, __u16 old, __u16 new)
{
	__u32 s = (__u16)~bpf_ntohs(*sum) + (__u32)(__u16)~bpf_ntohs(old) + (__u32)bpf_ntohs(new);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	*sum = bpf_htons((__u16)~s);
}

SEC("xdp")
int lsrrate_gen(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u8 *p = data;
	__u32 off = ETH_HLEN;

	__u32 zero = 0, slack_key = PACE_SLACK;
	struct template *t = bpf_map_lookup_elem(&gen_template, &zero);
	struct gen_state *st = bpf_map_lookup_elem(&gen_state, &zero);
	__u64 *pace = bpf_map_lookup_elem(&gen_pace, &zero);
	__u64 *slack = bpf_map_lookup_elem(&gen_pace, &slack_key);
	if (!t || !st || !pace || !slack)
		return XDP_ABORTED;
	__u64 interval = *pace;
	if (interval) {
		// Paced: a repetition before the next frame is due sends
		// nothing (the page goes back to the pool).
		__u64 now = bpf_ktime_get_ns();
		if (now < st->next_ns)
			return XDP_DROP;
		if (st->next_ns + *slack < now)
			st->next_ns = now;
		st->next_ns += interval;
	}
	if (data + TMPL_LEN > end)
		return XDP_ABORTED;
	__builtin_memcpy(p, t->head, TMPL_LEN);
	if (*(__u16 *)(p + 12) == bpf_htons(ETH_P_MPLS_UC_))
		off += 4;
	// IPv4 header of 20 bytes (buildFrame), then UDP; within TMPL_LEN.
	__u8 *udp = p + off + 20;
	if ((void *)(udp + 8) > end)
		return XDP_ABORTED;

	__u16 count = port_count ? port_count : 1;
	__u16 port = port_start + (__u16)(st->sent % count);
	st->sent += 1;

	__u16 *sport = (__u16 *)udp;
	__u16 old = *sport;
	__u16 new = bpf_htons(port);
	if (old != new) {
		__u16 *check = (__u16 *)(udp + 6);
		*sport = new;
		if (*check) { // 0 means no checksum (IPv4)
			csum_replace16(check, old, new);
			if (!*check)
				*check = 0xffff; // RFC 768: a computed zero is sent as all ones
		}
	}
	return bpf_redirect(ifindex_out, 0);
}

static __always_inline int sink_count(__u32 c)
{
	__u64 *v = bpf_map_lookup_elem(&sink_counters, &c);
	if (v)
		*v += 1;
	return 0;
}

SEC("xdp")
int lsrrate_sink(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u8 *p = data;
	int match = 0;

	if (data + ETH_HLEN + 20 <= end) {
		__u16 proto = *(__u16 *)(p + 12);
		if (want_label) {
			if (proto == bpf_htons(ETH_P_MPLS_UC_)) {
				__u32 e = bpf_ntohl(*(__u32 *)(p + ETH_HLEN));
				match = (e & 0xfffff100) == (want_label << 12 | 1 << 8);
			}
		} else if (proto == bpf_htons(ETH_P_IP)) {
			match = p[ETH_HLEN + 9] == IPPROTO_UDP_ && *(__u32 *)(p + ETH_HLEN + 16) == want_dst;
		}
	}
	if (!match) {
		sink_count(SINK_OTHER);
		return XDP_PASS;
	}
	sink_count(SINK_MATCHED);
	__u32 zero = 0;
	__s64 *left = bpf_map_lookup_elem(&samples_left, &zero);
	if (left && *left > 0 && __sync_fetch_and_add(left, -1) > 0)
		return XDP_PASS;
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";

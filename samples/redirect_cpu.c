// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * redirect_cpu - spread received packets over CPUs through a CPU map.
 *
 * bpf_redirect_map() into a BPF_MAP_TYPE_CPUMAP queues the frame to a kernel
 * thread on the chosen CPU, which builds the socket buffer there: the
 * receive CPU only runs XDP. Which CPUs take part is configured by user
 * space, as in the Linux kernel's xdp_redirect_cpu sample:
 *
 *   cpu_map[cpu]       = { .qsize, .bpf_prog.fd }  for each CPU in use
 *   cpus_available[i]  = cpu                       i = 0 .. n-1
 *   cpus_count[0]      = n
 *
 * Three alternative programs choose the slot i:
 *   xdp_redirect_cpu_rr     round robin (a per-CPU iterator);
 *   xdp_redirect_cpu_hash   hash of the IPv4/IPv6 5-tuple, so a flow stays
 *                           on one CPU;
 *   xdp_redirect_cpu_proto  by protocol: TCP to slot 0, UDP to slot 1,
 *                           ICMP/ICMPv6 to slot 2, anything else to slot 0.
 *
 * xdp_cpumap_filter (SEC "xdp/cpumap") is meant for cpu_map entries'
 * bpf_prog: it runs on the target CPU before the socket buffer is built,
 * drops UDP to port 9 (discard) and passes the rest.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

#define MAX_CPUS 64

/* Slot order for xdp_redirect_cpu_proto. */
#define SLOT_TCP 0
#define SLOT_UDP 1
#define SLOT_ICMP 2
#define SLOT_OTHER 0

struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__type(key, __u32);
	__type(value, struct bpf_cpumap_val);
	__uint(max_entries, MAX_CPUS);
} cpu_map SEC(".maps");

/* Slot -> CPU number. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, MAX_CPUS);
} cpus_available SEC(".maps");

/* Number of slots in use. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 1);
} cpus_count SEC(".maps");

/* Round-robin position, per receiving CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 1);
} cpus_iterator SEC(".maps");

struct datarec {
	__u64 processed; /* packets seen */
	__u64 dropped;   /* dropped because no CPU was configured */
	__u64 issue;     /* the redirect helper refused */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct datarec);
	__uint(max_entries, 1);
} rx_cnt SEC(".maps");

/* Seed of the flow hash (.rodata; change it before loading). */
const volatile __u32 hash_seed = 0x12345678;

static __always_inline struct datarec *stats(void)
{
	__u32 key = 0;
	struct datarec *rec = bpf_map_lookup_elem(&rx_cnt, &key);

	if (rec)
		rec->processed++;
	return rec;
}

/* Number of configured slots, 0 if none. */
static __always_inline __u32 slot_count(void)
{
	__u32 key = 0;
	__u32 *n = bpf_map_lookup_elem(&cpus_count, &key);

	if (!n || *n > MAX_CPUS)
		return 0;
	return *n;
}

/* Redirect to the CPU configured for slot, counting failures. */
static __always_inline int redirect_to_slot(struct datarec *rec, __u32 slot)
{
	__u32 *cpu = bpf_map_lookup_elem(&cpus_available, &slot);
	long action;

	if (!cpu) {
		if (rec)
			rec->dropped++;
		return XDP_DROP;
	}
	action = bpf_redirect_map(&cpu_map, *cpu, 0);
	if (action != XDP_REDIRECT && rec)
		rec->issue++;
	return action;
}

SEC("xdp")
int xdp_redirect_cpu_rr(struct xdp_md *ctx)
{
	struct datarec *rec = stats();
	__u32 n = slot_count();
	__u32 key = 0;
	__u32 *pos, slot;

	if (n == 0) {
		if (rec)
			rec->dropped++;
		return XDP_PASS; /* nothing configured: let the stack have it */
	}
	pos = bpf_map_lookup_elem(&cpus_iterator, &key);
	if (!pos)
		return XDP_PASS;

	slot = *pos;
	if (slot >= n)
		slot = 0; /* the slot count shrank */
	*pos = slot + 1 < n ? slot + 1 : 0;

	return redirect_to_slot(rec, slot);
}

/* One round of a 32-bit mixing function (xor, multiply, shift). */
static __always_inline __u32 mix32(__u32 h, __u32 v)
{
	h ^= v;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h *= 0xc2b2ae35;
	h ^= h >> 16;
	return h;
}

/* Ports of a TCP or UDP header at the cursor, as one 32-bit word. */
static __always_inline __u32 l4_ports(struct pyxdp_cursor *c, __u8 proto)
{
	if (proto == IPPROTO_TCP) {
		struct tcphdr *th = pyxdp_parse_hdr(c, struct tcphdr);

		return th ? ((__u32)th->source << 16) | th->dest : 0;
	}
	if (proto == IPPROTO_UDP) {
		struct udphdr *uh = pyxdp_parse_hdr(c, struct udphdr);

		return uh ? ((__u32)uh->source << 16) | uh->dest : 0;
	}
	return 0;
}

SEC("xdp")
int xdp_redirect_cpu_hash(struct xdp_md *ctx)
{
	struct datarec *rec = stats();
	__u32 n = slot_count();
	struct pyxdp_cursor c;
	__u32 h = hash_seed;
	__be16 proto;

	if (n == 0) {
		if (rec)
			rec->dropped++;
		return XDP_PASS;
	}

	pyxdp_cursor_init(&c, ctx);
	proto = pyxdp_parse_eth(&c, NULL);
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = pyxdp_parse_ipv4(&c);

		if (iph) {
			h = mix32(h, iph->saddr);
			h = mix32(h, iph->daddr);
			h = mix32(h, iph->protocol);
			h = mix32(h, l4_ports(&c, iph->protocol));
		}
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = pyxdp_parse_ipv6(&c);

		if (ip6h) {
#pragma unroll
			for (int i = 0; i < 4; i++) {
				h = mix32(h, ip6h->saddr.in6_u.u6_addr32[i]);
				h = mix32(h, ip6h->daddr.in6_u.u6_addr32[i]);
			}
			h = mix32(h, ip6h->nexthdr);
			h = mix32(h, l4_ports(&c, ip6h->nexthdr));
		}
	}
	/* Non-IP traffic all hashes to the seed's slot. */

	return redirect_to_slot(rec, h % n);
}

SEC("xdp")
int xdp_redirect_cpu_proto(struct xdp_md *ctx)
{
	struct datarec *rec = stats();
	__u32 n = slot_count();
	struct pyxdp_cursor c;
	__u8 ip_proto = 0;
	__u32 slot;
	__be16 proto;

	if (n == 0) {
		if (rec)
			rec->dropped++;
		return XDP_PASS;
	}

	pyxdp_cursor_init(&c, ctx);
	proto = pyxdp_parse_eth(&c, NULL);
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = pyxdp_parse_ipv4(&c);

		if (iph)
			ip_proto = iph->protocol;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = pyxdp_parse_ipv6(&c);

		if (ip6h)
			ip_proto = ip6h->nexthdr;
	}

	switch (ip_proto) {
	case IPPROTO_TCP:
		slot = SLOT_TCP;
		break;
	case IPPROTO_UDP:
		slot = SLOT_UDP;
		break;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		slot = SLOT_ICMP;
		break;
	default:
		slot = SLOT_OTHER;
		break;
	}
	if (slot >= n)
		slot = 0; /* fewer CPUs configured than slots used */

	return redirect_to_slot(rec, slot);
}

/* UDP destination port dropped by the cpumap program (discard service). */
#define DISCARD_PORT 9

SEC("xdp/cpumap")
int xdp_cpumap_filter(struct xdp_md *ctx)
{
	struct pyxdp_cursor c;
	struct udphdr *uh;
	__u8 ip_proto = 0;
	__be16 proto;

	pyxdp_cursor_init(&c, ctx);
	proto = pyxdp_parse_eth(&c, NULL);
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = pyxdp_parse_ipv4(&c);

		if (!iph)
			return XDP_PASS;
		ip_proto = iph->protocol;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = pyxdp_parse_ipv6(&c);

		if (!ip6h)
			return XDP_PASS;
		ip_proto = ip6h->nexthdr;
	}
	if (ip_proto != IPPROTO_UDP)
		return XDP_PASS;

	uh = pyxdp_parse_hdr(&c, struct udphdr);
	if (uh && uh->dest == bpf_htons(DISCARD_PORT))
		return XDP_DROP;
	return XDP_PASS;
}

LICENSE("GPL");

// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * lb - a layer-4 load balancer with IP-in-IP encapsulation.
 *
 * Services are virtual IPs (VIPs): an IPv4 address, a port and a protocol
 * (TCP or UDP). Each VIP owns a range of entries of the backends array. For
 * a packet to a VIP the program:
 *
 *   1. looks the flow's 5-tuple up in conns, an LRU hash of known
 *      connections, so every packet of a flow goes to the same backend
 *      (the least recently used flows are evicted when the table is full);
 *   2. for a new flow, picks a backend by hashing the 5-tuple
 *      (pick_backend() and flow_hash() are real BPF-to-BPF calls, not
 *      inlined) and records the choice;
 *   3. encapsulates the packet in an outer IPv4 header addressed to the
 *      backend (protocol 4, IP-in-IP): bpf_xdp_adjust_head(-20) makes room,
 *      the outer header's checksum comes from bpf_csum_diff; the backend
 *      decapsulates and answers the client directly (direct server return);
 *   4. sends it back out of the same interface with XDP_TX, to the
 *      backend's MAC address (or the router's, for a remote backend).
 *
 * Traffic that is not for a VIP tail-calls, through jmp_table, into
 * lb_non_vip, a second program that answers ICMP echo requests to VIP
 * addresses registered with protocol ICMP and port 0, and passes everything
 * else to the stack. jmp_table is filled at load time by the loader from
 * its ".values" initialiser.
 *
 * Configuration: vips and backends (user space); lb_src_addr (.rodata) is
 * the outer source address, the VIP itself when 0; hash_seed (.data) may be
 * changed at any time. Statistics: stats (per CPU, per category) and
 * encap_total (.bss).
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

#define MAX_VIPS 64
#define MAX_BACKENDS 256
#define MAX_CONNS 16384

struct vip_key {
	__be32 addr;
	__be16 port; /* 0 for ICMP */
	__u8 proto;  /* IPPROTO_TCP, IPPROTO_UDP or IPPROTO_ICMP */
	__u8 pad;
};

struct vip_meta {
	__u32 first_backend; /* index in backends */
	__u32 backend_count;
};

struct backend {
	__be32 addr;            /* outer destination */
	__u8 mac[ETH_ALEN];     /* next-hop MAC address */
	__u16 pad;
};

struct flow_key {
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 pad[3];
};

struct conn {
	__u32 backend;      /* index in backends */
	__u32 pad;
	__u64 last_seen_ns; /* bpf_ktime_get_ns() of the flow's last packet */
};

enum lb_stat_kind {
	STAT_VIP,        /* packets encapsulated to a backend */
	STAT_NEW_CONN,   /* flows added to conns */
	STAT_NON_VIP,    /* packets handed to lb_non_vip */
	STAT_ICMP_ECHO,  /* echo requests answered */
	STAT_ERROR,      /* misconfiguration or helper failure */
	STAT_MAX,
};

struct lb_stat {
	__u64 packets;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct vip_key);
	__type(value, struct vip_meta);
	__uint(max_entries, MAX_VIPS);
} vips SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct backend);
	__uint(max_entries, MAX_BACKENDS);
} backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct flow_key);
	__type(value, struct conn);
	__uint(max_entries, MAX_CONNS);
} conns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct lb_stat);
	__uint(max_entries, STAT_MAX);
} stats SEC(".maps");

/* Program slots of jmp_table. */
#define JMP_NON_VIP 0

int lb_non_vip(struct xdp_md *ctx);

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	/* Sizes rather than BTF types: the kernel accepts no BTF for a
	 * program array's values, and wants both key and value or neither. */
	__uint(key_size, sizeof(__u32));
	__uint(max_entries, 4);
	__array(values, int(struct xdp_md *));
} jmp_table SEC(".maps") = {
	.values = {
		[JMP_NON_VIP] = (void *)&lb_non_vip,
	},
};

/* Outer source address; 0 means "the VIP". */
const volatile __be32 lb_src_addr = 0;
/* Flow hash seed: writable global data in .data. */
__u32 hash_seed = 0x2545f491;
/* Packets encapsulated since load: zero-initialised global in .bss. */
__u64 encap_total;

static __always_inline void count(enum lb_stat_kind kind, struct xdp_md *ctx)
{
	__u32 key = kind;
	struct lb_stat *st = bpf_map_lookup_elem(&stats, &key);

	if (st) {
		st->packets++;
		st->bytes += ctx->data_end - ctx->data;
	}
}

/* Hash of a flow (a separate BPF function: called with a pointer to the
 * caller's stack). */
static __noinline __u32 flow_hash(const struct flow_key *flow)
{
	__u32 h = hash_seed;
	__u32 words[3] = {
		flow->saddr,
		flow->daddr,
		((__u32)flow->sport << 16 | flow->dport) ^ flow->proto,
	};

#pragma unroll
	for (int i = 0; i < 3; i++) {
		h ^= words[i];
		h *= 0x01000193; /* FNV prime */
		h ^= h >> 15;
	}
	return h;
}

/* Backend index for a new flow of a VIP: first + hash % count. */
static __noinline __u32 pick_backend(const struct flow_key *flow, __u32 first, __u32 count)
{
	if (count == 0)
		return MAX_BACKENDS; /* out of range: the caller fails */
	return first + flow_hash(flow) % count;
}

/*
 * Wrap the IPv4 packet in an outer IPv4 header to the backend and address
 * the frame to it. Returns the XDP action. All packet pointers of the
 * caller are invalid afterwards (bpf_xdp_adjust_head).
 */
static __noinline int encap_ipip(struct xdp_md *ctx, const struct backend *be)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *inner = data + sizeof(*eth);
	struct iphdr outer = {};
	__u8 router_mac[ETH_ALEN];
	__u16 inner_len;

	if ((void *)(inner + 1) > data_end)
		return XDP_DROP;

	/* Everything needed from the old headers, before they move. */
	__builtin_memcpy(router_mac, eth->h_dest, ETH_ALEN);
	inner_len = bpf_ntohs(inner->tot_len);
	outer.version = 4;
	outer.ihl = 5;
	outer.tos = inner->tos;
	outer.tot_len = bpf_htons(inner_len + sizeof(outer));
	outer.ttl = 64;
	outer.protocol = IPPROTO_IPIP;
	outer.saddr = lb_src_addr ? lb_src_addr : inner->daddr;
	outer.daddr = be->addr;
	outer.check = pyxdp_ipv4_csum(&outer);

	/* 20 more bytes in front: [outer 20][eth 14][inner ...] ... */
	if (bpf_xdp_adjust_head(ctx, 0 - (int)sizeof(outer)))
		return XDP_DROP;

	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	if (data + sizeof(*eth) + sizeof(outer) > data_end)
		return XDP_DROP;

	/* ... which becomes [eth 14][outer 20][inner ...]: the new Ethernet
	 * header goes first (it does not overlap the old one), then the outer
	 * IP header over the old Ethernet header. */
	__builtin_memcpy(eth->h_dest, be->mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, router_mac, ETH_ALEN);
	eth->h_proto = bpf_htons(ETH_P_IP);
	__builtin_memcpy(data + sizeof(*eth), &outer, sizeof(outer));

	__sync_fetch_and_add(&encap_total, 1);
	return XDP_TX;
}

SEC("xdp")
int lb_ingress(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *iph = data + sizeof(*eth);
	struct pyxdp_cursor c = { .pos = iph, .end = data_end };
	struct vip_key vk = {};
	struct flow_key flow = {};
	struct vip_meta *vip;
	struct backend *be;
	struct conn *cn, new_conn = {};
	__u32 backend_idx;
	__u64 now;

	if ((void *)(iph + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		goto not_vip;
	if (!pyxdp_parse_ipv4(&c))
		goto not_vip;
	/* Non-first fragments carry no ports. */
	if (iph->frag_off & bpf_htons(PYXDP_IP_OFFSET))
		goto not_vip;

	if (iph->protocol == IPPROTO_TCP) {
		struct tcphdr *th = pyxdp_parse_hdr(&c, struct tcphdr);

		if (!th)
			goto not_vip;
		flow.sport = th->source;
		flow.dport = th->dest;
	} else if (iph->protocol == IPPROTO_UDP) {
		struct udphdr *uh = pyxdp_parse_hdr(&c, struct udphdr);

		if (!uh)
			goto not_vip;
		flow.sport = uh->source;
		flow.dport = uh->dest;
	} else {
		goto not_vip;
	}
	flow.saddr = iph->saddr;
	flow.daddr = iph->daddr;
	flow.proto = iph->protocol;

	vk.addr = flow.daddr;
	vk.port = flow.dport;
	vk.proto = flow.proto;
	vip = bpf_map_lookup_elem(&vips, &vk);
	if (!vip)
		goto not_vip;

	now = bpf_ktime_get_ns();
	cn = bpf_map_lookup_elem(&conns, &flow);
	if (cn) {
		backend_idx = cn->backend;
		cn->last_seen_ns = now;
	} else {
		backend_idx = pick_backend(&flow, vip->first_backend, vip->backend_count);
		new_conn.backend = backend_idx;
		new_conn.last_seen_ns = now;
		if (bpf_map_update_elem(&conns, &flow, &new_conn, BPF_ANY) == 0)
			count(STAT_NEW_CONN, ctx);
	}

	be = bpf_map_lookup_elem(&backends, &backend_idx);
	if (!be || be->addr == 0) {
		count(STAT_ERROR, ctx);
		return XDP_DROP;
	}

	count(STAT_VIP, ctx);
	return encap_ipip(ctx, be);

not_vip:
	bpf_tail_call(ctx, &jmp_table, JMP_NON_VIP);
	/* Only reached when jmp_table has no program in the slot. */
	count(STAT_ERROR, ctx);
	return XDP_PASS;
}

/*
 * Tail-call target for traffic that is not for a VIP service. Answers ICMP
 * echo requests to VIP addresses registered as { addr, 0, IPPROTO_ICMP }:
 * swapping the addresses keeps the IPv4 checksum valid, and the ICMP
 * checksum is updated for the type change (8 -> 0).
 */
SEC("xdp")
int lb_non_vip(struct xdp_md *ctx)
{
	struct pyxdp_cursor c;
	struct ethhdr *eth = NULL;
	struct iphdr *iph;
	struct icmphdr *icmp;
	struct vip_key vk = {};
	__be32 addr;
	__be16 old_word;

	count(STAT_NON_VIP, ctx);

	pyxdp_cursor_init(&c, ctx);
	if (pyxdp_parse_eth(&c, &eth) != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	iph = pyxdp_parse_ipv4(&c);
	if (!iph || iph->protocol != IPPROTO_ICMP)
		return XDP_PASS;
	icmp = pyxdp_parse_hdr(&c, struct icmphdr);
	if (!icmp || icmp->type != ICMP_ECHO || icmp->code != 0)
		return XDP_PASS;

	vk.addr = iph->daddr;
	vk.proto = IPPROTO_ICMP;
	if (!bpf_map_lookup_elem(&vips, &vk))
		return XDP_PASS;

	old_word = *(__be16 *)icmp;
	icmp->type = ICMP_ECHOREPLY;
	icmp->checksum = pyxdp_csum_replace2(icmp->checksum, old_word, *(__be16 *)icmp);

	addr = iph->saddr;
	iph->saddr = iph->daddr;
	iph->daddr = addr;
	pyxdp_swap_macs(eth);

	count(STAT_ICMP_ECHO, ctx);
	return XDP_TX;
}

LICENSE("GPL");

// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * flowtable - forwarding through a netfilter flowtable from XDP
 * (net/netfilter/nf_flow_table_bpf.c), after xdp-forward's flowtable mode.
 *
 * xdp_flowtable parses an untagged IPv4 or IPv6 TCP/UDP packet (a TCP FIN or
 * RST, or a TTL/hop limit of 1, goes to the stack), fills a struct
 * bpf_fib_lookup with its tuple and the ingress ifindex and asks
 * bpf_xdp_flow_lookup for the flow. cfg picks opts_len (sz_sel 0: 4, 1: 8,
 * 2: 0), the value opts.error starts as and a family to ask with instead of
 * the packet's. No flow: XDP_PASS. A flow's tuple gives the direction and the
 * transmit type (bitfields through CO-RE: loads of the byte the loader
 * names), the input ifindex and MTU (loads through the returned
 * struct flow_offload_tuple_rhash *), the output device and MAC addresses of
 * a direct route (the anonymous union's bytes through bpf_rdonly_cast(, 0):
 * Linux refuses a direct load there, dst_cache being the union's first
 * member), and the struct flow_offload around it (container_of: the reply
 * tuple is the second of tuplehash[]) its flags and timeout, through
 * bpf_rdonly_cast to the kernel's struct flow_offload. NF_FLOW_SNAT and
 * NF_FLOW_DNAT rewrite an IPv4 packet's addresses and ports from the other
 * direction's tuple (checksums updated), as the kernel's flowtable does.
 * Then the TTL or hop limit is decremented and the frame leaves through
 * tx_ports: a direct route with the flow's MAC addresses to its output
 * device, a neigh route where bpf_fib_lookup sends the rewritten tuple.
 * Everything read goes into out; IPv6 flows with NAT and xfrm routes pass.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_core.h"
#include "pyxdp_kfuncs.h"
#include "pyxdp_net.h"

#define bpf_core_type_id_kernel(type) __builtin_btf_type_id(*(typeof(type) *)0, 1)

#define NF_FLOW_SNAT 0
#define NF_FLOW_DNAT 1
#define FLOW_OFFLOAD_XMIT_NEIGH 1
#define FLOW_OFFLOAD_XMIT_DIRECT 3

struct bpf_flowtable_opts {
	__s32 error;
};

/* The kernel's structs as far as this program reads them; CO-RE finds the
 * members in the kernel's BTF. */
struct flow_offload_tuple {
	union {
		struct in_addr src_v4;
		struct in6_addr src_v6;
	};
	union {
		struct in_addr dst_v4;
		struct in6_addr dst_v6;
	};
	struct {
		__be16 src_port;
		__be16 dst_port;
	};
	int iifidx;
	__u8 l3proto;
	__u8 l4proto;
	__u8 dir : 2, xmit_type : 3, encap_num : 2;
	__u16 mtu;
	union {
		struct {
			void *dst_cache;
			__u32 dst_cookie;
		};
		struct {
			__u32 ifidx;
			__u32 hw_ifidx;
			__u8 h_source[6];
			__u8 h_dest[6];
		} out;
	};
} __core;

struct flow_offload_tuple_rhash {
	struct flow_offload_tuple tuple;
} __core;

struct flow_offload {
	struct flow_offload_tuple_rhash tuplehash[2];
	unsigned long flags;
	__u32 timeout;
} __core;

extern struct flow_offload_tuple_rhash *
bpf_xdp_flow_lookup(struct xdp_md *ctx, struct bpf_fib_lookup *fib_tuple,
		    struct bpf_flowtable_opts *opts, __u32 opts_len) __ksym;
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;

struct ft_cfg {
	__u32 sz_sel;
	__s32 error_init;
	__u8 family;
	__u8 pad[3];
};

struct ft_out {
	__s32 error;
	__u32 found;
	__u32 dir;
	__u32 xmit;
	__u64 flags;
	__u32 iifidx;
	__u32 mtu;
	__u32 oifidx;
	__u32 timeout;
	__u8 h_source[6];
	__u8 h_dest[6];
	__s64 fib_rc;
	__u64 runs;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ft_cfg);
} cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ft_out);
} out SEC(".maps");

/* Egress devices, keyed by ifindex (the value is the ifindex again). */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 64);
} tx_ports SEC(".maps");

/* A 32-bit field of a checksummed header changes: two 16-bit replacements. */
static __always_inline __sum16 csum_replace4(__sum16 check, __be32 from, __be32 to)
{
	check = pyxdp_csum_replace2(check, (__be16)from, (__be16)to);
	return pyxdp_csum_replace2(check, (__be16)(from >> 16), (__be16)(to >> 16));
}

/* The layer 4 checksum at check_off of the header at l4 (a UDP checksum of 0
 * means none and stays 0; one that becomes 0 is sent as 0xffff). */
static __always_inline void l4_csum(void *l4, void *end, __u8 proto, __be32 from, __be32 to,
				    int port)
{
	__sum16 *check;

	if (proto == IPPROTO_TCP) {
		struct tcphdr *th = l4;

		if ((void *)(th + 1) > end)
			return;
		check = &th->check;
	} else {
		struct udphdr *uh = l4;

		if ((void *)(uh + 1) > end || !uh->check)
			return;
		check = &uh->check;
	}
	if (port)
		*check = pyxdp_csum_replace2(*check, (__be16)from, (__be16)to);
	else
		*check = csum_replace4(*check, from, to);
	if (proto == IPPROTO_UDP && !*check)
		*check = 0xffff;
}

/* Source (src != 0) or destination address and port of the packet become addr, port. */
static __always_inline void nat4(struct iphdr *iph, __be16 *ports, void *end, int src,
				 __be32 addr, __be16 port)
{
	__be32 *a = src ? &iph->saddr : &iph->daddr;
	__be16 *p = src ? &ports[0] : &ports[1];
	__be32 old_a = *a;
	__be16 old_p = *p;

	*a = addr;
	iph->check = csum_replace4(iph->check, old_a, addr);
	l4_csum(ports, end, iph->protocol, old_a, addr, 0);
	*p = port;
	l4_csum(ports, end, iph->protocol, old_p, port, 1);
}

SEC("xdp")
int xdp_flowtable(struct xdp_md *ctx)
{
	struct flow_offload_tuple_rhash *th;
	__be32 o_src, o_dst;
	__be16 o_sport, o_dport;
	void *base;
	struct bpf_flowtable_opts opts = {};
	struct bpf_fib_lookup fib = {};
	struct ethhdr *eth = NULL;
	struct ipv6hdr *ip6h = NULL;
	struct iphdr *iph = NULL;
	struct flow_offload *flow;
	struct pyxdp_cursor c;
	struct ft_cfg *cf;
	struct ft_out *o;
	__u32 key = 0;
	__u8 proto, dir;
	__be16 *ports;
	__u64 flags;
	__u8 *raw;
	__u32 oif;
	__be16 h;

	cf = bpf_map_lookup_elem(&cfg, &key);
	o = bpf_map_lookup_elem(&out, &key);
	if (!cf || !o)
		return XDP_ABORTED;
	__builtin_memset(o, 0, sizeof(*o) - sizeof(o->runs));
	o->runs++;
	pyxdp_cursor_init(&c, ctx);
	h = pyxdp_parse_eth(&c, &eth);
	if (!eth || c.pos != (void *)(eth + 1))
		return XDP_PASS;
	if (h == bpf_htons(ETH_P_IP)) {
		iph = pyxdp_parse_ipv4(&c);
		if (!iph || iph->ttl <= 1)
			return XDP_PASS;
		proto = iph->protocol;
		fib.family = AF_INET;
		fib.tos = iph->tos;
		fib.tot_len = bpf_ntohs(iph->tot_len);
		fib.ipv4_src = iph->saddr;
		fib.ipv4_dst = iph->daddr;
	} else if (h == bpf_htons(ETH_P_IPV6)) {
		ip6h = pyxdp_parse_ipv6(&c);
		if (!ip6h || ip6h->hop_limit <= 1)
			return XDP_PASS;
		proto = ip6h->nexthdr;
		fib.family = AF_INET6;
		fib.tot_len = bpf_ntohs(ip6h->payload_len);
		__builtin_memcpy(fib.ipv6_src, &ip6h->saddr, 16);
		__builtin_memcpy(fib.ipv6_dst, &ip6h->daddr, 16);
	} else {
		return XDP_PASS;
	}
	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
		return XDP_PASS;
	ports = c.pos;
	if ((void *)(ports + 2) > c.end)
		return XDP_PASS;
	if (proto == IPPROTO_TCP) {
		struct tcphdr *tcph = c.pos;

		if ((void *)(tcph + 1) > c.end || tcph->fin || tcph->rst)
			return XDP_PASS;
	}
	fib.l4_protocol = proto;
	fib.sport = ports[0];
	fib.dport = ports[1];
	fib.ifindex = ctx->ingress_ifindex;
	if (cf->family)
		fib.family = cf->family;

	opts.error = cf->error_init;
	if (cf->sz_sel == 1)
		th = bpf_xdp_flow_lookup(ctx, &fib, &opts, 8);
	else if (cf->sz_sel == 2)
		th = bpf_xdp_flow_lookup(ctx, &fib, &opts, 0);
	else
		th = bpf_xdp_flow_lookup(ctx, &fib, &opts, sizeof(opts));
	o->error = opts.error;
	if (!th)
		return XDP_PASS;
	o->found = 1;

	dir = core_bitfield_u8(th, tuple.dir);
	o->dir = dir;
	o->xmit = core_bitfield_u8(th, tuple.xmit_type);
	o->iifidx = th->tuple.iifidx;
	o->mtu = th->tuple.mtu;
	raw = bpf_rdonly_cast(th, 0);
	oif = *(__u32 *)(raw + core_field_offset(th->tuple.out.ifidx));
	o->oifidx = oif;
	__builtin_memcpy(o->h_source, raw + core_field_offset(th->tuple.out.h_source), 6);
	__builtin_memcpy(o->h_dest, raw + core_field_offset(th->tuple.out.h_dest), 6);
	if (dir > 1)
		return XDP_PASS;
	/* container_of(th, struct flow_offload, tuplehash[dir]) */
	base = th;
	if (dir)
		base -= core_type_size(struct flow_offload_tuple_rhash);
	flow = bpf_rdonly_cast(base, bpf_core_type_id_kernel(struct flow_offload));
	flags = flow->flags;
	o->flags = flags;
	o->timeout = flow->timeout;
	/* the other direction's tuple: what the packet looks like after NAT */
	if (dir) {
		o_src = flow->tuplehash[0].tuple.src_v4.s_addr;
		o_dst = flow->tuplehash[0].tuple.dst_v4.s_addr;
		o_sport = flow->tuplehash[0].tuple.src_port;
		o_dport = flow->tuplehash[0].tuple.dst_port;
	} else {
		o_src = flow->tuplehash[1].tuple.src_v4.s_addr;
		o_dst = flow->tuplehash[1].tuple.dst_v4.s_addr;
		o_sport = flow->tuplehash[1].tuple.src_port;
		o_dport = flow->tuplehash[1].tuple.dst_port;
	}

	if (ip6h) {
		if (flags & (1 << NF_FLOW_SNAT | 1 << NF_FLOW_DNAT))
			return XDP_PASS;
	} else if (iph) {
		/* the original direction's source NAT is the reply's destination, the
		 * reply direction's destination the original's source; DNAT the other way */
		if (flags & 1 << NF_FLOW_SNAT) {
			if (!dir)
				nat4(iph, ports, c.end, 1, o_dst, o_dport);
			else
				nat4(iph, ports, c.end, 0, o_src, o_sport);
		}
		if (flags & 1 << NF_FLOW_DNAT) {
			if (!dir)
				nat4(iph, ports, c.end, 0, o_src, o_sport);
			else
				nat4(iph, ports, c.end, 1, o_dst, o_dport);
		}
		fib.ipv4_src = iph->saddr;
		fib.ipv4_dst = iph->daddr;
	}

	if (o->xmit == FLOW_OFFLOAD_XMIT_NEIGH) {
		o->fib_rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), 0);
		if (o->fib_rc != BPF_FIB_LKUP_RET_SUCCESS)
			return XDP_PASS;
		oif = fib.ifindex;
		__builtin_memcpy(eth->h_dest, fib.dmac, ETH_ALEN);
		__builtin_memcpy(eth->h_source, fib.smac, ETH_ALEN);
	} else if (o->xmit == FLOW_OFFLOAD_XMIT_DIRECT) {
		__builtin_memcpy(eth->h_dest, o->h_dest, ETH_ALEN);
		__builtin_memcpy(eth->h_source, o->h_source, ETH_ALEN);
	} else {
		return XDP_PASS;
	}
	if (!bpf_map_lookup_elem(&tx_ports, &oif))
		return XDP_PASS;
	if (iph) {
		__be16 old = *(__be16 *)&iph->ttl;

		iph->ttl--;
		iph->check = pyxdp_csum_replace2(iph->check, old, *(__be16 *)&iph->ttl);
	} else if (ip6h) {
		ip6h->hop_limit--;
	}
	return bpf_redirect_map(&tx_ports, oif, 0);
}

char _license[] SEC("license") = "GPL";

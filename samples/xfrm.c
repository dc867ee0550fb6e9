// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * xfrm - IPsec state lookups from XDP (net/xfrm/xfrm_state_bpf.c).
 *
 * xdp_xfrm takes the packet's destination address (IPv4 or IPv6) and the 4 bytes
 * after the IP header as an ESP SPI and asks bpf_xdp_get_xfrm_state for the state,
 * with cfg's netns_id and mark, cfg's protocol and family when non-zero (else the
 * packet's), and an opts__sz cfg.sz_sel picks (0: the struct's 36 bytes, 1: 32, 2: 2,
 * 3: 0). opts.error starts as cfg.error_init, so out shows whether the kfunc wrote
 * it. A state found has its fields read through CO-RE (preserve_access_index:
 * offsets from the kernel's BTF) and is released with bpf_xdp_xfrm_state_release.
 * XDP_PASS with a state, XDP_DROP without.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

#define __ksym __attribute__((section(".ksyms")))
#define __pai __attribute__((preserve_access_index))

typedef union {
	__be32 a4;
	__be32 a6[4];
} xfrm_address_t;

struct bpf_xfrm_state_opts {
	__s32 error;
	__s32 netns_id;
	__u32 mark;
	xfrm_address_t daddr;
	__be32 spi;
	__u8 proto;
	__u16 family;
};

struct xfrm_id {
	xfrm_address_t daddr;
	__be32 spi;
	__u8 proto;
} __pai;

struct xfrm_mark {
	__u32 v;
	__u32 m;
} __pai;

struct xfrm_state {
	struct xfrm_id id;
	struct xfrm_mark mark;
	__u32 if_id;
	struct {
		__u32 reqid;
		__u8 mode;
		__u16 family;
		xfrm_address_t saddr;
	} __pai props;
} __pai;

extern struct xfrm_state *bpf_xdp_get_xfrm_state(struct xdp_md *ctx,
						 struct bpf_xfrm_state_opts *opts,
						 __u32 opts__sz) __ksym;
extern void bpf_xdp_xfrm_state_release(struct xfrm_state *x) __ksym;

struct xs_cfg {
	__s32 netns_id;
	__u32 sz_sel;
	__u32 mark;
	__s32 error_init;
	__u8 proto;
	__u8 pad;
	__u16 family;
};

struct xs_out {
	__s64 found;
	__s32 error;
	__u32 spi;
	__u32 proto;
	__u32 family;
	__u32 reqid;
	__u32 mode;
	__u32 mark_v;
	__u32 mark_m;
	__u32 if_id;
	__u32 daddr[4];
	__u32 saddr[4];
	__u64 runs;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct xs_cfg);
} cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct xs_out);
} out SEC(".maps");

SEC("xdp")
int xdp_xfrm(struct xdp_md *ctx)
{
	struct bpf_xfrm_state_opts opts = {};
	struct pyxdp_cursor c;
	struct xfrm_state *x;
	struct xs_out *o;
	struct xs_cfg *cf;
	__u32 key = 0;
	__be32 *spi;
	__be16 eth;

	cf = bpf_map_lookup_elem(&cfg, &key);
	o = bpf_map_lookup_elem(&out, &key);
	if (!cf || !o)
		return XDP_ABORTED;
	__builtin_memset(o, 0, sizeof(*o) - sizeof(o->runs));
	o->runs++;
	pyxdp_cursor_init(&c, ctx);
	eth = pyxdp_parse_eth(&c, NULL);
	if (eth == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = pyxdp_parse_ipv4(&c);

		if (!iph)
			return XDP_DROP;
		opts.daddr.a4 = iph->daddr;
		opts.proto = iph->protocol;
		opts.family = 2;	/* AF_INET */
	} else if (eth == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = pyxdp_parse_ipv6(&c);

		if (!ip6h)
			return XDP_DROP;
		__builtin_memcpy(opts.daddr.a6, &ip6h->daddr, 16);
		opts.proto = ip6h->nexthdr;
		opts.family = 10;	/* AF_INET6 */
	} else {
		return XDP_DROP;
	}
	spi = c.pos;
	if ((void *)(spi + 1) > c.end)
		return XDP_DROP;
	opts.spi = *spi;
	opts.error = cf->error_init;
	opts.netns_id = cf->netns_id;
	opts.mark = cf->mark;
	if (cf->proto)
		opts.proto = cf->proto;
	if (cf->family)
		opts.family = cf->family;
	switch (cf->sz_sel) {
	case 1:
		x = bpf_xdp_get_xfrm_state(ctx, &opts, 32);
		break;
	case 2:
		x = bpf_xdp_get_xfrm_state(ctx, &opts, 2);
		break;
	case 3:
		x = bpf_xdp_get_xfrm_state(ctx, &opts, 0);
		break;
	default:
		x = bpf_xdp_get_xfrm_state(ctx, &opts, sizeof(opts));
	}
	o->error = opts.error;
	if (!x)
		return XDP_DROP;
	o->found = 1;
	o->spi = bpf_ntohl(x->id.spi);
	o->proto = x->id.proto;
	o->family = x->props.family;
	o->reqid = x->props.reqid;
	o->mode = x->props.mode;
	o->mark_v = x->mark.v;
	o->mark_m = x->mark.m;
	o->if_id = x->if_id;
	__builtin_memcpy(o->daddr, x->id.daddr.a6, 16);
	__builtin_memcpy(o->saddr, x->props.saddr.a6, 16);
	bpf_xdp_xfrm_state_release(x);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";

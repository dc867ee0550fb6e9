// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * ct - the conntrack kfuncs (net/netfilter/nf_conntrack_bpf.c, nf_nat_bpf.c)
 * on the tuple of the packet: IPv4 or IPv6, TCP or UDP.
 *
 * xdp_ct does what the cfg array (key 0) asks and records every result in
 * out (key 0):
 *   op CT_LOOKUP: bpf_xdp_ct_lookup, then (when asked) bpf_ct_change_timeout
 *     and bpf_ct_change_status, the entry's fields, bpf_ct_release;
 *   op CT_INSERT: bpf_xdp_ct_alloc, then (when asked) bpf_ct_set_timeout,
 *     bpf_ct_set_status and bpf_ct_set_nat_info (source, destination), the
 *     new entry's fields, bpf_ct_insert_entry, its fields, bpf_ct_release.
 * The options come from cfg as given (opts__sz, netns_id, l4proto, zone,
 * a reserved byte, the tuple's size: the caller fills them in for the packet),
 * so every error path can be asked for.
 * The verdict is XDP_PASS with an entry, XDP_DROP without.
 *
 * xdp_ct_track is what a stateful filter does: look the packet's flow up,
 * track it when new (30 s), count new flows and packets of each direction
 * in stats; XDP_PASS.
 *
 * struct nf_conn is read through CO-RE (preserve_access_index): the offsets
 * come from the kernel's BTF.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

#define __ksym __attribute__((section(".ksyms")))
#define __pai __attribute__((preserve_access_index))

struct bpf_ct_opts {
	__s32 netns_id;
	__s32 error;
	__u8 l4proto;
	__u8 dir;
	__u16 ct_zone_id;
	__u8 ct_zone_dir;
	__u8 reserved[3];
};

union nf_inet_addr {
	__u32 all[4];
	__be32 ip;
	__be32 ip6[4];
};

union nf_conntrack_man_proto {
	__be16 all;
};

struct nf_conntrack_man {
	union nf_inet_addr u3;
	union nf_conntrack_man_proto u;
	__u16 l3num;
} __pai;

struct nf_conntrack_tuple {
	struct nf_conntrack_man src;
	struct {
		union nf_inet_addr u3;
		union nf_conntrack_man_proto u;
		__u8 protonum;
		__u8 dir;
	} __pai dst;
} __pai;

struct nf_conntrack_tuple_hash {
	struct nf_conntrack_tuple tuple;
} __pai;

struct nf_conntrack_zone {
	__u16 id;
	__u8 flags;
	__u8 dir;
} __pai;

struct nf_conntrack {
	struct {
		struct {
			int counter;
		} __pai refs;
	} __pai use;
} __pai;

struct nf_conn {
	struct nf_conntrack ct_general;
	__u32 timeout;
	struct nf_conntrack_zone zone;
	struct nf_conntrack_tuple_hash tuplehash[2];
	unsigned long status;
	__u32 mark;
} __pai;

/* The allocated, not yet inserted entry: an nf_conn underneath (read it through a
 * cast; CO-RE takes nf_conn___init for a flavour of nf_conn). */
struct nf_conn___init {
	struct nf_conn ct;
};

extern struct nf_conn *bpf_xdp_ct_lookup(struct xdp_md *xdp_ctx, struct bpf_sock_tuple *bpf_tuple,
					 __u32 tuple__sz, struct bpf_ct_opts *opts,
					 __u32 opts__sz) __ksym;
extern struct nf_conn___init *bpf_xdp_ct_alloc(struct xdp_md *xdp_ctx,
					       struct bpf_sock_tuple *bpf_tuple, __u32 tuple__sz,
					       struct bpf_ct_opts *opts, __u32 opts__sz) __ksym;
extern struct nf_conn *bpf_ct_insert_entry(struct nf_conn___init *nfct_i) __ksym;
extern void bpf_ct_release(struct nf_conn *nfct) __ksym;
extern void bpf_ct_set_timeout(struct nf_conn___init *nfct, __u32 timeout) __ksym;
extern int bpf_ct_change_timeout(struct nf_conn *nfct, __u32 timeout) __ksym;
extern int bpf_ct_set_status(const struct nf_conn___init *nfct, __u32 status) __ksym;
extern int bpf_ct_change_status(struct nf_conn *nfct, __u32 status) __ksym;
/* The kernel's enum, not an int: libbpf refuses a kfunc whose declared prototype
 * is incompatible with the kernel's. */
enum nf_nat_manip_type { NF_NAT_MANIP_SRC, NF_NAT_MANIP_DST };
extern int bpf_ct_set_nat_info(struct nf_conn___init *nfct, union nf_inet_addr *addr, int port,
			       enum nf_nat_manip_type manip) __ksym;

#define CT_LOOKUP 0
#define CT_INSERT 1

struct ct_cfg {
	__u32 op;
	__s32 netns_id;
	__u32 opts_sz;		/* below 32 */
	__u32 tuple_sz;		/* below 64 */
	__u8 l4proto;
	__u8 zone_dir;
	__u16 zone_id;
	__u8 reserved;		/* into opts.reserved[0] */
	__u8 reverse;		/* the tuple reversed: the reply direction */
	__u8 snat;		/* bpf_ct_set_nat_info(SRC) before insertion */
	__u8 dnat;		/* bpf_ct_set_nat_info(DST) */
	__u32 timeout_ms;	/* set (insert) or change (lookup) the timeout; 0: not */
	__u32 status;		/* set (insert) or change (lookup) the status; 0: not */
	__s32 snat_port;
	__s32 dnat_port;
	__u32 snat_addr[4];
	__u32 dnat_addr[4];
};

/* What an entry holds, as the program reads it. */
struct ct_view {
	__u64 status;
	__u32 mark;
	__s32 timeout;		/* expiry - (u32)jiffies once confirmed, else jiffies */
	__s32 use;
	__u16 zone_id;
	__u8 zone_dir;
	__u8 reply_dir;		/* tuplehash[1].tuple.dst.dir */
	__u16 l3num;
	__u8 protonum;
	__u8 pad;
	__u16 orig_sport;
	__u16 orig_dport;
	__u16 reply_sport;
	__u16 reply_dport;
	__u32 orig_src[4];
	__u32 orig_dst[4];
	__u32 reply_src[4];
	__u32 reply_dst[4];
};

struct ct_out {
	__s64 found;		/* 1: an entry; 0: NULL; -1: alloc gave NULL (insert) */
	__s32 error;		/* opts.error */
	__u8 dir;		/* opts.dir */
	__u8 zone_dir;		/* opts.ct_zone_dir after the call */
	__u16 pad;
	__s32 status_ret;
	__s32 timeout_ret;
	__s32 snat_ret;
	__s32 dnat_ret;
	struct ct_view before;	/* insert: the allocated entry before insertion */
	struct ct_view after;	/* the entry looked up or inserted */
	__u64 runs;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ct_cfg);
} cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ct_out);
} out SEC(".maps");

/* xdp_ct_track's counters: new flows, original-direction packets, reply-direction
 * packets, lookup errors other than -ENOENT, failed insertions. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 5);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/* The packet's tuple (reversed: the reply direction's) and its L4 protocol; 0 when the
 * packet is neither TCP nor UDP over IPv4 or IPv6, else 4 or 6. */
static __always_inline int packet_tuple(struct xdp_md *ctx, struct bpf_sock_tuple *t,
					__u8 *proto, int reverse)
{
	struct pyxdp_cursor c;
	__be16 *ports;
	__be16 eth;

	pyxdp_cursor_init(&c, ctx);
	eth = pyxdp_parse_eth(&c, NULL);
	if (eth == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = pyxdp_parse_ipv4(&c);

		if (!iph || (iph->protocol != IPPROTO_TCP && iph->protocol != IPPROTO_UDP))
			return 0;
		ports = c.pos;
		if ((void *)(ports + 2) > c.end)
			return 0;
		*proto = iph->protocol;
		if (reverse) {
			t->ipv4.saddr = iph->daddr;
			t->ipv4.daddr = iph->saddr;
			t->ipv4.sport = ports[1];
			t->ipv4.dport = ports[0];
		} else {
			t->ipv4.saddr = iph->saddr;
			t->ipv4.daddr = iph->daddr;
			t->ipv4.sport = ports[0];
			t->ipv4.dport = ports[1];
		}
		return 4;
	}
	if (eth == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = pyxdp_parse_ipv6(&c);

		if (!ip6h || (ip6h->nexthdr != IPPROTO_TCP && ip6h->nexthdr != IPPROTO_UDP))
			return 0;
		ports = c.pos;
		if ((void *)(ports + 2) > c.end)
			return 0;
		*proto = ip6h->nexthdr;
		if (reverse) {
			__builtin_memcpy(t->ipv6.saddr, &ip6h->daddr, 16);
			__builtin_memcpy(t->ipv6.daddr, &ip6h->saddr, 16);
			t->ipv6.sport = ports[1];
			t->ipv6.dport = ports[0];
		} else {
			__builtin_memcpy(t->ipv6.saddr, &ip6h->saddr, 16);
			__builtin_memcpy(t->ipv6.daddr, &ip6h->daddr, 16);
			t->ipv6.sport = ports[0];
			t->ipv6.dport = ports[1];
		}
		return 6;
	}
	return 0;
}

static __always_inline void view(struct ct_view *v, const struct nf_conn *ct, int confirmed)
{
	__u32 timeout = ct->timeout;

	v->status = ct->status;
	v->mark = ct->mark;
	v->timeout = confirmed ? (__s32)(timeout - (__u32)bpf_jiffies64()) : (__s32)timeout;
	v->use = ct->ct_general.use.refs.counter;
	v->zone_id = ct->zone.id;
	v->zone_dir = ct->zone.dir;
	v->reply_dir = ct->tuplehash[1].tuple.dst.dir;
	v->l3num = ct->tuplehash[0].tuple.src.l3num;
	v->protonum = ct->tuplehash[0].tuple.dst.protonum;
	v->orig_sport = bpf_ntohs(ct->tuplehash[0].tuple.src.u.all);
	v->orig_dport = bpf_ntohs(ct->tuplehash[0].tuple.dst.u.all);
	v->reply_sport = bpf_ntohs(ct->tuplehash[1].tuple.src.u.all);
	v->reply_dport = bpf_ntohs(ct->tuplehash[1].tuple.dst.u.all);
#pragma unroll
	for (int i = 0; i < 4; i++) {
		v->orig_src[i] = ct->tuplehash[0].tuple.src.u3.all[i];
		v->orig_dst[i] = ct->tuplehash[0].tuple.dst.u3.all[i];
		v->reply_src[i] = ct->tuplehash[1].tuple.src.u3.all[i];
		v->reply_dst[i] = ct->tuplehash[1].tuple.dst.u3.all[i];
	}
}

SEC("xdp")
int xdp_ct(struct xdp_md *ctx)
{
	struct {
		struct bpf_sock_tuple t;
		__u8 more[28];	/* room for any tuple__sz below 64 */
	} tup = {};
	struct {
		struct bpf_ct_opts o;
		__u8 more[16];	/* room for any opts__sz below 32 */
	} opts = {};
	__u32 key = 0, tsz, osz;
	struct ct_cfg *c;
	struct ct_out *o;
	__u8 proto = 0;

	c = bpf_map_lookup_elem(&cfg, &key);
	o = bpf_map_lookup_elem(&out, &key);
	if (!c || !o)
		return XDP_ABORTED;
	o->runs++;
	if (!packet_tuple(ctx, &tup.t, &proto, c->reverse))
		return XDP_PASS;
	/* Sizes and protocol as cfg gives them (masks, not branches: fewer states to verify). */
	tsz = c->tuple_sz & 63;
	osz = c->opts_sz & 31;
	opts.o.netns_id = c->netns_id;
	opts.o.l4proto = c->l4proto;
	opts.o.ct_zone_id = c->zone_id;
	opts.o.ct_zone_dir = c->zone_dir;
	opts.o.reserved[0] = c->reserved;
	opts.o.error = 1;	/* unchanged when no error is reported */
	opts.o.dir = 0xff;	/* unchanged when no entry is found */

	if (c->op == CT_LOOKUP) {
		struct nf_conn *ct = bpf_xdp_ct_lookup(ctx, &tup.t, tsz, &opts.o, osz);

		o->error = opts.o.error;
		o->dir = opts.o.dir;
		o->zone_dir = opts.o.ct_zone_dir;
		o->found = 0;
		if (!ct)
			return XDP_DROP;
		o->found = 1;
		view(&o->before, ct, 1);
		o->timeout_ret = c->timeout_ms ? bpf_ct_change_timeout(ct, c->timeout_ms) : 0;
		o->status_ret = c->status ? bpf_ct_change_status(ct, c->status) : 0;
		view(&o->after, ct, 1);
		bpf_ct_release(ct);
		return XDP_PASS;
	}

	struct nf_conn___init *nct = bpf_xdp_ct_alloc(ctx, &tup.t, tsz, &opts.o, osz);
	struct nf_conn *ins;

	o->error = opts.o.error;
	o->dir = opts.o.dir;
	o->zone_dir = opts.o.ct_zone_dir;
	if (!nct) {
		o->found = -1;
		return XDP_DROP;
	}
	if (c->timeout_ms)
		bpf_ct_set_timeout(nct, c->timeout_ms);
	o->status_ret = c->status ? bpf_ct_set_status(nct, c->status) : 0;
	if (c->snat) {
		union nf_inet_addr a = {};

		__builtin_memcpy(&a, c->snat_addr, sizeof(a));
		o->snat_ret = bpf_ct_set_nat_info(nct, &a, c->snat_port, NF_NAT_MANIP_SRC);
	}
	if (c->dnat) {
		union nf_inet_addr a = {};

		__builtin_memcpy(&a, c->dnat_addr, sizeof(a));
		o->dnat_ret = bpf_ct_set_nat_info(nct, &a, c->dnat_port, NF_NAT_MANIP_DST);
	}
	view(&o->before, (struct nf_conn *)nct, 0);
	ins = bpf_ct_insert_entry(nct);
	o->found = 0;
	if (!ins)
		return XDP_DROP;
	o->found = 1;
	view(&o->after, ins, 1);
	bpf_ct_release(ins);
	return XDP_PASS;
}

static __always_inline void count(__u32 k)
{
	__u64 *n = bpf_map_lookup_elem(&stats, &k);

	if (n)
		__sync_fetch_and_add(n, 1);
}

SEC("xdp")
int xdp_ct_track(struct xdp_md *ctx)
{
	struct bpf_sock_tuple tup = {};
	struct bpf_ct_opts opts = { .netns_id = -1 };
	struct nf_conn___init *nct;
	struct nf_conn *ct;
	__u8 proto = 0;
	__u32 tsz;
	int family;

	family = packet_tuple(ctx, &tup, &proto, 0);
	if (!family)
		return XDP_PASS;
	tsz = family == 4 ? sizeof(tup.ipv4) : sizeof(tup.ipv6);
	opts.l4proto = proto;
	ct = bpf_xdp_ct_lookup(ctx, &tup, tsz, &opts, sizeof(opts));
	if (ct) {
		count(opts.dir ? 2 : 1);
		bpf_ct_release(ct);
		return XDP_PASS;
	}
	if (opts.error != -2) {	/* -ENOENT */
		count(3);
		return XDP_PASS;
	}
	opts.ct_zone_dir = 0;
	nct = bpf_xdp_ct_alloc(ctx, &tup, tsz, &opts, sizeof(opts));
	if (!nct) {
		count(4);
		return XDP_PASS;
	}
	bpf_ct_set_timeout(nct, 30000);
	ct = bpf_ct_insert_entry(nct);
	if (!ct) {
		count(4);
		return XDP_PASS;
	}
	count(0);
	bpf_ct_release(ct);
	return XDP_PASS;
}

LICENSE("GPL");

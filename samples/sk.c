// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * sk - socket lookups and SYN cookies (net/core/filter.c) on the packet's tuple.
 *
 * xdp_sk looks up the socket the packet (TCP or UDP over IPv4 or IPv6) is for:
 * cfg.op 0 bpf_sk_lookup_tcp, 1 bpf_sk_lookup_udp, 2 bpf_skc_lookup_tcp, with
 * cfg's tuple size (0: the packet family's), netns_id and flags, so every path
 * can be asked for. It records the socket's struct bpf_sock fields into out (a
 * sock_common: the fields it has) and releases it; XDP_PASS with a socket,
 * XDP_DROP without.
 *
 * xdp_syncookie, on a TCP segment: the raw helpers (bpf_tcp_raw_gen_syncookie_ipv4
 * or _ipv6 of the segment, then bpf_tcp_raw_check_syncookie_ipv4/_ipv6 of the ACK
 * that answers the cookie, of that ACK with the cookie changed, and a gen with a
 * th_len that is not doff * 4), then on the listener the segment is for
 * (bpf_sk_lookup_tcp): bpf_tcp_gen_syncookie of the segment, bpf_tcp_check_syncookie
 * of the ACK answering that cookie, of the segment itself and with a short IP
 * header. Every result goes into cookies; XDP_DROP.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

static struct bpf_sock *(* const bpf_sk_lookup_tcp)(void *ctx, struct bpf_sock_tuple *tuple,
						   __u32 tuple_size, __u64 netns,
						   __u64 flags) = (void *) 84;
static struct bpf_sock *(* const bpf_sk_lookup_udp)(void *ctx, struct bpf_sock_tuple *tuple,
						   __u32 tuple_size, __u64 netns,
						   __u64 flags) = (void *) 85;
static long (* const bpf_sk_release)(void *sock) = (void *) 86;
static struct bpf_sock *(* const bpf_skc_lookup_tcp)(void *ctx, struct bpf_sock_tuple *tuple,
						    __u32 tuple_size, __u64 netns,
						    __u64 flags) = (void *) 99;
static long (* const bpf_tcp_check_syncookie)(void *sk, void *iph, __u32 iph_len,
					      struct tcphdr *th, __u32 th_len) = (void *) 100;
static __s64 (* const bpf_tcp_gen_syncookie)(void *sk, void *iph, __u32 iph_len,
					     struct tcphdr *th, __u32 th_len) = (void *) 110;
static __s64 (* const bpf_tcp_raw_gen_syncookie_ipv4)(struct iphdr *iph, struct tcphdr *th,
						      __u32 th_len) = (void *) 204;
static __s64 (* const bpf_tcp_raw_gen_syncookie_ipv6)(struct ipv6hdr *iph, struct tcphdr *th,
						      __u32 th_len) = (void *) 205;
static long (* const bpf_tcp_raw_check_syncookie_ipv4)(struct iphdr *iph,
						       struct tcphdr *th) = (void *) 206;
static long (* const bpf_tcp_raw_check_syncookie_ipv6)(struct ipv6hdr *iph,
						       struct tcphdr *th) = (void *) 207;

#define SK_TCP 0
#define SK_UDP 1
#define SKC_TCP 2

struct sk_cfg {
	__u32 op;
	__u32 tuple_sz;		/* 0: 12 for IPv4, 36 for IPv6 */
	__u32 netns_id;
	__u32 pad;
	__u64 flags;
};

/* What the program reads of the socket (struct bpf_sock's fields, some twice: dst_port
 * by 4, 2 and 1 bytes, src_ip4 by a byte). */
struct sk_view {
	__s64 found;
	__u32 bound_dev_if;
	__u32 family;
	__u32 type;
	__u32 protocol;
	__u32 mark;
	__u32 priority;
	__u32 src_ip4;
	__u32 src_ip6[4];
	__u32 src_port;
	__u32 dst_port;
	__u16 dst_port16;
	__u8 dst_port_hi;
	__u8 src_ip4_b0;
	__u32 dst_ip4;
	__u32 dst_ip6[4];
	__u32 state;
	__s32 rx_queue_mapping;
	__u64 runs;
};

struct cookie_out {
	__s64 raw_gen;
	__s64 raw_check;
	__s64 raw_check_bad;
	__s64 raw_gen_badlen;
	__s64 found;
	__s64 gen;
	__s64 check;
	__s64 check_syn;
	__s64 check_short_iph;
	__u64 runs;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sk_cfg);
} cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sk_view);
} out SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cookie_out);
} cookies SEC(".maps");

/* The packet's tuple (the packet's source is the socket's peer); 4 or 6, 0 when the
 * packet is not TCP or UDP over IP. *l4 gets the transport header. */
static __always_inline int packet_tuple(struct xdp_md *ctx, struct bpf_sock_tuple *t,
					void **l3, void **l4)
{
	struct pyxdp_cursor c;
	__be16 *ports;
	__be16 eth;

	pyxdp_cursor_init(&c, ctx);
	eth = pyxdp_parse_eth(&c, NULL);
	*l3 = c.pos;
	if (eth == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = pyxdp_parse_ipv4(&c);

		if (!iph || (iph->protocol != IPPROTO_TCP && iph->protocol != IPPROTO_UDP))
			return 0;
		ports = c.pos;
		if ((void *)(ports + 2) > c.end)
			return 0;
		t->ipv4.saddr = iph->saddr;
		t->ipv4.daddr = iph->daddr;
		t->ipv4.sport = ports[0];
		t->ipv4.dport = ports[1];
		*l4 = ports;
		return 4;
	}
	if (eth == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = pyxdp_parse_ipv6(&c);

		if (!ip6h || (ip6h->nexthdr != IPPROTO_TCP && ip6h->nexthdr != IPPROTO_UDP))
			return 0;
		ports = c.pos;
		if ((void *)(ports + 2) > c.end)
			return 0;
		__builtin_memcpy(t->ipv6.saddr, &ip6h->saddr, 16);
		__builtin_memcpy(t->ipv6.daddr, &ip6h->daddr, 16);
		t->ipv6.sport = ports[0];
		t->ipv6.dport = ports[1];
		*l4 = ports;
		return 6;
	}
	return 0;
}

/* The fields every socket pointer may read (bpf_sock_common_is_valid_access). */
static __always_inline void view_common(struct sk_view *o, struct bpf_sock *sk)
{
	o->found = 1;
	o->bound_dev_if = sk->bound_dev_if;
	o->family = sk->family;
	o->src_ip4 = sk->src_ip4;
	o->src_ip4_b0 = *(volatile __u8 *)&sk->src_ip4;
	__builtin_memcpy(o->src_ip6, sk->src_ip6, 16);
	o->src_port = sk->src_port;
	o->dst_port = *(volatile __u32 *)&sk->dst_port;
	o->dst_port16 = sk->dst_port;
	o->dst_port_hi = *((volatile __u8 *)&sk->dst_port + 1);
	o->dst_ip4 = sk->dst_ip4;
	__builtin_memcpy(o->dst_ip6, sk->dst_ip6, 16);
	o->state = sk->state;
	o->rx_queue_mapping = sk->rx_queue_mapping;
}

SEC("xdp")
int xdp_sk(struct xdp_md *ctx)
{
	struct bpf_sock_tuple t = {};
	struct bpf_sock *sk;
	struct sk_view *o;
	struct sk_cfg *c;
	__u32 key = 0, sz;
	void *l3, *l4;
	int v;

	c = bpf_map_lookup_elem(&cfg, &key);
	o = bpf_map_lookup_elem(&out, &key);
	if (!c || !o)
		return XDP_ABORTED;
	__builtin_memset(o, 0, sizeof(*o) - sizeof(o->runs));
	o->runs++;
	v = packet_tuple(ctx, &t, &l3, &l4);
	if (!v)
		return XDP_DROP;
	sz = c->tuple_sz ? c->tuple_sz : (v == 4 ? sizeof(t.ipv4) : sizeof(t.ipv6));
	if (sz > sizeof(t))
		return XDP_ABORTED;
	if (c->op == SKC_TCP) {
		sk = bpf_skc_lookup_tcp(ctx, &t, sz, c->netns_id, c->flags);
		if (!sk)
			return XDP_DROP;
		view_common(o, sk);
		bpf_sk_release(sk);
		return XDP_PASS;
	}
	if (c->op == SK_UDP)
		sk = bpf_sk_lookup_udp(ctx, &t, sz, c->netns_id, c->flags);
	else
		sk = bpf_sk_lookup_tcp(ctx, &t, sz, c->netns_id, c->flags);
	if (!sk)
		return XDP_DROP;
	view_common(o, sk);
	o->type = sk->type;
	o->protocol = sk->protocol;
	o->mark = sk->mark;
	o->priority = sk->priority;
	bpf_sk_release(sk);
	return XDP_PASS;
}

/* A TCP header with room for an MSS option. */
#define TH_ROOM 24

struct ack4 {
	struct iphdr ip;
	struct tcphdr th;
};

struct ack6 {
	struct ipv6hdr ip;
	struct tcphdr th;
};

/* The ACK that answers a SYN-ACK carrying cookie: seq + 1, ack_seq cookie + 1. */
static __always_inline void make_ack(struct tcphdr *ack, struct tcphdr *syn, __u32 cookie)
{
	__builtin_memcpy(ack, syn, sizeof(*ack));
	ack->seq = bpf_htonl(bpf_ntohl(syn->seq) + 1);
	ack->ack_seq = bpf_htonl(cookie + 1);
	ack->doff = 5;
	ack->syn = 0;
	ack->ack = 1;
}

SEC("xdp")
int xdp_syncookie(struct xdp_md *ctx)
{
	struct bpf_sock_tuple t = {};
	struct cookie_out *o;
	struct ack4 a4 = {};
	struct ack6 a6 = {};
	struct tcphdr *th;
	struct bpf_sock *sk;
	__u32 key = 0, th_len;
	void *l3, *l4, *iph;
	__s64 ret;
	int v;

	o = bpf_map_lookup_elem(&cookies, &key);
	if (!o)
		return XDP_ABORTED;
	__builtin_memset(o, 0, sizeof(*o) - sizeof(o->runs));
	o->runs++;
	v = packet_tuple(ctx, &t, &l3, &l4);
	th = l4;
	if (!v || (void *)th + TH_ROOM > (void *)(long)ctx->data_end)
		return XDP_DROP;
	th_len = th->doff * 4;
	if (th_len < sizeof(*th))
		return XDP_DROP;
	if (th_len > TH_ROOM)
		th_len = TH_ROOM;
	if (v == 4) {
		struct iphdr *ip4 = l3;

		if ((void *)(ip4 + 1) > (void *)(long)ctx->data_end)
			return XDP_DROP;
		ret = bpf_tcp_raw_gen_syncookie_ipv4(ip4, th, th_len);
		o->raw_gen = ret;
		o->raw_gen_badlen = bpf_tcp_raw_gen_syncookie_ipv4(ip4, th, th_len == 20 ? 21 : 20);
		__builtin_memcpy(&a4.ip, ip4, sizeof(a4.ip));
		make_ack(&a4.th, th, (__u32)ret);
		o->raw_check = bpf_tcp_raw_check_syncookie_ipv4(&a4.ip, &a4.th);
		a4.th.ack_seq ^= bpf_htonl(0x10000);
		o->raw_check_bad = bpf_tcp_raw_check_syncookie_ipv4(&a4.ip, &a4.th);
		iph = ip4;
	} else {
		struct ipv6hdr *ip6 = l3;

		if ((void *)(ip6 + 1) > (void *)(long)ctx->data_end)
			return XDP_DROP;
		ret = bpf_tcp_raw_gen_syncookie_ipv6(ip6, th, th_len);
		o->raw_gen = ret;
		o->raw_gen_badlen = bpf_tcp_raw_gen_syncookie_ipv6(ip6, th, th_len == 20 ? 21 : 20);
		__builtin_memcpy(&a6.ip, ip6, sizeof(a6.ip));
		make_ack(&a6.th, th, (__u32)ret);
		o->raw_check = bpf_tcp_raw_check_syncookie_ipv6(&a6.ip, &a6.th);
		a6.th.ack_seq ^= bpf_htonl(0x10000);
		o->raw_check_bad = bpf_tcp_raw_check_syncookie_ipv6(&a6.ip, &a6.th);
		iph = ip6;
	}

	sk = bpf_sk_lookup_tcp(ctx, &t, v == 4 ? sizeof(t.ipv4) : sizeof(t.ipv6), -1, 0);
	if (!sk)
		return XDP_DROP;
	o->found = 1;
	if (v == 4) {
		ret = bpf_tcp_gen_syncookie(sk, iph, sizeof(struct iphdr), th, th_len);
		o->gen = ret;
		make_ack(&a4.th, th, (__u32)ret);
		o->check = bpf_tcp_check_syncookie(sk, &a4.ip, sizeof(a4.ip), &a4.th,
						   sizeof(a4.th));
		o->check_short_iph = bpf_tcp_check_syncookie(sk, &a4.ip, sizeof(a4.ip) - 1,
							     &a4.th, sizeof(a4.th));
		o->check_syn = bpf_tcp_check_syncookie(sk, iph, sizeof(struct iphdr), th,
						       sizeof(*th));
	} else {
		ret = bpf_tcp_gen_syncookie(sk, iph, sizeof(struct ipv6hdr), th, th_len);
		o->gen = ret;
		make_ack(&a6.th, th, (__u32)ret);
		o->check = bpf_tcp_check_syncookie(sk, &a6.ip, sizeof(a6.ip), &a6.th,
						   sizeof(a6.th));
		o->check_short_iph = bpf_tcp_check_syncookie(sk, &a6.ip, sizeof(a6.ip) - 1,
							     &a6.th, sizeof(a6.th));
		o->check_syn = bpf_tcp_check_syncookie(sk, iph, sizeof(struct ipv6hdr), th,
						       sizeof(*th));
	}
	bpf_sk_release(sk);
	return XDP_DROP;
}

char _license[] SEC("license") = "GPL";

// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * sockmap - a SOCKMAP and a SOCKHASH used from XDP (net/core/sock_map.c).
 *
 * xdp_sockmap looks up the socket the packet (TCP or UDP over IPv4 or IPv6) is
 * for (cfg.op 0 bpf_sk_lookup_tcp, 1 bpf_sk_lookup_udp, 2 bpf_skc_lookup_tcp)
 * and, when there is one, puts it into sock_map at cfg.map_key and into
 * sock_hash at cfg.hash_key with cfg.flags (bpf_map_update_elem), then releases
 * it. It then looks both keys up (a socket reference each, released) and
 * records the fields of the sockets found; with cfg.del it deletes both keys
 * twice. Every result goes into out; XDP_PASS.
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

struct sm_cfg {
	__u32 op;
	__u32 map_key;
	__u32 hash_key;
	__u32 del;
	__u64 flags;
};

struct sm_sock {
	__s64 found;
	__u32 family;
	__u32 protocol;
	__u32 state;
	__u32 src_port;
	__u32 dst_port;
	__u32 pad;
};

struct sm_out {
	__s64 found;
	__s64 upd_map;
	__s64 upd_hash;
	struct sm_sock in_map;
	struct sm_sock in_hash;
	__s64 del_map;
	__s64 del_map2;
	__s64 del_hash;
	__s64 del_hash2;
	__u64 runs;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sm_cfg);
} cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sm_out);
} out SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SOCKMAP);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} sock_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} sock_hash SEC(".maps");

/* The packet's tuple (the packet's source is the socket's peer): its size, or 0 when
 * the packet is not TCP or UDP over IP. */
static __always_inline __u32 packet_tuple(struct xdp_md *ctx, struct bpf_sock_tuple *t)
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
		t->ipv4.saddr = iph->saddr;
		t->ipv4.daddr = iph->daddr;
		t->ipv4.sport = ports[0];
		t->ipv4.dport = ports[1];
		return sizeof(t->ipv4);
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
		return sizeof(t->ipv6);
	}
	return 0;
}

/* The socket under key in map (a reference: released here), as the program reads it. */
static __always_inline void view(void *map, __u32 *key, struct sm_sock *o)
{
	struct bpf_sock *sk = bpf_map_lookup_elem(map, key);

	if (!sk)
		return;
	o->found = 1;
	o->family = sk->family;
	o->protocol = sk->protocol;
	o->state = sk->state;
	o->src_port = sk->src_port;
	o->dst_port = sk->dst_port;
	bpf_sk_release(sk);
}

SEC("xdp")
int xdp_sockmap(struct xdp_md *ctx)
{
	struct bpf_sock_tuple t = {};
	struct bpf_sock *sk;
	struct sm_out *o;
	struct sm_cfg *c;
	__u32 key = 0, sz;

	c = bpf_map_lookup_elem(&cfg, &key);
	o = bpf_map_lookup_elem(&out, &key);
	if (!c || !o)
		return XDP_ABORTED;
	__builtin_memset(o, 0, sizeof(*o) - sizeof(o->runs));
	o->runs++;
	sz = packet_tuple(ctx, &t);
	if (!sz)
		return XDP_DROP;
	if (c->op == 2)
		sk = bpf_skc_lookup_tcp(ctx, &t, sz, -1, 0);
	else if (c->op == 1)
		sk = bpf_sk_lookup_udp(ctx, &t, sz, -1, 0);
	else
		sk = bpf_sk_lookup_tcp(ctx, &t, sz, -1, 0);
	if (sk) {
		o->found = 1;
		o->upd_map = bpf_map_update_elem(&sock_map, &c->map_key, sk, c->flags);
		o->upd_hash = bpf_map_update_elem(&sock_hash, &c->hash_key, sk, c->flags);
		bpf_sk_release(sk);
	}
	view(&sock_map, &c->map_key, &o->in_map);
	view(&sock_hash, &c->hash_key, &o->in_hash);
	if (c->del) {
		o->del_map = bpf_map_delete_elem(&sock_map, &c->map_key);
		o->del_map2 = bpf_map_delete_elem(&sock_map, &c->map_key);
		o->del_hash = bpf_map_delete_elem(&sock_hash, &c->hash_key);
		o->del_hash2 = bpf_map_delete_elem(&sock_hash, &c->hash_key);
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";

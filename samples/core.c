// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * core - an XDP program whose struct layouts come from the kernel's BTF.
 *
 * Its own declarations of struct xdp_md, ethhdr, iphdr and udphdr list the
 * members it uses in a different order from the kernel's (so the offsets
 * clang computes are all wrong), and enum xdp_action with other values:
 * only CO-RE relocations, applied against the kernel's types, make it work.
 * For each IPv4/UDP packet it records, in the one-entry stats array, the
 * fields it read (addresses, ports, the version/ihl bitfields, the ingress
 * ifindex), what the loader answered about the kernel's types (sizeof struct
 * iphdr, whether a member and a type that the kernel lacks exist), and drops
 * UDP to port 9; everything else passes. The verdicts are
 * enum xdp_action values relocated by name.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_core.h"

struct xdp_md___core {
	__u32 ingress_ifindex;
	__u32 data_end;
	__u32 data;
} __core;

struct ethhdr___core {
	__be16 h_proto;
	unsigned char h_source[6];
	unsigned char h_dest[6];
} __core;

struct iphdr___core {
	__u8 protocol;
	__u8 ttl;
	__be32 daddr;
	__be32 saddr;
	__u8 version:4, ihl:4;
	__u32 no_such_member;
} __core;

struct udphdr___core {
	__be16 dest;
	__be16 source;
} __core;

struct no_such_type___core {
	int x;
} __core;

enum xdp_action___core {
	XDP_DROP___core = 7,
	XDP_PASS___core = 9,
	XDP_NO_SUCH_ACTION___core = 11,
};

struct core_stats {
	__u64 packets;
	__u64 udp;
	__u32 ifindex;
	__u32 saddr;
	__u32 daddr;
	__u16 sport;
	__u16 dport;
	__u8 version;
	__u8 ihl;
	__u8 ttl;
	__u8 has_no_such_member;
	__u32 iphdr_size;
	__u32 has_no_such_type;
	__u32 has_no_such_action;
	__u32 daddr_size;
	__u32 mac_src_first;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct core_stats);
	__uint(max_entries, 1);
} core_stats SEC(".maps");

SEC("xdp")
int xdp_core(struct xdp_md *xdp)
{
	struct xdp_md___core *ctx = (void *)xdp;
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	int pass = core_enum_value(enum xdp_action___core, XDP_PASS___core);
	struct ethhdr___core *eth = data;
	struct iphdr___core *ip = data + 14;
	struct udphdr___core *udp = data + 34;
	struct core_stats *st;
	__u32 key = 0;

	st = bpf_map_lookup_elem(&core_stats, &key);
	if (!st)
		return pass;
	st->packets++;
	st->ifindex = ctx->ingress_ifindex;
	st->iphdr_size = core_type_size(struct iphdr___core);
	st->has_no_such_member = core_field_exists(ip->no_such_member);
	st->has_no_such_type = core_type_exists(struct no_such_type___core);
	st->has_no_such_action = core_enum_exists(enum xdp_action___core,
						  XDP_NO_SUCH_ACTION___core);
	st->daddr_size = core_field_size(ip->daddr);
	if (data + 42 > data_end)
		return pass;
	if (eth->h_proto != __builtin_bswap16(0x0800))
		return pass;
	st->mac_src_first = eth->h_source[0];
	st->version = core_bitfield_u8(ip, version);
	st->ihl = core_bitfield_u8(ip, ihl);
	st->ttl = ip->ttl;
	st->saddr = ip->saddr;
	st->daddr = ip->daddr;
	if (ip->protocol != 17)
		return pass;
	st->udp++;
	st->sport = __builtin_bswap16(udp->source);
	st->dport = __builtin_bswap16(udp->dest);
	if (udp->dest == __builtin_bswap16(9))
		return core_enum_value(enum xdp_action___core, XDP_DROP___core);
	return pass;
}

LICENSE("GPL");

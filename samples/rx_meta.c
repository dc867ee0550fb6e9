// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * rx_meta - the XDP RX metadata kfuncs: what the driver's receive descriptor
 * says about the frame (timestamp, RSS hash and type, VLAN tag).
 *
 * Each call's return value and outputs go to the one-entry results array
 * (the last frame's) and the frame passes. The kfuncs are found by name in
 * the kernel's BTF; only a program bound to a device may call them (load it
 * with prog_ifindex and BPF_F_XDP_DEV_BOUND_ONLY). Linux answers -EOPNOTSUPP
 * (-95) when the device's driver lacks the kfunc and -ENODATA (-61) when it
 * has no value for this frame.
 */
#include "pyxdp_bpf.h"

#define __ksym __attribute__((section(".ksyms")))

extern int bpf_xdp_metadata_rx_timestamp(const struct xdp_md *ctx, __u64 *timestamp) __ksym;
/* The kernel's types, not look-alikes: libbpf refuses a kfunc declared with a
 * prototype incompatible with the kernel's (an int where it has an enum). */
enum xdp_rss_hash_type { XDP_RSS_TYPE_NONE = 0 };
extern int bpf_xdp_metadata_rx_hash(const struct xdp_md *ctx, __u32 *hash,
				    enum xdp_rss_hash_type *rss_type) __ksym;
extern int bpf_xdp_metadata_rx_vlan_tag(const struct xdp_md *ctx, __be16 *vlan_proto,
					__u16 *vlan_tci) __ksym;

struct rx_meta {
	__s32 ts_ret;
	__s32 hash_ret;
	__s32 vlan_ret;
	__u32 hash;
	__u64 timestamp;
	__u32 rss_type;
	__be16 vlan_proto;
	__u16 vlan_tci;
	__u64 packets;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct rx_meta);
	__uint(max_entries, 1);
} results SEC(".maps");

SEC("xdp")
int xdp_rx_meta(struct xdp_md *ctx)
{
	__u32 key = 0;
	struct rx_meta *r = bpf_map_lookup_elem(&results, &key);
	__u64 ts = 0;
	__u32 hash = 0, rss_type = 0;
	__be16 proto = 0;
	__u16 tci = 0;

	if (!r)
		return XDP_ABORTED;
	r->ts_ret = bpf_xdp_metadata_rx_timestamp(ctx, &ts);
	r->hash_ret = bpf_xdp_metadata_rx_hash(ctx, &hash,
						 (enum xdp_rss_hash_type *)&rss_type);
	r->vlan_ret = bpf_xdp_metadata_rx_vlan_tag(ctx, &proto, &tci);
	r->timestamp = ts;
	r->hash = hash;
	r->rss_type = rss_type;
	r->vlan_proto = proto;
	r->vlan_tci = tci;
	r->packets++;
	return XDP_PASS;
}

LICENSE("GPL");

// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * redirect_bcast - flood every packet to all the devices of a device map.
 *
 * bpf_redirect_map() with BPF_F_BROADCAST ignores the key: the frame goes
 * out of every device stored in the map (dev_map_enqueue_multi), each copy
 * but the last a clone of it. With BPF_F_EXCLUDE_INGRESS as well, the
 * device the frame came in on (and its upper devices) is skipped, which is
 * what a learning-free L2 flood wants.
 *
 *   xdp_redirect_bcast       BPF_F_BROADCAST: a copy to every device in
 *                            ports, the ingress one included;
 *   xdp_redirect_bcast_excl  BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS: a copy
 *                            to every device in ports but the ingress one.
 *
 * User space fills ports with the egress devices (struct bpf_devmap_val, so
 * an entry may carry a devmap program too). Each program counts the packets
 * it floods in a per-CPU counter, rxcnt[0].
 */
#include "pyxdp_bpf.h"

/* The flood domain: ports[i] = { .ifindex, .bpf_prog.fd }, any slots. */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__type(key, __u32);
	__type(value, struct bpf_devmap_val);
	__uint(max_entries, 8);
} ports SEC(".maps");

/* Packets flooded, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
} rxcnt SEC(".maps");

static __always_inline void count_packet(void)
{
	__u32 key = 0;
	__u64 *count = bpf_map_lookup_elem(&rxcnt, &key);

	if (count)
		*count += 1; /* per-CPU slot: no atomic needed */
}

SEC("xdp")
int xdp_redirect_bcast(struct xdp_md *ctx)
{
	count_packet();
	/* The key (0) is not looked up with BPF_F_BROADCAST; an empty map
	 * still gives XDP_REDIRECT, and the frame is then freed. */
	return bpf_redirect_map(&ports, 0, BPF_F_BROADCAST);
}

SEC("xdp")
int xdp_redirect_bcast_excl(struct xdp_md *ctx)
{
	count_packet();
	return bpf_redirect_map(&ports, 0, BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS);
}

LICENSE("GPL");

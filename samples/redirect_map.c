// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * redirect_map - forward everything from one interface to another through a
 * device map.
 *
 * xdp_redirect_map_prog (SEC "xdp") is attached to the ingress interface. It
 * counts each packet in a per-CPU counter, swaps the MAC addresses and
 * returns bpf_redirect_map(&tx_port, 0, 0): the frame is transmitted on the
 * device stored in tx_port[0] (user space puts the egress ifindex there).
 *
 * tx_port's values are struct bpf_devmap_val, so user space may also attach
 * a second program to the entry (bpf_prog.fd): it runs on the frame after
 * the redirect, on the egress side. xdp_redirect_map_egress (SEC
 * "xdp/devmap", expected attach type BPF_XDP_DEVMAP) is such a program: it
 * writes tx_src_mac, the egress device's address, as the source MAC.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

/* Egress device: tx_port[0] = { .ifindex, .bpf_prog.fd }. */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__type(key, __u32);
	__type(value, struct bpf_devmap_val);
	__uint(max_entries, 1);
} tx_port SEC(".maps");

/* Packets received, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
} rxcnt SEC(".maps");

/* Source MAC written by the egress program (set in .rodata before loading;
 * the default is a locally administered address). */
const volatile __u8 tx_src_mac[ETH_ALEN] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x01 };

SEC("xdp")
int xdp_redirect_map_prog(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 key = 0;
	__u64 *count;

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;

	count = bpf_map_lookup_elem(&rxcnt, &key);
	if (count)
		*count += 1;

	pyxdp_swap_macs(eth);

	/* Flags 0: if tx_port[0] is empty the helper returns XDP_ABORTED. */
	return bpf_redirect_map(&tx_port, 0, 0);
}

SEC("xdp/devmap")
int xdp_redirect_map_egress(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;

	/* In a devmap program ctx->egress_ifindex is the device the frame is
	 * about to leave through; ingress_ifindex is still where it came in. */
	if (ctx->egress_ifindex == 0)
		return XDP_DROP;

#pragma unroll
	for (int i = 0; i < ETH_ALEN; i++)
		eth->h_source[i] = tx_src_mac[i];

	/* XDP_PASS lets the frame go out; XDP_DROP would drop it. */
	return XDP_PASS;
}

LICENSE("GPL");

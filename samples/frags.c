// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * frags - a multi-buffer (SEC("xdp.frags")) program for jumbo frames.
 *
 * On a device whose MTU needs more than one page per frame, the driver hands
 * the program a head buffer (ctx->data..data_end: at most a page less
 * headroom and skb_shared_info) plus frags. The program parses the
 * Ethernet/IPv4/UDP headers in the head and picks what to do by the UDP
 * destination port:
 *
 *   9001  XDP_PASS, untouched
 *   9002  XDP_DROP
 *   9003  XDP_TX: MACs swapped; the last 8 bytes of the frame (in a frag for
 *         a long frame) overwritten with "FRAGSTX!" by bpf_xdp_store_bytes
 *   9004  bpf_xdp_adjust_tail(-1000), then XDP_PASS (frags released)
 *   9005  bpf_xdp_adjust_tail(+16): fails on a frags frame of a driver
 *         without frag_size (veth); the error goes into the stats, XDP_PASS
 *   9006  XDP_REDIRECT through tx_port[0] (a devmap)
 *
 * For every IPv4/UDP frame, stats records (slot = port - 9000) the frame
 * count, bpf_xdp_get_buff_len, the head length and an XOR of 8 bytes read
 * with bpf_xdp_load_bytes at offset 4000 (past the head for a long frame),
 * and the last helper result. Anything else passes.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

struct frag_stats {
	__u64 packets;
	__u64 buff_len;
	__u64 head_len;
	__u64 probe;
	__s64 err;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct frag_stats);
	__uint(max_entries, 8);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 1);
} tx_port SEC(".maps");

#define PROBE_OFF 4000

SEC("xdp.frags")
int xdp_frags(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip;
	struct udphdr *udp;
	struct frag_stats *st;
	__u8 probe[8];
	__u64 x = 0;
	__u32 slot;
	__u16 port;
	long err = 0;
	int i;

	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end || ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
		return XDP_PASS;
	udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > data_end)
		return XDP_PASS;
	port = bpf_ntohs(udp->dest);
	if (port < 9001 || port > 9006)
		return XDP_PASS;
	slot = port - 9000;
	st = bpf_map_lookup_elem(&stats, &slot);
	if (!st)
		return XDP_ABORTED;
	st->packets++;
	st->buff_len = bpf_xdp_get_buff_len(ctx);
	st->head_len = data_end - data;
	if (bpf_xdp_load_bytes(ctx, PROBE_OFF, probe, sizeof(probe)) == 0) {
		for (i = 0; i < 8; i++)
			x = (x << 8) | (x >> 56) ^ probe[i];
		st->probe = x;
	}

	switch (port) {
	case 9002:
		return XDP_DROP;
	case 9003: {
		__u8 mac[ETH_ALEN];
		char mark[8] = "FRAGSTX!";

		__builtin_memcpy(mac, eth->h_dest, ETH_ALEN);
		__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
		__builtin_memcpy(eth->h_source, mac, ETH_ALEN);
		err = bpf_xdp_store_bytes(ctx, bpf_xdp_get_buff_len(ctx) - 8, mark, 8);
		st->err = err;
		return err ? XDP_ABORTED : XDP_TX;
	}
	case 9004:
		st->err = bpf_xdp_adjust_tail(ctx, -1000);
		st->buff_len = bpf_xdp_get_buff_len(ctx);
		return XDP_PASS;
	case 9005:
		st->err = bpf_xdp_adjust_tail(ctx, 16);
		return XDP_PASS;
	case 9006:
		return bpf_redirect_map(&tx_port, 0, 0);
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";

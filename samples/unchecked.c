// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * unchecked: reads the IPv4 protocol byte without first checking the packet
 * is long enough. The kernel verifier refuses this program at load ("invalid
 * access to packet"); pyxdp loads it and stops the run of a short packet
 * with XDP_ABORTED and a report naming the line below that reads too far.
 * It exists to show that difference (see docs/SEMANTICS.md).
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

SEC("xdp")
int xdp_unchecked(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	struct ethhdr *eth = data;
	struct iphdr *iph = data + sizeof(*eth);

	/* Missing: if ((void *)(iph + 1) > (void *)(long)ctx->data_end) return XDP_PASS; */
	if (iph->protocol == IPPROTO_UDP)
		return XDP_DROP;
	return eth->h_proto ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";

// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * xsk - hand received packets to AF_XDP sockets.
 *
 * An AF_XDP socket binds to one receive queue of a device and user space
 * stores it in xsks at that queue's index. The program redirects each
 * packet to the socket registered for the queue it arrived on
 * (ctx->rx_queue_index). The third argument of bpf_redirect_map is the
 * action to return when the map has no entry for the key: XDP_PASS, so
 * queues without a socket keep feeding the normal network stack.
 *
 * rx_redirected counts, per CPU, the packets for which a socket was found.
 */
#include "pyxdp_bpf.h"

#define MAX_QUEUES 64

/* Queue index -> AF_XDP socket (user space stores the socket's fd). */
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, MAX_QUEUES);
} xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
} rx_redirected SEC(".maps");

SEC("xdp")
int xdp_sock_prog(struct xdp_md *ctx)
{
	__u32 index = ctx->rx_queue_index;
	__u32 key = 0;
	long action;
	__u64 *n;

	action = bpf_redirect_map(&xsks, index, XDP_PASS);
	if (action == XDP_REDIRECT) {
		n = bpf_map_lookup_elem(&rx_redirected, &key);
		if (n)
			*n += 1;
	}
	return action;
}

LICENSE("GPL");

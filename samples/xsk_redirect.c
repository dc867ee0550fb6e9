// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * xsk_redirect - hand received packets to AF_XDP sockets without an XSKMAP.
 *
 * The same job as xsk.c with pyxdp's bpf_redirect_xsk() helper: bind()
 * registered the socket on its rx queue, and the helper finds it from the
 * packet's own queue. Queues without a socket pass their packets to the
 * network stack (XDP_PASS in the helper's flags). pyxdp only: the kernel
 * refuses the helper (see include/pyxdp_ext.h).
 *
 * rx_redirected counts, per CPU, the packets for which a socket was found.
 */
#include "pyxdp_ext.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
} rx_redirected SEC(".maps");

SEC("xdp")
int xdp_sock_redirect_xsk(struct xdp_md *ctx)
{
	__u32 key = 0;
	long action;
	__u64 *n;

	action = bpf_redirect_xsk(ctx, XDP_PASS);
	if (action == XDP_REDIRECT) {
		n = bpf_map_lookup_elem(&rx_redirected, &key);
		if (n)
			*n += 1;
	}
	return action;
}

LICENSE("GPL");

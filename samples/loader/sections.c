// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * Loader feature test: the section names that make a function an XDP
 * program, and what each implies at load time.
 *
 *   SEC("xdp")               BPF_PROG_TYPE_XDP, expected attach type BPF_XDP
 *   SEC("xdp.frags")         same, loaded with BPF_F_XDP_HAS_FRAGS: may run
 *                            on multi-buffer packets (larger than a page)
 *   SEC("xdp/devmap")        expected attach type BPF_XDP_DEVMAP: for a
 *                            device map entry; may read ctx->egress_ifindex
 *   SEC("xdp.frags/devmap")  the same, multi-buffer aware
 *   SEC("xdp/cpumap")        expected attach type BPF_XDP_CPUMAP: for a CPU
 *                            map entry
 *   SEC("xdp.frags/cpumap")  the same, multi-buffer aware
 *   SEC("xdp_pass")          an old-style name, from before the "xdp/..."
 *                            convention: loaders that match the "xdp"
 *                            prefix treat it as plain XDP; libbpf 1.0 and
 *                            later no longer recognise it
 */
#include "pyxdp_bpf.h"

SEC("xdp")
int sec_xdp(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("xdp.frags")
int sec_xdp_frags(struct xdp_md *ctx)
{
	/* Linear part and whole length differ for multi-buffer packets. */
	__u64 linear = ctx->data_end - ctx->data;
	__u64 total = bpf_xdp_get_buff_len(ctx);
	__u8 last;

	if (total == 0)
		return XDP_DROP;
	/* Read the very last byte, possibly from a fragment. */
	if (bpf_xdp_load_bytes(ctx, total - 1, &last, 1))
		return XDP_ABORTED;
	/* An arbitrary rule that needs both: drop multi-buffer packets whose
	 * last byte is 0xff. */
	return (total > linear && last == 0xff) ? XDP_DROP : XDP_PASS;
}

SEC("xdp/devmap")
int sec_devmap(struct xdp_md *ctx)
{
	return ctx->egress_ifindex ? XDP_PASS : XDP_DROP;
}

SEC("xdp.frags/devmap")
int sec_devmap_frags(struct xdp_md *ctx)
{
	return bpf_xdp_get_buff_len(ctx) > 0 ? XDP_PASS : XDP_DROP;
}

SEC("xdp/cpumap")
int sec_cpumap(struct xdp_md *ctx)
{
	return ctx->ingress_ifindex ? XDP_PASS : XDP_DROP;
}

SEC("xdp.frags/cpumap")
int sec_cpumap_frags(struct xdp_md *ctx)
{
	return bpf_xdp_get_buff_len(ctx) > 0 ? XDP_PASS : XDP_DROP;
}

SEC("xdp_pass")
int sec_legacy_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

LICENSE("GPL");

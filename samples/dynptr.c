// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * dynptr - the frame through a dynptr: bpf_dynptr_from_xdp, the
 * bpf_dynptr_slice / bpf_dynptr_slice_rdwr kfuncs and the bpf_dynptr_read /
 * bpf_dynptr_write helpers, on frames of any length (SEC("xdp.frags"):
 * frames longer than a page come in frags).
 *
 * Each run writes into out[]: the return codes, what slices pointed at and
 * bytes read at the start, around the end of the first page and at the end
 * of the frame; it increments the byte at payload offset 0 through a
 * read-write slice and writes the frame's length into its last 4 bytes
 * through bpf_dynptr_write. The verdict is XDP_PASS.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

#define __ksym __attribute__((section(".ksyms")))

extern int bpf_dynptr_from_xdp(struct xdp_md *x, __u64 flags,
			       struct bpf_dynptr *ptr__uninit) __ksym;
extern void *bpf_dynptr_slice(const struct bpf_dynptr *p, __u32 offset,
			      void *buffer__opt, __u32 buffer__szk) __ksym;
extern void *bpf_dynptr_slice_rdwr(const struct bpf_dynptr *p, __u32 offset,
				   void *buffer__opt, __u32 buffer__szk) __ksym;

static long (* const bpf_dynptr_read)(void *dst, __u32 len, const struct bpf_dynptr *src,
				      __u32 offset, __u64 flags) = (void *) 201;
static long (* const bpf_dynptr_write)(const struct bpf_dynptr *dst, __u32 offset,
				       void *src, __u32 len, __u64 flags) = (void *) 202;

#define PAYLOAD 42
#define NOUT 12

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NOUT);
	__type(key, __u32);
	__type(value, __s64);
} out SEC(".maps");

static __always_inline void put(__u32 k, __s64 v)
{
	__s64 *slot = bpf_map_lookup_elem(&out, &k);

	if (slot)
		*slot = v;
}

static __always_inline __s64 sum8(const __u8 *b)
{
	__s64 s = 0;

	for (int i = 0; i < 8; i++)
		s = s * 31 + b[i];
	return s;
}

SEC("xdp.frags")
int xdp_dynptr(struct xdp_md *ctx)
{
	struct bpf_dynptr bad, ptr;
	__u8 buf[8] = {}, rbuf[8] = {};
	__u32 len = bpf_xdp_get_buff_len(ctx);
	__u8 *p;
	long r;

	put(0, bpf_dynptr_from_xdp(ctx, 1, &bad));	/* flags must be 0 */
	put(1, bpf_dynptr_from_xdp(ctx, 0, &ptr));

	/* Ethernet addresses: in the linear part, so a pointer into the frame. */
	p = bpf_dynptr_slice(&ptr, 0, buf, sizeof(buf));
	put(2, p ? (p == buf ? 1 : 2) * 1000000 + sum8(p) % 1000000 : -1);

	/* Across the end of the linear part (3520 bytes under test_run), or in a frag. */
	p = bpf_dynptr_slice(&ptr, 3516, buf, sizeof(buf));
	put(3, p ? (p == buf ? 1 : 2) * 1000000 + sum8(p) % 1000000 : -1);
	p = bpf_dynptr_slice(&ptr, 5000, buf, sizeof(buf));
	put(4, p ? (p == buf ? 1 : 2) * 1000000 + sum8(p) % 1000000 : -1);

	/* The last 8 bytes, and 8 bytes that run past the end (-E2BIG). */
	r = bpf_dynptr_read(rbuf, sizeof(rbuf), &ptr, len - 8, 0);
	put(5, r ? r : sum8(rbuf));
	put(6, bpf_dynptr_read(rbuf, sizeof(rbuf), &ptr, len - 4, 0));
	put(7, bpf_dynptr_read(rbuf, sizeof(rbuf), &ptr, 0, 1));	/* flags */

	/* Write: through a read-write slice, and with bpf_dynptr_write. */
	p = bpf_dynptr_slice_rdwr(&ptr, PAYLOAD, NULL, 1);
	if (p)
		*p += 1;
	put(8, p ? 1 : 0);
	put(9, bpf_dynptr_write(&ptr, len - 4, &len, sizeof(len), 0));
	put(10, bpf_dynptr_write(&ptr, len - 2, &len, sizeof(len), 0));
	put(11, bpf_dynptr_write(&bad, 0, &len, sizeof(len), 0));
	return XDP_PASS;
}

LICENSE("GPL");

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
 *
 * xdp_dynptr_ops runs the dynptr kfuncs that work on any dynptr -
 * bpf_dynptr_size, _is_null, _is_rdonly, _clone, _adjust, _memset and _copy -
 * on the frame's dynptr and on a null one, with the offsets and lengths the
 * args[] array holds; every result goes into ops_out[].
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

extern __u32 bpf_dynptr_size(const struct bpf_dynptr *p) __ksym;
extern _Bool bpf_dynptr_is_null(const struct bpf_dynptr *p) __ksym;
extern _Bool bpf_dynptr_is_rdonly(const struct bpf_dynptr *p) __ksym;
extern int bpf_dynptr_adjust(const struct bpf_dynptr *p, __u32 start, __u32 end) __ksym;
extern int bpf_dynptr_clone(const struct bpf_dynptr *p,
			    struct bpf_dynptr *clone__uninit) __ksym;
extern int bpf_dynptr_copy(struct bpf_dynptr *dst_ptr, __u32 dst_off,
			   struct bpf_dynptr *src_ptr, __u32 src_off, __u32 size) __ksym;
extern int bpf_dynptr_memset(struct bpf_dynptr *p, __u32 offset, __u32 size,
			     __u8 val) __ksym;

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

/* args[]: adjust start and end, two offsets, a length, a fill byte, and how many
 * bytes bpf_xdp_adjust_tail cuts off after the dynptr is made (its size does not
 * follow: reads and writes past the new end fail, midway through a copy or fill). */
enum { A_START, A_END, A_OFF1, A_OFF2, A_LEN, A_VAL, A_SHRINK, NARGS };
#define NOPS 24

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NARGS);
	__type(key, __u32);
	__type(value, __u32);
} args SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NOPS);
	__type(key, __u32);
	__type(value, __s64);
} ops_out SEC(".maps");

static __always_inline void oput(__u32 k, __s64 v)
{
	__s64 *slot = bpf_map_lookup_elem(&ops_out, &k);

	if (slot)
		*slot = v;
}

static __always_inline __u32 arg(__u32 k)
{
	__u32 *v = bpf_map_lookup_elem(&args, &k);

	return v ? *v : 0;
}

SEC("xdp.frags")
int xdp_dynptr_ops(struct xdp_md *ctx)
{
	struct bpf_dynptr ptr, null, win, nclone;
	__u32 start = arg(A_START), end = arg(A_END), off1 = arg(A_OFF1);
	__u32 off2 = arg(A_OFF2), len = arg(A_LEN), val = arg(A_VAL), shrink = arg(A_SHRINK);
	__u8 rbuf[8] = {};
	long r;

	oput(0, bpf_dynptr_from_xdp(ctx, 0, &ptr));
	oput(1, bpf_dynptr_from_xdp(ctx, 1, &null));	/* a null dynptr */
	if (shrink)
		bpf_xdp_adjust_tail(ctx, -(int)shrink);
	oput(2, bpf_dynptr_size(&ptr));
	oput(3, bpf_dynptr_size(&null));
	oput(4, bpf_dynptr_is_null(&ptr) * 10 + bpf_dynptr_is_null(&null));
	oput(5, bpf_dynptr_is_rdonly(&ptr) * 10 + bpf_dynptr_is_rdonly(&null));
	oput(6, bpf_dynptr_clone(&null, &nclone));
	oput(7, bpf_dynptr_is_null(&nclone));

	/* A window [start, end) of a clone; the original keeps its size. */
	oput(8, bpf_dynptr_clone(&ptr, &win));
	oput(9, bpf_dynptr_adjust(&win, start, end));
	oput(10, bpf_dynptr_size(&win));
	oput(11, bpf_dynptr_size(&ptr));
	r = bpf_dynptr_read(rbuf, sizeof(rbuf), &win, 0, 0);
	oput(12, r ? r : (__s64)rbuf[0] << 8 | rbuf[7]);

	/* Fill and copy through the window and the whole frame. */
	oput(13, bpf_dynptr_memset(&win, off1, len, val));
	oput(14, bpf_dynptr_copy(&ptr, off2, &win, off1, len));
	oput(15, bpf_dynptr_copy(&win, off1, &ptr, off2 + 1, len));
	oput(16, bpf_dynptr_memset(&ptr, off2, len, val + 1));
	oput(17, bpf_dynptr_copy(&ptr, off1, &ptr, off2, len));

	/* The null dynptr and bad windows. */
	oput(18, bpf_dynptr_memset(&null, 0, len, 1));
	oput(19, bpf_dynptr_copy(&ptr, 0, &null, 0, len));
	oput(20, bpf_dynptr_copy(&null, 0, &ptr, 0, len));
	oput(21, bpf_dynptr_adjust(&null, 0, 0));
	oput(22, bpf_dynptr_adjust(&win, end, start));
	oput(23, bpf_dynptr_adjust(&ptr, 0, bpf_dynptr_size(&ptr) + 1));
	return XDP_PASS;
}

LICENSE("GPL");

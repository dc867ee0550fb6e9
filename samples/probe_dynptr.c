// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * probe_dynptr - Linux 6.18's bpf_probe_read_{kernel,user}{,_str}_dynptr kfuncs from
 * XDP: read memory at any address into a dynptr at an offset.
 *
 * xdp_probe_dynptr reads cfg[0]: the kfunc (op: 0 kernel, 1 kernel_str, 2 user,
 * 3 user_str), the destination dynptr (DST_LOCAL: out's 64-byte buffer, filled with
 * 0xaa first; DST_RINGBUF: a 64-byte ring buffer record, filled so too; DST_XDP: the
 * frame; DST_NULL: the null dynptr a refused bpf_dynptr_from_mem leaves), the
 * offset in it and the size, and where the source is (SRC_MAP: the text map's value
 * from byte off on; SRC_STACK: 64 bytes of it copied to the stack; SRC_PKT: the
 * packet from byte off on; SRC_RAW: the number raw taken as an address). out[0]
 * gets the kfunc's return and 64 bytes of the destination from the offset on (the
 * frame's: from the offset dout). The verdict is XDP_PASS.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

#define __ksym __attribute__((section(".ksyms")))

extern int bpf_probe_read_kernel_dynptr(struct bpf_dynptr *dptr, __u32 off, __u32 size,
					const void *unsafe_ptr__ign) __ksym;
extern int bpf_probe_read_kernel_str_dynptr(struct bpf_dynptr *dptr, __u32 off, __u32 size,
					    const void *unsafe_ptr__ign) __ksym;
extern int bpf_probe_read_user_dynptr(struct bpf_dynptr *dptr, __u32 off, __u32 size,
				      const void *unsafe_ptr__ign) __ksym;
extern int bpf_probe_read_user_str_dynptr(struct bpf_dynptr *dptr, __u32 off, __u32 size,
					  const void *unsafe_ptr__ign) __ksym;
extern int bpf_dynptr_from_xdp(struct xdp_md *x, __u64 flags,
			       struct bpf_dynptr *ptr__uninit) __ksym;

static long (* const bpf_dynptr_from_mem)(void *data, __u32 size, __u64 flags,
					  struct bpf_dynptr *ptr) = (void *) 197;
static long (* const bpf_ringbuf_reserve_dynptr)(void *ringbuf, __u32 size, __u64 flags,
						 struct bpf_dynptr *ptr) = (void *) 198;
static void (* const bpf_ringbuf_discard_dynptr)(struct bpf_dynptr *ptr, __u64 flags) =
	(void *) 200;
static long (* const bpf_dynptr_read)(void *dst, __u32 len, const struct bpf_dynptr *src,
				      __u32 offset, __u64 flags) = (void *) 201;
static long (* const bpf_dynptr_write)(const struct bpf_dynptr *dst, __u32 offset,
				       void *src, __u32 len, __u64 flags) = (void *) 202;

enum { SRC_MAP, SRC_STACK, SRC_PKT, SRC_RAW };
enum { DST_LOCAL, DST_RINGBUF, DST_XDP, DST_NULL };
#define TEXT 512
#define BUF 64

struct cfg {
	__u32 op;
	__u32 dst;
	__u32 doff;
	__u32 size;
	__u32 where;
	__u32 off;
	__u64 raw;
	__u32 dout;
	__u32 pad;
};

struct text {
	char b[TEXT];
};

struct result {
	__s64 ret;
	char buf[BUF];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cfg);
} cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct text);
} text SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct result);
} out SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} rb SEC(".maps");

static __always_inline long probe(__u32 op, struct bpf_dynptr *d, __u32 off, __u32 size,
				  const void *src)
{
	switch (op) {
	case 0:
		return bpf_probe_read_kernel_dynptr(d, off, size, src);
	case 1:
		return bpf_probe_read_kernel_str_dynptr(d, off, size, src);
	case 2:
		return bpf_probe_read_user_dynptr(d, off, size, src);
	default:
		return bpf_probe_read_user_str_dynptr(d, off, size, src);
	}
}

SEC("xdp.frags")
int xdp_probe_dynptr(struct xdp_md *ctx)
{
	char copy[BUF], fill[BUF];
	__u32 zero = 0, off;
	struct cfg *c = bpf_map_lookup_elem(&cfg, &zero);
	struct text *t = bpf_map_lookup_elem(&text, &zero);
	struct result *o = bpf_map_lookup_elem(&out, &zero);
	void *data = (void *)(long)ctx->data;
	struct bpf_dynptr d;
	const void *src;

	if (!c || !t || !o)
		return XDP_ABORTED;
	off = c->off;
	switch (c->where) {
	case SRC_MAP:
		src = off < TEXT ? &t->b[off] : NULL;
		break;
	case SRC_STACK:
		if (off < TEXT - BUF)
			__builtin_memcpy(copy, &t->b[off], BUF);
		else
			__builtin_memset(copy, 0, BUF);
		src = copy;
		break;
	case SRC_PKT:
		src = off < 1500 ? data + off : NULL;
		break;
	default:
		src = (const void *)c->raw;
	}
	__builtin_memset(o->buf, 0xaa, BUF);
	__builtin_memset(fill, 0xaa, BUF);
	switch (c->dst) {
	case DST_LOCAL:
		bpf_dynptr_from_mem(o->buf, BUF, 0, &d);
		o->ret = probe(c->op, &d, c->doff, c->size, src);
		break;
	case DST_RINGBUF:
		bpf_ringbuf_reserve_dynptr(&rb, BUF, 0, &d);
		bpf_dynptr_write(&d, 0, fill, BUF, 0);
		o->ret = probe(c->op, &d, c->doff, c->size, src);
		bpf_dynptr_read(o->buf, BUF, &d, 0, 0);
		bpf_ringbuf_discard_dynptr(&d, 0);
		break;
	case DST_XDP:
		bpf_dynptr_from_xdp(ctx, 0, &d);
		o->ret = probe(c->op, &d, c->doff, c->size, src);
		bpf_dynptr_read(o->buf, BUF, &d, c->dout, 0);
		break;
	default:
		bpf_dynptr_from_mem(o->buf, BUF, 1, &d);	/* flags: a null dynptr */
		o->ret = probe(c->op, &d, c->doff, c->size, src);
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";

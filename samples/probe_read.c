// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * probe_read - bpf_probe_read_kernel and bpf_probe_read_kernel_str from XDP (the
 * base helpers root's programs get: libbpf's BPF_CORE_READ reads through the first).
 *
 * xdp_probe_read reads cfg[0]: the helper (op: 0 probe_read_kernel, 1 its _str),
 * where the source is (SRC_MAP: the text map's value from byte off on; SRC_STACK: 64
 * bytes of it copied to the stack; SRC_PKT: the packet from byte off on; SRC_RAW: the
 * number raw taken as an address) and the size (at most 64). The destination is a
 * 64-byte stack buffer of 0xaa bytes; out[0] gets the helper's return and the buffer
 * after the call. The verdict is XDP_PASS.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

static long (*bpf_probe_read_kernel)(void *dst, __u32 size, const void *unsafe_ptr) =
	(void *)113;
static long (*bpf_probe_read_kernel_str)(void *dst, __u32 size, const void *unsafe_ptr) =
	(void *)115;

enum { SRC_MAP, SRC_STACK, SRC_PKT, SRC_RAW };
#define TEXT 256
#define BUF 64

struct cfg {
	__u32 op;
	__u32 where;
	__u32 off;
	__u32 size;
	__u64 raw;
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

SEC("xdp")
int xdp_probe_read(struct xdp_md *ctx)
{
	char buf[BUF], copy[BUF];
	__u32 zero = 0, size, off;
	struct cfg *c = bpf_map_lookup_elem(&cfg, &zero);
	struct text *t = bpf_map_lookup_elem(&text, &zero);
	struct result *o = bpf_map_lookup_elem(&out, &zero);
	void *data = (void *)(long)ctx->data;
	const void *src;
	long r;

	if (!c || !t || !o)
		return XDP_ABORTED;
	__builtin_memset(buf, 0xaa, BUF);
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
	size = c->size;
	if (size > BUF)
		size = BUF;
	if (c->op)
		r = bpf_probe_read_kernel_str(buf, size, src);
	else
		r = bpf_probe_read_kernel(buf, size, src);
	o->ret = r;
	__builtin_memcpy(o->buf, buf, BUF);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";

// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * exceptions - BPF exceptions: bpf_throw(cookie) from the main program, a
 * static function and a global one unwinds every frame and the program
 * returns the cookie (the default exception callback; an XDP run keeps its low
 * 32 bits), and the mistakes Linux refuses. Each program's Linux 6.18 verdict
 * is recorded in tests/test_verifier.py, the runs compared with Linux's by
 * tests/kernel/test_exceptions_kernel.py.
 *
 * Built with (from the repository's top directory):
 *   clang-16 -target bpf -O2 -g -Wall -Isamples/include -mcpu=v3 \
 *     -c tests/verifier_objects/exceptions.c -o tests/verifier_objects/exceptions.o
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"
#include "pyxdp_kfuncs.h"

extern void bpf_throw(__u64 cookie) __ksym;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

/* Throws XDP_TX in the upper word too: the run keeps the low 32 bits. */
static __noinline int check_first(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u8 *p = data;

	if (p + 1 > (__u8 *)end)
		return 0;
	if (*p == 0xff)
		bpf_throw(0x100000000ULL | XDP_TX);
	return *p;
}

__noinline int check_len(__u32 len)
{
	if (len > 1000)
		bpf_throw(XDP_ABORTED);
	return len & 1;
}

SEC("xdp")
int xdp_throw(struct xdp_md *ctx)
{
	__u32 len = ctx->data_end - ctx->data;
	int first;

	if (len < 20)
		bpf_throw(XDP_DROP);
	first = check_first(ctx);
	if (check_len(len))
		return XDP_PASS + 0 * first;
	return first == 7 ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int xdp_throw_leak(struct xdp_md *ctx)
{
	__u64 *e = bpf_ringbuf_reserve(&events, 8, 0);

	if (!e)
		return XDP_PASS;
	if (ctx->data_end - ctx->data < 14)
		bpf_throw(XDP_DROP);
	bpf_ringbuf_discard(e, 0);
	return XDP_PASS;
}

static int throw_cb(__u32 i, void *c)
{
	if (i == 3)
		bpf_throw(XDP_DROP);
	return 0;
}

SEC("xdp")
int xdp_throw_in_callback(struct xdp_md *ctx)
{
	bpf_loop(4, throw_cb, 0, 0);
	return XDP_PASS;
}

SEC("xdp")
int xdp_throw_pointer(struct xdp_md *ctx)
{
	if (ctx->data_end - ctx->data < 14)
		bpf_throw((__u64)(long)ctx);
	return XDP_PASS;
}

LICENSE("GPL");

// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * exception_cb - a BPF exception callback of the program's own: __exception_cb(cb)
 * tags the main function with the BTF decl tag "exception_callback:cb", and libbpf
 * appends cb (a global function nothing calls) to the program, where the verifier
 * finds it through the tag and func_info. A throw then returns what cb returns for
 * the cookie instead of the cookie (xdp_throw_cb: short frames throw 7, cb gives
 * XDP_TX; long frames throw XDP_PASS, cb gives XDP_DROP). xdp_throw_plain, in the
 * same object, throws with the default callback (the cookie). The runs are compared
 * with Linux's by tests/kernel/test_exceptions_kernel.py; xdp_cb_two_args,
 * xdp_cb_throws and xdp_cb_called are what Linux refuses (tests/test_verifier.py
 * pins the verdicts, tests/kernel/test_verifier_kernel.py re-measures them).
 *
 * Built with (from the repository's top directory):
 *   clang-16 -target bpf -O2 -g -Wall -Isamples/include -mcpu=v3 \
 *     -c tests/verifier_objects/exception_cb.c -o tests/verifier_objects/exception_cb.o
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"
#include "pyxdp_kfuncs.h"

#define __exception_cb(name) __attribute__((btf_decl_tag("exception_callback:" #name)))

extern void bpf_throw(__u64 cookie) __ksym;

__noinline int xdp_exc_cb(__u64 cookie)
{
	return cookie == 7 ? XDP_TX : XDP_DROP;
}

SEC("xdp") __exception_cb(xdp_exc_cb)
int xdp_throw_cb(struct xdp_md *ctx)
{
	__u32 len = ctx->data_end - ctx->data;

	if (len < 20)
		bpf_throw(7);
	if (len > 1000)
		bpf_throw(XDP_PASS);
	return XDP_PASS;
}

SEC("xdp")
int xdp_throw_plain(struct xdp_md *ctx)
{
	if (ctx->data_end - ctx->data < 20)
		bpf_throw(XDP_TX);
	return XDP_PASS;
}

/* What Linux refuses: a callback of two arguments, one that throws, a program that
 * calls its callback. */
__noinline int exc_cb_two(int a, int b)
{
	return a + b;
}

SEC("xdp") __exception_cb(exc_cb_two)
int xdp_cb_two_args(struct xdp_md *ctx)
{
	if (ctx->data_end - ctx->data < 20)
		bpf_throw(1);
	return XDP_PASS;
}

__noinline int exc_cb_throws(__u64 cookie)
{
	if (cookie > 4)
		bpf_throw(cookie);
	return XDP_DROP;
}

SEC("xdp") __exception_cb(exc_cb_throws)
int xdp_cb_throws(struct xdp_md *ctx)
{
	if (ctx->data_end - ctx->data < 20)
		bpf_throw(9);
	return XDP_PASS;
}

SEC("xdp") __exception_cb(xdp_exc_cb)
int xdp_cb_called(struct xdp_md *ctx)
{
	if (ctx->data_end - ctx->data < 20)
		bpf_throw(7);
	return xdp_exc_cb(ctx->data_end - ctx->data);
}

LICENSE("GPL");

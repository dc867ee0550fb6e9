// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * crypto - a BPF crypto context (kernel/bpf/crypto.c, the "skcipher" type)
 * made by a SEC("syscall") program and used by an XDP program.
 *
 * crypto_setup's context (BPF_PROG_TEST_RUN's ctx_in) is a struct
 * setup_args: the struct bpf_crypto_params to create the context from; it
 * writes bpf_crypto_ctx_create's error back into args->err and keeps the
 * new context in the map value's __kptr field (returning 1), releasing the
 * one it replaces.
 *
 * xdp_crypt en- or decrypts (job.op) the packet's bytes [job.off,
 * job.off + job.len) into place, into job.out (job.to 1) or into the packet
 * from job.dst_off on (job.to 2),
 * with job.siv (job.siv_len bytes; no IV dynptr when job.use_siv is 0) as
 * the IV, and records the kfunc's return in job.ret, the IV after it in
 * job.siv. It returns XDP_PASS, or XDP_ABORTED when it has no context.
 *
 * The xdp_crypto_* and sys_crypto_* programs after it are the usual mistakes
 * (sys_crypto_acquire is right); each one's Linux 6.18 verdict is recorded in
 * tests/test_verifier.py.
 *
 * Built with (from the repository's top directory):
 *   clang-16 -target bpf -O2 -g -Wall -Isamples/include -mcpu=v3 \
 *     -c tests/verifier_objects/crypto.c -o tests/verifier_objects/crypto.o
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"
#include "pyxdp_kfuncs.h"

/* kernel/bpf/crypto.c's structs: the params by value, the context opaque */
struct bpf_crypto_params {
	char type[14];
	__u8 reserved[2];
	char algo[128];
	__u8 key[256];
	__u32 key_len;
	__u32 authsize;
};

struct bpf_crypto_ctx {
	int opaque;
};

extern struct bpf_crypto_ctx *bpf_crypto_ctx_create(const struct bpf_crypto_params *params,
						    __u32 params__sz, int *err) __ksym;
extern struct bpf_crypto_ctx *bpf_crypto_ctx_acquire(struct bpf_crypto_ctx *ctx) __ksym;
extern void bpf_crypto_ctx_release(struct bpf_crypto_ctx *ctx) __ksym;
extern int bpf_crypto_encrypt(struct bpf_crypto_ctx *ctx, const struct bpf_dynptr *src,
			      const struct bpf_dynptr *dst,
			      const struct bpf_dynptr *siv__nullable) __ksym;
extern int bpf_crypto_decrypt(struct bpf_crypto_ctx *ctx, const struct bpf_dynptr *src,
			      const struct bpf_dynptr *dst,
			      const struct bpf_dynptr *siv__nullable) __ksym;
extern int bpf_dynptr_from_xdp(struct xdp_md *x, __u64 flags,
			       struct bpf_dynptr *ptr__uninit) __ksym;
extern __u32 bpf_dynptr_size(const struct bpf_dynptr *p) __ksym;
extern int bpf_dynptr_adjust(const struct bpf_dynptr *p, __u32 start, __u32 end) __ksym;
extern int bpf_dynptr_clone(const struct bpf_dynptr *p, struct bpf_dynptr *clone__uninit) __ksym;
static long (* const bpf_dynptr_from_mem)(void *data, __u32 size, __u64 flags,
					  struct bpf_dynptr *ptr) = (void *) 197;

struct setup_args {
	struct bpf_crypto_params params;
	int err;
};

struct slot {
	struct bpf_crypto_ctx __kptr *ctx;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct slot);
} ctxs SEC(".maps");

struct job {
	__u32 op;	/* 0: encrypt, 1: decrypt */
	__u32 off;
	__u32 len;
	__u32 to;
	__u32 use_siv;
	__u32 siv_len;
	__s32 ret;
	__u32 dst_off;
	__u8 siv[32];
	__u8 out[256];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct job);
} jobs SEC(".maps");

SEC("syscall")
int crypto_setup(struct setup_args *args)
{
	struct bpf_crypto_ctx *cctx, *old;
	struct slot *s;
	__u32 k = 0;
	int err = 0;

	cctx = bpf_crypto_ctx_create(&args->params, sizeof(args->params), &err);
	args->err = err;
	if (!cctx)
		return 0;
	s = bpf_map_lookup_elem(&ctxs, &k);
	if (!s) {
		bpf_crypto_ctx_release(cctx);
		return 0;
	}
	old = bpf_kptr_xchg(&s->ctx, cctx);
	if (old)
		bpf_crypto_ctx_release(old);
	return 1;
}

SEC("xdp")
int xdp_crypt(struct xdp_md *ctx)
{
	struct bpf_dynptr pkt, src, dst, siv;
	struct bpf_crypto_ctx *cctx;
	struct slot *s;
	struct job *j;
	__u32 k = 0, siv_len;

	s = bpf_map_lookup_elem(&ctxs, &k);
	j = bpf_map_lookup_elem(&jobs, &k);
	if (!s || !j)
		return XDP_ABORTED;
	cctx = s->ctx;
	if (!cctx)
		return XDP_ABORTED;
	siv_len = j->siv_len;
	if (siv_len > sizeof(j->siv))
		siv_len = sizeof(j->siv);
	bpf_dynptr_from_xdp(ctx, 0, &pkt);
	bpf_dynptr_clone(&pkt, &src);
	bpf_dynptr_adjust(&src, j->off, j->off + j->len);
	if (j->to == 1) {
		bpf_dynptr_from_mem(j->out, sizeof(j->out), 0, &dst);
	} else if (j->to == 2) {
		bpf_dynptr_clone(&pkt, &dst);
		bpf_dynptr_adjust(&dst, j->dst_off, bpf_dynptr_size(&pkt));
	} else {
		bpf_dynptr_clone(&src, &dst);
	}
	bpf_dynptr_from_mem(j->siv, siv_len, 0, &siv);
	if (j->op)
		j->ret = bpf_crypto_decrypt(cctx, &src, &dst, j->use_siv ? &siv : NULL);
	else
		j->ret = bpf_crypto_encrypt(cctx, &src, &dst, j->use_siv ? &siv : NULL);
	return XDP_PASS;
}

static __always_inline struct slot *slot0(void)
{
	__u32 k = 0;

	return bpf_map_lookup_elem(&ctxs, &k);
}

/* the field's RCU pointer, NULL not ruled out */
SEC("xdp")
int xdp_crypto_maybe_null(struct xdp_md *ctx)
{
	struct bpf_dynptr pkt;
	struct slot *s = slot0();

	if (!s)
		return XDP_ABORTED;
	bpf_dynptr_from_xdp(ctx, 0, &pkt);
	return bpf_crypto_encrypt(s->ctx, &pkt, &pkt, NULL) ? XDP_DROP : XDP_PASS;
}

/* a source dynptr never made */
SEC("xdp")
int xdp_crypto_uninit_src(struct xdp_md *ctx)
{
	struct bpf_dynptr pkt, src;
	struct bpf_crypto_ctx *c;
	struct slot *s = slot0();

	if (!s)
		return XDP_ABORTED;
	c = s->ctx;
	if (!c)
		return XDP_ABORTED;
	bpf_dynptr_from_xdp(ctx, 0, &pkt);
	return bpf_crypto_decrypt(c, &src, &pkt, NULL) ? XDP_DROP : XDP_PASS;
}

/* an IV that is no dynptr: stack bytes */
SEC("xdp")
int xdp_crypto_siv_bytes(struct xdp_md *ctx)
{
	struct bpf_dynptr pkt;
	struct bpf_crypto_ctx *c;
	struct slot *s = slot0();
	__u64 iv[2] = {1, 2};

	if (!s)
		return XDP_ABORTED;
	c = s->ctx;
	if (!c)
		return XDP_ABORTED;
	bpf_dynptr_from_xdp(ctx, 0, &pkt);
	return bpf_crypto_encrypt(c, &pkt, &pkt, (void *)iv) ? XDP_DROP : XDP_PASS;
}

/* the map value where the context is wanted */
SEC("xdp")
int xdp_crypto_not_ctx(struct xdp_md *ctx)
{
	struct bpf_dynptr pkt;
	struct slot *s = slot0();

	if (!s)
		return XDP_ABORTED;
	bpf_dynptr_from_xdp(ctx, 0, &pkt);
	return bpf_crypto_encrypt((void *)s, &pkt, &pkt, NULL) ? XDP_DROP : XDP_PASS;
}

/* taken out of the map and used: the reference is never given back */
SEC("xdp")
int xdp_crypto_xchg_leak(struct xdp_md *ctx)
{
	struct bpf_dynptr pkt;
	struct bpf_crypto_ctx *c;
	struct slot *s = slot0();

	if (!s)
		return XDP_ABORTED;
	c = bpf_kptr_xchg(&s->ctx, NULL);
	if (!c)
		return XDP_ABORTED;
	bpf_dynptr_from_xdp(ctx, 0, &pkt);
	return bpf_crypto_encrypt(c, &pkt, &pkt, NULL) ? XDP_DROP : XDP_PASS;
}

/* taken out, used and put back; what the put gives back is put again */
SEC("xdp")
int xdp_crypto_xchg_back(struct xdp_md *ctx)
{
	struct bpf_dynptr pkt;
	struct bpf_crypto_ctx *c, *old;
	struct slot *s = slot0();
	int ret;

	if (!s)
		return XDP_ABORTED;
	c = bpf_kptr_xchg(&s->ctx, NULL);
	if (!c)
		return XDP_ABORTED;
	bpf_dynptr_from_xdp(ctx, 0, &pkt);
	ret = bpf_crypto_encrypt(c, &pkt, &pkt, NULL);
	old = bpf_kptr_xchg(&s->ctx, c);
	if (old)
		bpf_crypto_ctx_release(old);
	return ret ? XDP_DROP : XDP_PASS;
}

/* a store to the field */
SEC("xdp")
int xdp_crypto_store(struct xdp_md *ctx)
{
	struct slot *s = slot0();

	if (!s)
		return XDP_ABORTED;
	s->ctx = 0;
	return XDP_PASS;
}

/* the same context through an RCU pointer both times, decrypted back */
SEC("xdp")
int xdp_crypto_roundtrip(struct xdp_md *ctx)
{
	struct bpf_dynptr pkt, buf;
	struct bpf_crypto_ctx *c;
	struct slot *s = slot0();
	struct job *j;
	__u32 k = 0;

	j = bpf_map_lookup_elem(&jobs, &k);
	if (!s || !j)
		return XDP_ABORTED;
	c = s->ctx;
	if (!c)
		return XDP_ABORTED;
	bpf_dynptr_from_xdp(ctx, 0, &pkt);
	bpf_dynptr_from_mem(j->out, sizeof(j->out), 0, &buf);
	if (bpf_crypto_encrypt(c, &pkt, &buf, NULL))
		return XDP_DROP;
	return bpf_crypto_decrypt(c, &buf, &pkt, NULL) ? XDP_DROP : XDP_PASS;
}

/* syscall programs' mistakes with a context's references */

/* the new context neither kept nor released */
SEC("syscall")
int sys_crypto_leak(struct setup_args *args)
{
	int err = 0;

	bpf_crypto_ctx_create(&args->params, sizeof(args->params), &err);
	args->err = err;
	return 0;
}

/* released without a NULL check */
SEC("syscall")
int sys_crypto_maybe_null(struct setup_args *args)
{
	struct bpf_crypto_ctx *c;
	int err = 0;

	c = bpf_crypto_ctx_create(&args->params, sizeof(args->params), &err);
	bpf_crypto_ctx_release(c);
	return err;
}

/* released twice */
SEC("syscall")
int sys_crypto_twice(struct setup_args *args)
{
	struct bpf_crypto_ctx *c;
	int err = 0;

	c = bpf_crypto_ctx_create(&args->params, sizeof(args->params), &err);
	if (!c)
		return err;
	bpf_crypto_ctx_release(c);
	bpf_crypto_ctx_release(c);
	return 0;
}

/* a second reference taken and both given back */
SEC("syscall")
int sys_crypto_acquire(struct setup_args *args)
{
	struct bpf_crypto_ctx *c, *d;
	int err = 0;

	c = bpf_crypto_ctx_create(&args->params, sizeof(args->params), &err);
	if (!c)
		return err;
	d = bpf_crypto_ctx_acquire(c);
	bpf_crypto_ctx_release(c);
	if (d)
		bpf_crypto_ctx_release(d);
	return 1;
}

/* params__sz of a size past the context's U16_MAX bytes */
SEC("syscall")
int sys_crypto_size(struct setup_args *args)
{
	struct bpf_crypto_ctx *c;
	int err = 0;

	c = bpf_crypto_ctx_create(&args->params, 0x10000, &err);
	if (c)
		bpf_crypto_ctx_release(c);
	return err;
}

/* err a NULL pointer */
SEC("syscall")
int sys_crypto_null_err(struct setup_args *args)
{
	struct bpf_crypto_ctx *c;

	c = bpf_crypto_ctx_create(&args->params, sizeof(args->params), (int *)0);
	if (c)
		bpf_crypto_ctx_release(c);
	return 0;
}

/* the context's params at an offset of the context pointer */
SEC("syscall")
int sys_crypto_offset(struct setup_args *args)
{
	struct bpf_crypto_ctx *c;
	int err = 0;

	c = bpf_crypto_ctx_create((void *)args + 4, sizeof(args->params), &err);
	if (c)
		bpf_crypto_ctx_release(c);
	return err;
}

LICENSE("GPL");

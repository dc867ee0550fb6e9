// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * local_kptr - the usual mistakes with program-allocated objects
 * (bpf_obj_new, bpf_obj_drop, bpf_kptr_xchg) and three programs Linux
 * accepts (one with a __kptr in an array of nested structs). Each program's Linux 6.18 verdict is recorded in
 * tests/test_verifier.py.
 *
 * Built with (from the repository's top directory):
 *   clang-16 -target bpf -O2 -g -Wall -Isamples/include -mcpu=v3 \
 *     -c tests/verifier_objects/local_kptr.c -o tests/verifier_objects/local_kptr.o
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"
#include "pyxdp_kfuncs.h"

struct obj {
	__u64 a;
	__u32 b;
};

struct other {
	__u64 x;
};

struct val {
	__u64 n;
	struct obj __kptr *o;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct val);
} vals SEC(".maps");

static __always_inline struct val *val0(void)
{
	__u32 k = 0;

	return bpf_map_lookup_elem(&vals, &k);
}

SEC("xdp")
int xdp_new_drop(struct xdp_md *ctx)
{
	struct obj *o = bpf_obj_new(struct obj);

	if (!o)
		return XDP_PASS;
	o->a = ctx->data_end - ctx->data;
	o->b = 1;
	bpf_obj_drop(o);
	return XDP_PASS;
}

SEC("xdp")
int xdp_leak(struct xdp_md *ctx)
{
	struct obj *o = bpf_obj_new(struct obj);

	if (!o)
		return XDP_PASS;
	o->a = 1;
	return XDP_PASS;
}

SEC("xdp")
int xdp_drop_twice(struct xdp_md *ctx)
{
	struct obj *o = bpf_obj_new(struct obj);

	if (!o)
		return XDP_PASS;
	bpf_obj_drop(o);
	barrier_var(o);
	bpf_obj_drop(o);
	return XDP_PASS;
}

SEC("xdp")
int xdp_use_after_drop(struct xdp_md *ctx)
{
	struct obj *o = bpf_obj_new(struct obj);

	if (!o)
		return XDP_PASS;
	bpf_obj_drop(o);
	barrier_var(o);
	return o->b;
}

SEC("xdp")
int xdp_drop_null(struct xdp_md *ctx)
{
	struct obj *o = bpf_obj_new(struct obj);

	bpf_obj_drop(o);
	return XDP_PASS;
}

SEC("xdp")
int xdp_out_of_bounds(struct xdp_md *ctx)
{
	struct obj *o = bpf_obj_new(struct obj);
	int r;

	if (!o)
		return XDP_PASS;
	r = *(volatile __u32 *)((char *)o + 16);
	bpf_obj_drop(o);
	return r;
}

SEC("xdp")
int xdp_xchg(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct obj *o, *cur;

	if (!v)
		return XDP_PASS;
	cur = v->o;
	if (cur)
		v->n += cur->a;
	o = bpf_obj_new(struct obj);
	if (!o)
		return XDP_PASS;
	o = bpf_kptr_xchg(&v->o, o);
	if (o)
		bpf_obj_drop(o);
	return XDP_PASS;
}

SEC("xdp")
int xdp_use_after_xchg(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct obj *o, *old;

	if (!v)
		return XDP_PASS;
	o = bpf_obj_new(struct obj);
	if (!o)
		return XDP_PASS;
	old = bpf_kptr_xchg(&v->o, o);
	if (old)
		bpf_obj_drop(old);
	barrier_var(o);
	return o->b;
}

SEC("xdp")
int xdp_xchg_wrong_type(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct other *o, *old;

	if (!v)
		return XDP_PASS;
	o = bpf_obj_new(struct other);
	if (!o)
		return XDP_PASS;
	old = bpf_kptr_xchg(&v->o, o);
	if (old)
		bpf_obj_drop(old);
	return XDP_PASS;
}

SEC("xdp")
int xdp_xchg_not_kptr(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct obj *o, *old;

	if (!v)
		return XDP_PASS;
	o = bpf_obj_new(struct obj);
	if (!o)
		return XDP_PASS;
	old = bpf_kptr_xchg(&v->n, o);
	if (old)
		bpf_obj_drop(old);
	return XDP_PASS;
}

SEC("xdp")
int xdp_store_kptr(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct obj *o;

	if (!v)
		return XDP_PASS;
	o = bpf_obj_new(struct obj);
	if (!o)
		return XDP_PASS;
	v->o = o;
	return XDP_PASS;
}

SEC("xdp")
int xdp_kptr_half(struct xdp_md *ctx)
{
	struct val *v = val0();

	if (!v)
		return XDP_PASS;
	return *(volatile __u32 *)((char *)v + 8);
}

SEC("xdp")
int xdp_rcu_not_owned(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct obj *cur;

	if (!v)
		return XDP_PASS;
	cur = v->o;
	if (cur)
		bpf_obj_drop(cur);
	return XDP_PASS;
}

/* __kptr fields in an array of nested structs: btf_parse_fields finds each */
struct inner {
	__u32 x;
	__u32 y;
	struct obj __kptr *o;
};

struct nest {
	__u64 n;
	struct inner in[2];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nest);
} nests SEC(".maps");

SEC("xdp")
int xdp_xchg_nested(struct xdp_md *ctx)
{
	__u32 k = 0;
	struct nest *v = bpf_map_lookup_elem(&nests, &k);
	struct obj *o, *old;

	if (!v)
		return XDP_PASS;
	o = bpf_obj_new(struct obj);
	if (!o)
		return XDP_PASS;
	old = bpf_kptr_xchg(&v->in[1].o, o);
	if (old)
		bpf_obj_drop(old);
	return XDP_PASS;
}

SEC("xdp")
int xdp_kptr_helper(struct xdp_md *ctx)
{
	struct val *v = val0();

	if (!v)
		return XDP_PASS;
	return bpf_csum_diff(0, 0, (__be32 *)v, 16, 0);
}

char _license[] SEC("license") = "GPL";

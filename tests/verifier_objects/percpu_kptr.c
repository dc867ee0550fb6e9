// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * percpu_kptr - per-CPU program-allocated objects (bpf_percpu_obj_new,
 * bpf_percpu_obj_drop) kept in a __percpu_kptr field of a map value and
 * reached through bpf_this_cpu_ptr and bpf_per_cpu_ptr, and the usual
 * mistakes with them. Each program's Linux 6.18 verdict is recorded in
 * tests/test_local_kptr.py.
 *
 * Built with (from the repository's top directory):
 *   clang-16 -target bpf -O2 -g -Wall -Isamples/include -mcpu=v3 \
 *     -c tests/verifier_objects/percpu_kptr.c -o tests/verifier_objects/percpu_kptr.o
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"
#include "pyxdp_kfuncs.h"

#define __percpu_kptr __attribute__((btf_type_tag("percpu_kptr")))

extern void *bpf_percpu_obj_new_impl(__u64 local_type_id__k, void *meta__ign) __ksym;
extern void bpf_percpu_obj_drop_impl(void *p__alloc, void *meta__ign) __ksym;
#define bpf_percpu_obj_new(type) ((type *)bpf_percpu_obj_new_impl(pyxdp_local_type_id(type), NULL))
#define bpf_percpu_obj_drop(p) bpf_percpu_obj_drop_impl(p, NULL)

static void *(* const bpf_per_cpu_ptr)(const void *percpu_ptr, __u32 cpu) = (void *) 153;
static void *(* const bpf_this_cpu_ptr)(const void *percpu_ptr) = (void *) 154;

struct cnt {
	__u64 packets;
	__u64 bytes;
};

struct ptrs {
	__u64 a;
	struct cnt *p;
};

struct big {
	__u64 a[65];
};

struct val {
	__u64 total;
	struct cnt __percpu_kptr *pc;
	struct cnt __kptr *o;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct val);
} vals SEC(".maps");

static __always_inline struct val *val_at(__u32 k)
{
	return bpf_map_lookup_elem(&vals, &k);
}

/* Count packets per CPU in slot 0's object, made on the first packet. Linux does
 * not zero a per-CPU object its allocator recycles: every copy is zeroed here. */
SEC("xdp")
int xdp_pcpu_count(struct xdp_md *ctx)
{
	struct val *v = val_at(0);
	struct cnt *p, *old, *c;
	__u32 i;

	if (!v)
		return XDP_ABORTED;
	p = v->pc;
	if (!p) {
		p = bpf_percpu_obj_new(struct cnt);
		if (!p)
			return XDP_ABORTED;
		old = bpf_kptr_xchg(&v->pc, p);
		if (old)
			bpf_percpu_obj_drop(old);
		p = v->pc;
		if (!p)
			return XDP_ABORTED;
		for (i = 0; i < 8; i++) {
			c = bpf_per_cpu_ptr(p, i);
			if (!c)
				break;
			c->packets = 0;
			c->bytes = 0;
		}
		return XDP_PASS;
	}
	c = bpf_this_cpu_ptr(p);
	c->packets++;
	c->bytes += ctx->data_end - ctx->data;
	return XDP_PASS;
}

/* Sum every CPU's count into total; the verdict is the first byte's CPU's packets. */
SEC("xdp")
int xdp_pcpu_sum(struct xdp_md *ctx)
{
	struct val *v = val_at(0);
	struct cnt *p, *c;
	__u64 sum = 0;
	__u32 i;

	if (!v)
		return XDP_ABORTED;
	p = v->pc;
	if (!p)
		return XDP_DROP;
	for (i = 0; i < 8; i++) {
		c = bpf_per_cpu_ptr(p, i);
		if (!c)
			break;
		sum += c->packets;
	}
	v->total = sum;
	return XDP_PASS;
}

/* Slot 0's object taken out of the map and dropped. */
SEC("xdp")
int xdp_pcpu_take(struct xdp_md *ctx)
{
	struct val *v = val_at(0);
	struct cnt *old;

	if (!v)
		return XDP_ABORTED;
	old = bpf_kptr_xchg(&v->pc, NULL);
	if (!old)
		return XDP_DROP;
	bpf_percpu_obj_drop(old);
	return XDP_PASS;
}

SEC("xdp")
int xdp_pcpu_deref(struct xdp_md *ctx)
{
	struct cnt *p = bpf_percpu_obj_new(struct cnt);

	if (!p)
		return XDP_PASS;
	p->packets = 1;
	bpf_percpu_obj_drop(p);
	return XDP_PASS;
}

SEC("xdp")
int xdp_pcpu_this_new(struct xdp_md *ctx)
{
	struct cnt *p = bpf_percpu_obj_new(struct cnt), *c;

	if (!p)
		return XDP_PASS;
	c = bpf_this_cpu_ptr(p);
	c->packets = 1;
	bpf_percpu_obj_drop(p);
	return XDP_PASS;
}

SEC("xdp")
int xdp_pcpu_not_scalars(struct xdp_md *ctx)
{
	struct ptrs *p = bpf_percpu_obj_new(struct ptrs);

	if (p)
		bpf_percpu_obj_drop(p);
	return XDP_PASS;
}

SEC("xdp")
int xdp_pcpu_too_big(struct xdp_md *ctx)
{
	struct big *p = bpf_percpu_obj_new(struct big);

	if (p)
		bpf_percpu_obj_drop(p);
	return XDP_PASS;
}

SEC("xdp")
int xdp_pcpu_plain_drop(struct xdp_md *ctx)
{
	struct cnt *p = bpf_percpu_obj_new(struct cnt);

	if (p)
		bpf_obj_drop(p);
	return XDP_PASS;
}

SEC("xdp")
int xdp_obj_percpu_drop(struct xdp_md *ctx)
{
	struct cnt *p = bpf_obj_new(struct cnt);

	if (p)
		bpf_percpu_obj_drop(p);
	return XDP_PASS;
}

SEC("xdp")
int xdp_pcpu_leak(struct xdp_md *ctx)
{
	struct cnt *p = bpf_percpu_obj_new(struct cnt);

	return p ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int xdp_pcpu_into_kptr(struct xdp_md *ctx)
{
	struct val *v = val_at(0);
	struct cnt *p, *old;

	if (!v)
		return XDP_PASS;
	p = bpf_percpu_obj_new(struct cnt);
	if (!p)
		return XDP_PASS;
	old = bpf_kptr_xchg(&v->o, p);
	if (old)
		bpf_obj_drop(old);
	return XDP_PASS;
}

SEC("xdp")
int xdp_obj_into_pcpu(struct xdp_md *ctx)
{
	struct val *v = val_at(0);
	struct cnt *p, *old;

	if (!v)
		return XDP_PASS;
	p = bpf_obj_new(struct cnt);
	if (!p)
		return XDP_PASS;
	old = bpf_kptr_xchg(&v->pc, p);
	if (old)
		bpf_percpu_obj_drop(old);
	return XDP_PASS;
}

SEC("xdp")
int xdp_pcpu_kptr_deref(struct xdp_md *ctx)
{
	struct val *v = val_at(0);
	struct cnt *p;

	if (!v)
		return XDP_PASS;
	p = v->pc;
	if (!p)
		return XDP_PASS;
	return p->packets ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int xdp_pcpu_store(struct xdp_md *ctx)
{
	struct val *v = val_at(0);

	if (!v)
		return XDP_PASS;
	v->pc = 0;
	return XDP_PASS;
}

SEC("xdp")
int xdp_pcpu_no_null_check(struct xdp_md *ctx)
{
	struct val *v = val_at(0);
	struct cnt *c;

	if (!v)
		return XDP_PASS;
	c = bpf_per_cpu_ptr(v->pc, 0);
	if (!c)
		return XDP_PASS;
	return c->packets ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int xdp_pcpu_unchecked_cpu(struct xdp_md *ctx)
{
	struct val *v = val_at(0);
	struct cnt *p, *c;

	if (!v)
		return XDP_PASS;
	p = v->pc;
	if (!p)
		return XDP_PASS;
	/* Linux 6.18 takes the copy as never NULL: the CPU must exist (here CPU 1) */
	c = bpf_per_cpu_ptr(p, 1);
	return c->packets ? XDP_DROP : XDP_PASS;
}

/* An object given to the map stays readable through the pointer given: inside the
 * RCU read section an XDP program runs in, it is an RCU pointer, no longer referenced. */
SEC("xdp")
int xdp_pcpu_given_read(struct xdp_md *ctx)
{
	struct val *v = val_at(1);
	struct cnt *p, *old, *c;

	if (!v)
		return XDP_ABORTED;
	p = bpf_percpu_obj_new(struct cnt);
	if (!p)
		return XDP_ABORTED;
	old = bpf_kptr_xchg(&v->pc, p);
	if (old)
		bpf_percpu_obj_drop(old);
	c = bpf_this_cpu_ptr(p);
	return c->packets ? XDP_DROP : XDP_PASS;
}

/* ... but not dropped: the map holds the reference. */
SEC("xdp")
int xdp_pcpu_given_drop(struct xdp_md *ctx)
{
	struct val *v = val_at(1);
	struct cnt *p, *old;

	if (!v)
		return XDP_ABORTED;
	p = bpf_percpu_obj_new(struct cnt);
	if (!p)
		return XDP_ABORTED;
	old = bpf_kptr_xchg(&v->pc, p);
	if (old)
		bpf_percpu_obj_drop(old);
	bpf_percpu_obj_drop(p);
	return XDP_PASS;
}

LICENSE("GPL");

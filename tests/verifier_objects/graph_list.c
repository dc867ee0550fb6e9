// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * graph_list - the usual mistakes with BPF linked lists (bpf_list_head in a
 * map value with its bpf_spin_lock, objects of bpf_obj_new on it) and with
 * refcounted objects (bpf_refcount, bpf_refcount_acquire), and programs
 * Linux accepts. Each program's Linux 6.18 verdict is recorded in
 * tests/test_verifier.py.
 *
 * Built with (from the repository's top directory):
 *   clang-16 -target bpf -O2 -g -Wall -Isamples/include -mcpu=v3 \
 *     -c tests/verifier_objects/graph_list.c -o tests/verifier_objects/graph_list.o
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"
#include "pyxdp_kfuncs.h"

static long (* const bpf_spin_lock)(struct bpf_spin_lock *lock) = (void *) 93;
static long (* const bpf_spin_unlock)(struct bpf_spin_lock *lock) = (void *) 94;

struct elem {
	__u64 v;
	struct bpf_list_node node;
};

struct other {
	__u32 x;
	__u32 y;
	__u64 z;
	struct bpf_list_node node;
};

struct val {
	__u64 n;
	struct bpf_spin_lock lock;
	struct bpf_list_head head __contains(elem, node);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct val);
} vals SEC(".maps");

static __always_inline struct val *val0(void)
{
	__u32 k = 0;

	return bpf_map_lookup_elem(&vals, &k);
}

SEC("xdp")
int xdp_list_ok(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct bpf_list_node *n;
	struct elem *e;

	if (!v)
		return XDP_PASS;
	e = bpf_obj_new(struct elem);
	if (!e)
		return XDP_PASS;
	e->v = 7;
	bpf_spin_lock(&v->lock);
	bpf_list_push_back(&v->head, &e->node);
	n = bpf_list_front(&v->head);
	if (n)
		container_of(n, struct elem, node)->v++;
	n = bpf_list_pop_front(&v->head);
	bpf_spin_unlock(&v->lock);
	if (n)
		bpf_obj_drop(container_of(n, struct elem, node));
	return XDP_PASS;
}

SEC("xdp")
int xdp_push_unlocked(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct elem *e;

	if (!v)
		return XDP_PASS;
	e = bpf_obj_new(struct elem);
	if (!e)
		return XDP_PASS;
	bpf_list_push_front(&v->head, &e->node);
	return XDP_PASS;
}

SEC("xdp")
int xdp_pop_unlocked(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct bpf_list_node *n;

	if (!v)
		return XDP_PASS;
	n = bpf_list_pop_front(&v->head);
	if (n)
		bpf_obj_drop(container_of(n, struct elem, node));
	return XDP_PASS;
}

SEC("xdp")
int xdp_wrong_node(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct other *o;

	if (!v)
		return XDP_PASS;
	o = bpf_obj_new(struct other);
	if (!o)
		return XDP_PASS;
	bpf_spin_lock(&v->lock);
	bpf_list_push_front(&v->head, &o->node);
	bpf_spin_unlock(&v->lock);
	return XDP_PASS;
}

SEC("xdp")
int xdp_use_after_unlock(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct elem *e;

	if (!v)
		return XDP_PASS;
	e = bpf_obj_new(struct elem);
	if (!e)
		return XDP_PASS;
	bpf_spin_lock(&v->lock);
	bpf_list_push_front(&v->head, &e->node);
	bpf_spin_unlock(&v->lock);
	e->v = 1;
	return XDP_PASS;
}

SEC("xdp")
int xdp_pop_leak(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct bpf_list_node *n;

	if (!v)
		return XDP_PASS;
	bpf_spin_lock(&v->lock);
	n = bpf_list_pop_back(&v->head);
	bpf_spin_unlock(&v->lock);
	return n ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int xdp_push_twice(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct elem *e;

	if (!v)
		return XDP_PASS;
	e = bpf_obj_new(struct elem);
	if (!e)
		return XDP_PASS;
	bpf_spin_lock(&v->lock);
	bpf_list_push_front(&v->head, &e->node);
	bpf_list_push_back(&v->head, &e->node);
	bpf_spin_unlock(&v->lock);
	return XDP_PASS;
}

SEC("xdp")
int xdp_push_null(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct elem *e;

	if (!v)
		return XDP_PASS;
	e = bpf_obj_new(struct elem);
	bpf_spin_lock(&v->lock);
	bpf_list_push_front(&v->head, &e->node);
	bpf_spin_unlock(&v->lock);
	return XDP_PASS;
}

SEC("xdp")
int xdp_head_access(struct xdp_md *ctx)
{
	struct val *v = val0();

	if (!v)
		return XDP_PASS;
	return *(__u64 *)&v->head ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int xdp_node_access(struct xdp_md *ctx)
{
	struct elem *e = bpf_obj_new(struct elem);
	__u64 x;

	if (!e)
		return XDP_PASS;
	x = *(volatile __u64 *)&e->node;
	bpf_obj_drop(e);
	return x ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int xdp_drop_in_lock(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct bpf_list_node *n;

	if (!v)
		return XDP_PASS;
	bpf_spin_lock(&v->lock);
	n = bpf_list_pop_front(&v->head);
	if (n)
		bpf_obj_drop(container_of(n, struct elem, node));
	bpf_spin_unlock(&v->lock);
	return XDP_PASS;
}

SEC("xdp")
int xdp_peek_after_unlock(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct bpf_list_node *n;

	if (!v)
		return XDP_PASS;
	bpf_spin_lock(&v->lock);
	n = bpf_list_back(&v->head);
	bpf_spin_unlock(&v->lock);
	if (!n)
		return XDP_PASS;
	return container_of(n, struct elem, node)->v ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int xdp_drop_peeked(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct bpf_list_node *n;

	if (!v)
		return XDP_PASS;
	bpf_spin_lock(&v->lock);
	n = bpf_list_front(&v->head);
	bpf_spin_unlock(&v->lock);
	if (n)
		bpf_obj_drop(container_of(n, struct elem, node));
	return XDP_PASS;
}

SEC("xdp")
int xdp_other_value_lock(struct xdp_md *ctx)
{
	__u32 k0 = 0, k1 = 1;
	struct val *a = bpf_map_lookup_elem(&vals, &k0);
	struct val *b = bpf_map_lookup_elem(&vals, &k1);
	struct bpf_list_node *n;

	if (!a || !b)
		return XDP_PASS;
	bpf_spin_lock(&a->lock);
	n = bpf_list_pop_front(&b->head);
	bpf_spin_unlock(&a->lock);
	if (n)
		bpf_obj_drop(container_of(n, struct elem, node));
	return XDP_PASS;
}

struct counted {
	__u64 v;
	struct bpf_refcount ref;
	struct bpf_list_node node;
};

struct cval {
	struct bpf_spin_lock lock;
	struct bpf_list_head head __contains(counted, node);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cval);
} cvals SEC(".maps");

SEC("xdp")
int xdp_acquire_plain(struct xdp_md *ctx)
{
	struct elem *e = bpf_obj_new(struct elem), *e2;

	if (!e)
		return XDP_PASS;
	e2 = bpf_refcount_acquire(e);
	if (e2)
		bpf_obj_drop(e2);
	bpf_obj_drop(e);
	return XDP_PASS;
}

SEC("xdp")
int xdp_acquire_owned(struct xdp_md *ctx)
{
	struct counted *c = bpf_obj_new(struct counted), *c2;

	if (!c)
		return XDP_PASS;
	c2 = bpf_refcount_acquire(c);	/* never NULL for an owned object */
	c2->v = 1;
	bpf_obj_drop(c2);
	bpf_obj_drop(c);
	return XDP_PASS;
}

SEC("xdp")
int xdp_acquire_peeked_unchecked(struct xdp_md *ctx)
{
	__u32 k = 0;
	struct cval *v = bpf_map_lookup_elem(&cvals, &k);
	struct bpf_list_node *n;
	struct counted *c;

	if (!v)
		return XDP_PASS;
	bpf_spin_lock(&v->lock);
	n = bpf_list_front(&v->head);
	if (!n) {
		bpf_spin_unlock(&v->lock);
		return XDP_PASS;
	}
	c = bpf_refcount_acquire(container_of(n, struct counted, node));
	bpf_spin_unlock(&v->lock);
	c->v = 2;	/* may be NULL: the list's object may be going */
	bpf_obj_drop(c);
	return XDP_PASS;
}

SEC("xdp")
int xdp_acquire_node(struct xdp_md *ctx)
{
	__u32 k = 0;
	struct cval *v = bpf_map_lookup_elem(&cvals, &k);
	struct bpf_list_node *n;
	struct counted *c = NULL;

	if (!v)
		return XDP_PASS;
	bpf_spin_lock(&v->lock);
	n = bpf_list_front(&v->head);
	if (n)
		c = bpf_refcount_acquire(n);	/* the node, not its object */
	bpf_spin_unlock(&v->lock);
	if (c)
		bpf_obj_drop(c);
	return XDP_PASS;
}

SEC("xdp")
int xdp_refcount_access(struct xdp_md *ctx)
{
	struct counted *c = bpf_obj_new(struct counted);
	__u32 x;

	if (!c)
		return XDP_PASS;
	x = *(volatile __u32 *)&c->ref;
	bpf_obj_drop(c);
	return x ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int xdp_acquire_leak(struct xdp_md *ctx)
{
	struct counted *c = bpf_obj_new(struct counted);

	if (!c)
		return XDP_PASS;
	bpf_refcount_acquire(c);
	bpf_obj_drop(c);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";

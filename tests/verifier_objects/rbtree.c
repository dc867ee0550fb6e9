// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * rbtree - the usual mistakes with BPF red-black trees (bpf_rb_root in a map
 * value with its bpf_spin_lock, objects of bpf_obj_new in it, the less
 * callback of bpf_rbtree_add), and programs Linux accepts. Each program's
 * Linux 6.18 verdict is recorded in tests/test_verifier.py.
 *
 * Built with (from the repository's top directory):
 *   clang-16 -target bpf -O2 -g -Wall -Isamples/include -mcpu=v3 \
 *     -c tests/verifier_objects/rbtree.c -o tests/verifier_objects/rbtree.o
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"
#include "pyxdp_kfuncs.h"

static long (* const bpf_spin_lock)(struct bpf_spin_lock *lock) = (void *) 93;
static long (* const bpf_spin_unlock)(struct bpf_spin_lock *lock) = (void *) 94;

struct tnode {
	__u64 key;
	struct bpf_rb_node rb;
};

struct other {
	__u32 x;
	__u32 y;
	__u64 z;
	struct bpf_rb_node rb;
};

struct rnode {
	__u64 key;
	struct bpf_rb_node rb;
	struct bpf_refcount ref;
	struct bpf_list_node l;
};

struct val {
	struct bpf_spin_lock lock;
	struct bpf_rb_root root __contains(tnode, rb);
	__u64 n;
};

struct rval {
	struct bpf_spin_lock lock;
	struct bpf_rb_root root __contains(rnode, rb);
	struct bpf_list_head head __contains(rnode, l);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct val);
} vals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rval);
} rvals SEC(".maps");

static __always_inline struct val *val0(void)
{
	__u32 k = 0;

	return bpf_map_lookup_elem(&vals, &k);
}

static _Bool less(struct bpf_rb_node *a, const struct bpf_rb_node *b)
{
	return container_of(a, struct tnode, rb)->key < container_of(b, struct tnode, rb)->key;
}

SEC("xdp")
int xdp_rb_ok(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct bpf_rb_node *n;
	struct tnode *t;

	if (!v)
		return XDP_PASS;
	t = bpf_obj_new(struct tnode);
	if (!t)
		return XDP_PASS;
	t->key = 7;
	bpf_spin_lock(&v->lock);
	bpf_rbtree_add(&v->root, &t->rb, less);
	t->key++;	/* a non-owning reference until the unlock */
	n = bpf_rbtree_first(&v->root);
	if (n)
		n = bpf_rbtree_remove(&v->root, n);
	bpf_spin_unlock(&v->lock);
	if (n)
		bpf_obj_drop(container_of(n, struct tnode, rb));
	return XDP_PASS;
}

SEC("xdp")
int xdp_rb_walk(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct bpf_rb_node *n;
	int i;

	if (!v)
		return XDP_PASS;
	bpf_spin_lock(&v->lock);
	n = bpf_rbtree_root(&v->root);
	for (i = 0; i < 4 && n; i++) {
		v->n += container_of(n, struct tnode, rb)->key;
		n = i & 1 ? bpf_rbtree_right(&v->root, n) : bpf_rbtree_left(&v->root, n);
	}
	bpf_spin_unlock(&v->lock);
	return XDP_PASS;
}

SEC("xdp")
int xdp_remove_owned(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct bpf_rb_node *n;
	struct tnode *t;

	if (!v)
		return XDP_PASS;
	t = bpf_obj_new(struct tnode);
	if (!t)
		return XDP_PASS;
	bpf_spin_lock(&v->lock);
	n = bpf_rbtree_remove(&v->root, &t->rb);	/* in no tree: NULL */
	bpf_spin_unlock(&v->lock);
	bpf_obj_drop(t);
	if (n)
		bpf_obj_drop(container_of(n, struct tnode, rb));
	return XDP_PASS;
}

SEC("xdp")
int xdp_add_unlocked(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct tnode *t;

	if (!v)
		return XDP_PASS;
	t = bpf_obj_new(struct tnode);
	if (!t)
		return XDP_PASS;
	bpf_rbtree_add(&v->root, &t->rb, less);
	return XDP_PASS;
}

SEC("xdp")
int xdp_first_unlocked(struct xdp_md *ctx)
{
	struct val *v = val0();

	if (!v)
		return XDP_PASS;
	return bpf_rbtree_first(&v->root) ? XDP_DROP : XDP_PASS;
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
	bpf_rbtree_add(&v->root, &o->rb, less);
	bpf_spin_unlock(&v->lock);
	return XDP_PASS;
}

SEC("xdp")
int xdp_add_twice(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct tnode *t;

	if (!v)
		return XDP_PASS;
	t = bpf_obj_new(struct tnode);
	if (!t)
		return XDP_PASS;
	bpf_spin_lock(&v->lock);
	bpf_rbtree_add(&v->root, &t->rb, less);
	bpf_rbtree_add(&v->root, &t->rb, less);
	bpf_spin_unlock(&v->lock);
	return XDP_PASS;
}

SEC("xdp")
int xdp_use_after_unlock(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct tnode *t;

	if (!v)
		return XDP_PASS;
	t = bpf_obj_new(struct tnode);
	if (!t)
		return XDP_PASS;
	bpf_spin_lock(&v->lock);
	bpf_rbtree_add(&v->root, &t->rb, less);
	bpf_spin_unlock(&v->lock);
	return t->key ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int xdp_remove_after_unlock(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct bpf_rb_node *n;
	struct tnode *t;

	if (!v)
		return XDP_PASS;
	t = bpf_obj_new(struct tnode);
	if (!t)
		return XDP_PASS;
	bpf_spin_lock(&v->lock);
	bpf_rbtree_add(&v->root, &t->rb, less);
	bpf_spin_unlock(&v->lock);
	bpf_spin_lock(&v->lock);
	n = bpf_rbtree_remove(&v->root, &t->rb);
	bpf_spin_unlock(&v->lock);
	if (n)
		bpf_obj_drop(container_of(n, struct tnode, rb));
	return XDP_PASS;
}

SEC("xdp")
int xdp_remove_leak(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct bpf_rb_node *n;

	if (!v)
		return XDP_PASS;
	bpf_spin_lock(&v->lock);
	n = bpf_rbtree_first(&v->root);
	if (n)
		n = bpf_rbtree_remove(&v->root, n);
	bpf_spin_unlock(&v->lock);
	return n ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int xdp_add_removed_unchecked(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct bpf_rb_node *n;

	if (!v)
		return XDP_PASS;
	bpf_spin_lock(&v->lock);
	n = bpf_rbtree_first(&v->root);
	if (!n) {
		bpf_spin_unlock(&v->lock);
		return XDP_PASS;
	}
	n = bpf_rbtree_remove(&v->root, n);
	bpf_rbtree_add(&v->root, n, less);
	bpf_spin_unlock(&v->lock);
	return XDP_PASS;
}

#define private(name) SEC(".bss." #name) __attribute__((aligned(8)))

private(R) struct bpf_spin_lock glock;
private(R) struct bpf_rb_root groot __contains(tnode, rb);

static _Bool less_removes(struct bpf_rb_node *a, const struct bpf_rb_node *b)
{
	bpf_rbtree_remove(&groot, a);
	return 0;
}

SEC("xdp")
int xdp_remove_in_less(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct tnode *t;

	if (!v)
		return XDP_PASS;
	t = bpf_obj_new(struct tnode);
	if (!t)
		return XDP_PASS;
	bpf_spin_lock(&glock);
	bpf_rbtree_add(&groot, &t->rb, less_removes);
	bpf_spin_unlock(&glock);
	return XDP_PASS;
}

static _Bool less_left(struct bpf_rb_node *a, const struct bpf_rb_node *b)
{
	return bpf_rbtree_left(&groot, a) != NULL;
}

static _Bool less_first(struct bpf_rb_node *a, const struct bpf_rb_node *b)
{
	return bpf_rbtree_first(&groot) == b;
}

SEC("xdp")
int xdp_first_in_less(struct xdp_md *ctx)
{
	struct tnode *t = bpf_obj_new(struct tnode);

	if (!t)
		return XDP_PASS;
	bpf_spin_lock(&glock);
	bpf_rbtree_add(&groot, &t->rb, less_first);
	bpf_spin_unlock(&glock);
	return XDP_PASS;
}

static long less_two(struct bpf_rb_node *a, const struct bpf_rb_node *b)
{
	return 2;
}

SEC("xdp")
int xdp_less_returns_two(struct xdp_md *ctx)
{
	struct tnode *t = bpf_obj_new(struct tnode);

	if (!t)
		return XDP_PASS;
	bpf_spin_lock(&glock);
	bpf_rbtree_add(&groot, &t->rb, (void *)less_two);
	bpf_spin_unlock(&glock);
	return XDP_PASS;
}

SEC("xdp")
int xdp_left_in_less(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct tnode *t;

	if (!v)
		return XDP_PASS;
	t = bpf_obj_new(struct tnode);
	if (!t)
		return XDP_PASS;
	bpf_spin_lock(&glock);
	bpf_rbtree_add(&groot, &t->rb, less_left);
	bpf_spin_unlock(&glock);
	return XDP_PASS;
}

static _Bool less_clock(struct bpf_rb_node *a, const struct bpf_rb_node *b)
{
	return bpf_ktime_get_ns() & 1;
}

SEC("xdp")
int xdp_helper_in_less(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct tnode *t;

	if (!v)
		return XDP_PASS;
	t = bpf_obj_new(struct tnode);
	if (!t)
		return XDP_PASS;
	bpf_spin_lock(&v->lock);
	bpf_rbtree_add(&v->root, &t->rb, less_clock);
	bpf_spin_unlock(&v->lock);
	return XDP_PASS;
}

static _Bool less_writes(struct bpf_rb_node *a, const struct bpf_rb_node *b)
{
	container_of(a, struct tnode, rb)->key = 1;
	return container_of(b, struct tnode, rb)->key > 3;
}

SEC("xdp")
int xdp_less_writes(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct tnode *t;

	if (!v)
		return XDP_PASS;
	t = bpf_obj_new(struct tnode);
	if (!t)
		return XDP_PASS;
	bpf_spin_lock(&v->lock);
	bpf_rbtree_add(&v->root, &t->rb, less_writes);
	bpf_spin_unlock(&v->lock);
	return XDP_PASS;
}

static _Bool less_unlocks(struct bpf_rb_node *a, const struct bpf_rb_node *b)
{
	bpf_spin_unlock(&glock);
	return 0;
}

SEC("xdp")
int xdp_unlock_in_less(struct xdp_md *ctx)
{
	struct tnode *t = bpf_obj_new(struct tnode);

	if (!t)
		return XDP_PASS;
	bpf_spin_lock(&glock);
	bpf_rbtree_add(&groot, &t->rb, less_unlocks);
	bpf_spin_unlock(&glock);
	return XDP_PASS;
}

SEC("xdp")
int xdp_add_in_loop(struct xdp_md *ctx)
{
	__u8 *p = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct val *v = val0();
	struct tnode *t;
	int i, n;

	if (!v || p + 1 > end)
		return XDP_PASS;
	n = p[0];
	for (i = 0; i < n && i < 4; i++) {
		t = bpf_obj_new(struct tnode);
		if (!t)
			break;
		t->key = i * n;
		bpf_spin_lock(&v->lock);
		bpf_rbtree_add(&v->root, &t->rb, less_writes);
		bpf_spin_unlock(&v->lock);
	}
	return XDP_PASS;
}

__attribute__((noinline)) _Bool less_global(struct bpf_rb_node *a, const struct bpf_rb_node *b)
{
	return a < b;
}

SEC("xdp")
int xdp_global_less(struct xdp_md *ctx)
{
	struct tnode *t = bpf_obj_new(struct tnode);

	if (!t)
		return XDP_PASS;
	bpf_spin_lock(&glock);
	bpf_rbtree_add(&groot, &t->rb, less_global);
	bpf_spin_unlock(&glock);
	return XDP_PASS;
}

SEC("xdp")
int xdp_add_then_remove(struct xdp_md *ctx)
{
	struct bpf_rb_node *n;
	struct tnode *t = bpf_obj_new(struct tnode);

	if (!t)
		return XDP_PASS;
	bpf_spin_lock(&glock);
	bpf_rbtree_add(&groot, &t->rb, less);
	n = bpf_rbtree_remove(&groot, &t->rb);
	bpf_spin_unlock(&glock);
	if (n)
		bpf_obj_drop(container_of(n, struct tnode, rb));
	return XDP_PASS;
}

SEC("xdp")
int xdp_left_other_struct(struct xdp_md *ctx)
{
	struct bpf_rb_node *n = NULL;
	struct rnode *e = bpf_obj_new(struct rnode);

	if (!e)
		return XDP_PASS;
	bpf_spin_lock(&glock);
	n = bpf_rbtree_left(&groot, &e->rb);
	bpf_spin_unlock(&glock);
	bpf_obj_drop(e);
	return n ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int xdp_root_access(struct xdp_md *ctx)
{
	struct val *v = val0();

	if (!v)
		return XDP_PASS;
	return *(__u64 *)&v->root ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int xdp_node_access(struct xdp_md *ctx)
{
	struct tnode *t = bpf_obj_new(struct tnode);
	__u64 x;

	if (!t)
		return XDP_PASS;
	x = *(__u64 *)&t->rb;
	bpf_obj_drop(t);
	return x ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int xdp_drop_first(struct xdp_md *ctx)
{
	struct val *v = val0();
	struct bpf_rb_node *n;

	if (!v)
		return XDP_PASS;
	bpf_spin_lock(&v->lock);
	n = bpf_rbtree_first(&v->root);
	bpf_spin_unlock(&v->lock);
	if (n)
		bpf_obj_drop(container_of(n, struct tnode, rb));
	return XDP_PASS;
}

static _Bool rless(struct bpf_rb_node *a, const struct bpf_rb_node *b)
{
	return container_of(a, struct rnode, rb)->key < container_of(b, struct rnode, rb)->key;
}

SEC("xdp")
int xdp_tree_and_list(struct xdp_md *ctx)
{
	struct bpf_list_node *l;
	struct bpf_rb_node *n;
	struct rnode *e, *e2;
	struct rval *v;
	__u32 k = 0;

	v = bpf_map_lookup_elem(&rvals, &k);
	if (!v)
		return XDP_PASS;
	e = bpf_obj_new(struct rnode);
	if (!e)
		return XDP_PASS;
	e2 = bpf_refcount_acquire(e);
	bpf_spin_lock(&v->lock);
	bpf_rbtree_add(&v->root, &e->rb, rless);
	bpf_list_push_back(&v->head, &e2->l);
	l = bpf_list_pop_front(&v->head);
	n = NULL;
	if (l)
		n = bpf_rbtree_remove(&v->root, &container_of(l, struct rnode, l)->rb);
	bpf_spin_unlock(&v->lock);
	if (l)
		bpf_obj_drop(container_of(l, struct rnode, l));
	if (n)
		bpf_obj_drop(container_of(n, struct rnode, rb));
	return XDP_PASS;
}

SEC("xdp")
int xdp_add_refcounted_twice(struct xdp_md *ctx)
{
	struct bpf_rb_node *n;
	struct rnode *e = NULL;
	struct rval *v;
	__u32 k = 0;
	int r = 0;

	v = bpf_map_lookup_elem(&rvals, &k);
	if (!v)
		return XDP_PASS;
	bpf_spin_lock(&v->lock);
	n = bpf_rbtree_first(&v->root);
	if (n)
		e = bpf_refcount_acquire(container_of(n, struct rnode, rb));
	bpf_spin_unlock(&v->lock);
	if (!e)
		return XDP_PASS;
	bpf_spin_lock(&v->lock);
	r = bpf_rbtree_add(&v->root, &e->rb, rless);
	bpf_spin_unlock(&v->lock);
	return r ? XDP_DROP : XDP_PASS;
}

char _license[] SEC("license") = "GPL";

// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * graph_obj - BPF linked lists and red-black trees whose bpf_list_head or
 * bpf_rb_root sits in an object of bpf_obj_new (beside the object's own
 * bpf_spin_lock), used right and wrong. Each program's Linux 6.18 verdict is
 * recorded in tests/test_verifier.py.
 *
 * Built with (from the repository's top directory):
 *   clang-16 -target bpf -O2 -g -Wall -Isamples/include -mcpu=v3 \
 *     -c tests/verifier_objects/graph_obj.c -o tests/verifier_objects/graph_obj.o
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"
#include "pyxdp_kfuncs.h"

static long (* const bpf_spin_lock)(struct bpf_spin_lock *lock) = (void *) 93;
static long (* const bpf_spin_unlock)(struct bpf_spin_lock *lock) = (void *) 94;

struct item {
	__u64 v;
	struct bpf_list_node node;
};

struct titem {
	__u64 k;
	struct bpf_rb_node rb;
};

/* a root only: a list and a tree under the object's lock */
struct bag {
	__u64 n;
	struct bpf_spin_lock lock;
	struct bpf_list_head items __contains(item, node);
	struct bpf_rb_root tree __contains(titem, rb);
};

/* a root and a node: on a map value's list, holding items */
struct nbag {
	struct bpf_list_node node;
	struct bpf_spin_lock lock;
	struct bpf_list_head items __contains(item, node);
	__u64 n;
};

struct holder {
	struct bpf_spin_lock lock;
	struct bpf_list_head bags __contains(nbag, node);
	struct bag __kptr *stash;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct holder);
} holders SEC(".maps");

static __always_inline struct holder *holder0(void)
{
	__u32 k = 0;

	return bpf_map_lookup_elem(&holders, &k);
}

static _Bool tless(struct bpf_rb_node *a, const struct bpf_rb_node *b)
{
	return container_of(a, struct titem, rb)->k < container_of(b, struct titem, rb)->k;
}

SEC("xdp")
int xdp_obj_list_ok(struct xdp_md *ctx)
{
	struct bpf_list_node *n;
	struct item *it;
	struct bag *b;

	b = bpf_obj_new(struct bag);
	if (!b)
		return XDP_PASS;
	it = bpf_obj_new(struct item);
	if (!it) {
		bpf_obj_drop(b);
		return XDP_PASS;
	}
	it->v = 5;
	bpf_spin_lock(&b->lock);
	bpf_list_push_back(&b->items, &it->node);
	n = bpf_list_front(&b->items);
	if (n)
		container_of(n, struct item, node)->v++;
	n = bpf_list_pop_front(&b->items);
	bpf_spin_unlock(&b->lock);
	if (n)
		bpf_obj_drop(container_of(n, struct item, node));
	bpf_obj_drop(b);
	return XDP_PASS;
}

SEC("xdp")
int xdp_obj_drop_full(struct xdp_md *ctx)
{
	struct item *it;
	struct titem *t;
	struct bag *b;

	b = bpf_obj_new(struct bag);
	if (!b)
		return XDP_PASS;
	it = bpf_obj_new(struct item);
	t = bpf_obj_new(struct titem);
	bpf_spin_lock(&b->lock);
	if (it)
		bpf_list_push_front(&b->items, &it->node);
	if (t)
		bpf_rbtree_add(&b->tree, &t->rb, tless);
	bpf_spin_unlock(&b->lock);
	bpf_obj_drop(b);
	return XDP_PASS;
}

SEC("xdp")
int xdp_obj_tree_ok(struct xdp_md *ctx)
{
	struct bpf_rb_node *r;
	struct titem *t;
	struct bag *b;

	b = bpf_obj_new(struct bag);
	if (!b)
		return XDP_PASS;
	t = bpf_obj_new(struct titem);
	if (!t) {
		bpf_obj_drop(b);
		return XDP_PASS;
	}
	t->k = 3;
	bpf_spin_lock(&b->lock);
	bpf_rbtree_add(&b->tree, &t->rb, tless);
	r = bpf_rbtree_first(&b->tree);
	if (r)
		r = bpf_rbtree_remove(&b->tree, r);
	bpf_spin_unlock(&b->lock);
	if (r)
		bpf_obj_drop(container_of(r, struct titem, rb));
	bpf_obj_drop(b);
	return XDP_PASS;
}

SEC("xdp")
int xdp_obj_nested_ok(struct xdp_md *ctx)
{
	struct holder *h = holder0();
	struct bpf_list_node *n;
	struct item *it;
	struct nbag *b;

	if (!h)
		return XDP_PASS;
	b = bpf_obj_new(struct nbag);
	if (!b)
		return XDP_PASS;
	it = bpf_obj_new(struct item);
	if (it) {
		bpf_spin_lock(&b->lock);
		bpf_list_push_back(&b->items, &it->node);
		bpf_spin_unlock(&b->lock);
	}
	bpf_spin_lock(&h->lock);
	bpf_list_push_back(&h->bags, &b->node);
	n = bpf_list_pop_front(&h->bags);
	bpf_spin_unlock(&h->lock);
	if (n)
		bpf_obj_drop(container_of(n, struct nbag, node));
	return XDP_PASS;
}

SEC("xdp")
int xdp_obj_stash_ok(struct xdp_md *ctx)
{
	struct holder *h = holder0();
	struct item *it;
	struct bag *b;

	if (!h)
		return XDP_PASS;
	b = bpf_obj_new(struct bag);
	if (!b)
		return XDP_PASS;
	it = bpf_obj_new(struct item);
	if (it) {
		bpf_spin_lock(&b->lock);
		bpf_list_push_back(&b->items, &it->node);
		bpf_spin_unlock(&b->lock);
	}
	b = bpf_kptr_xchg(&h->stash, b);
	if (b)
		bpf_obj_drop(b);
	return XDP_PASS;
}

SEC("xdp")
int xdp_obj_push_unlocked(struct xdp_md *ctx)
{
	struct item *it;
	struct bag *b;

	b = bpf_obj_new(struct bag);
	if (!b)
		return XDP_PASS;
	it = bpf_obj_new(struct item);
	if (it)
		bpf_list_push_back(&b->items, &it->node);
	bpf_obj_drop(b);
	return XDP_PASS;
}

SEC("xdp")
int xdp_obj_map_lock(struct xdp_md *ctx)
{
	struct holder *h = holder0();
	struct item *it;
	struct bag *b;

	if (!h)
		return XDP_PASS;
	b = bpf_obj_new(struct bag);
	if (!b)
		return XDP_PASS;
	it = bpf_obj_new(struct item);
	bpf_spin_lock(&h->lock);
	if (it)
		bpf_list_push_back(&b->items, &it->node);
	bpf_spin_unlock(&h->lock);
	bpf_obj_drop(b);
	return XDP_PASS;
}

SEC("xdp")
int xdp_obj_other_lock(struct xdp_md *ctx)
{
	struct bag *a, *b;
	struct titem *t;

	a = bpf_obj_new(struct bag);
	if (!a)
		return XDP_PASS;
	b = bpf_obj_new(struct bag);
	if (!b) {
		bpf_obj_drop(a);
		return XDP_PASS;
	}
	t = bpf_obj_new(struct titem);
	bpf_spin_lock(&a->lock);
	if (t)
		bpf_rbtree_add(&b->tree, &t->rb, tless);
	bpf_spin_unlock(&a->lock);
	bpf_obj_drop(a);
	bpf_obj_drop(b);
	return XDP_PASS;
}

SEC("xdp")
int xdp_obj_non_owning(struct xdp_md *ctx)
{
	struct holder *h = holder0();
	struct bpf_list_node *n;
	struct item *it;

	if (!h)
		return XDP_PASS;
	it = bpf_obj_new(struct item);
	if (!it)
		return XDP_PASS;
	bpf_spin_lock(&h->lock);
	n = bpf_list_front(&h->bags);
	if (n)
		bpf_list_push_back(&container_of(n, struct nbag, node)->items, &it->node);
	bpf_spin_unlock(&h->lock);
	if (!n)
		bpf_obj_drop(it);
	return XDP_PASS;
}

SEC("xdp")
int xdp_obj_no_lock(struct xdp_md *ctx)
{
	struct item *it;

	it = bpf_obj_new(struct item);
	if (!it)
		return XDP_PASS;
	bpf_spin_lock((struct bpf_spin_lock *)&it->v);
	bpf_spin_unlock((struct bpf_spin_lock *)&it->v);
	bpf_obj_drop(it);
	return XDP_PASS;
}

SEC("xdp")
int xdp_obj_lock_off(struct xdp_md *ctx)
{
	struct bag *b;

	b = bpf_obj_new(struct bag);
	if (!b)
		return XDP_PASS;
	bpf_spin_lock((struct bpf_spin_lock *)&b->n);
	bpf_spin_unlock((struct bpf_spin_lock *)&b->n);
	bpf_obj_drop(b);
	return XDP_PASS;
}

SEC("xdp")
int xdp_obj_lock_access(struct xdp_md *ctx)
{
	struct bag *b;
	int r;

	b = bpf_obj_new(struct bag);
	if (!b)
		return XDP_PASS;
	r = *(volatile __u32 *)&b->lock;
	bpf_obj_drop(b);
	return r;
}

SEC("xdp")
int xdp_obj_unlock_other(struct xdp_md *ctx)
{
	struct bag *a, *b;

	a = bpf_obj_new(struct bag);
	if (!a)
		return XDP_PASS;
	b = bpf_obj_new(struct bag);
	if (!b) {
		bpf_obj_drop(a);
		return XDP_PASS;
	}
	bpf_spin_lock(&a->lock);
	bpf_spin_unlock(&b->lock);
	bpf_obj_drop(a);
	bpf_obj_drop(b);
	return XDP_PASS;
}

SEC("xdp")
int xdp_obj_drop_locked(struct xdp_md *ctx)
{
	struct bag *b;

	b = bpf_obj_new(struct bag);
	if (!b)
		return XDP_PASS;
	bpf_spin_lock(&b->lock);
	bpf_obj_drop(b);
	bpf_spin_unlock(&b->lock);
	return XDP_PASS;
}

SEC("xdp")
int xdp_obj_use_after_push(struct xdp_md *ctx)
{
	struct holder *h = holder0();
	struct nbag *b;

	if (!h)
		return XDP_PASS;
	b = bpf_obj_new(struct nbag);
	if (!b)
		return XDP_PASS;
	bpf_spin_lock(&h->lock);
	bpf_list_push_back(&h->bags, &b->node);
	bpf_spin_unlock(&h->lock);
	bpf_spin_lock(&b->lock);
	bpf_spin_unlock(&b->lock);
	return XDP_PASS;
}

/* calls clang merged: one bpf_obj_new for two structs, one bpf_obj_drop for two */
struct pa {
	__u64 a;
};

struct pc {
	__u64 c;
};

struct pb {
	__u64 a, b, c, d;
};

#define NEW(t) ({ void *_p; __attribute__((nomerge)) _p = bpf_obj_new(t); _p; })

SEC("xdp")
int xdp_merged_new_same_size(struct xdp_md *ctx)
{
	void *p;

	if (ctx->ingress_ifindex & 1)
		p = bpf_obj_new(struct pa);
	else
		p = bpf_obj_new(struct pc);
	if (!p)
		return XDP_ABORTED;
	bpf_obj_drop(p);
	return XDP_PASS;
}

SEC("xdp")
int xdp_merged_new(struct xdp_md *ctx)
{
	void *p;

	if (ctx->ingress_ifindex & 1)
		p = bpf_obj_new(struct item);
	else
		p = bpf_obj_new(struct pb);
	if (!p)
		return XDP_ABORTED;
	bpf_obj_drop(p);
	return XDP_PASS;
}

SEC("xdp")
int xdp_merged_drop_plain(struct xdp_md *ctx)
{
	void *p;

	if (ctx->ingress_ifindex & 1) {
		p = NEW(struct pa);
		if (!p)
			return XDP_DROP;
	} else {
		p = NEW(struct pb);
		if (!p)
			return XDP_TX;
	}
	bpf_obj_drop(p);
	return XDP_PASS;
}

SEC("xdp")
int xdp_merged_drop(struct xdp_md *ctx)
{
	void *p;

	if (ctx->ingress_ifindex & 1) {
		p = NEW(struct bag);
		if (!p)
			return XDP_DROP;
	} else {
		p = NEW(struct pa);
		if (!p)
			return XDP_TX;
	}
	bpf_obj_drop(p);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";

// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * rbtree - BPF red-black trees (bpf_rb_root in a map value and in global data,
 * guarded by a bpf_spin_lock) of objects the program allocates, ordered by
 * their key. A packet's first byte is the command, its second the slot (of
 * 2), its third a key:
 *   0 add a struct tnode of that key (and the packet's length as its value);
 *   1 remove the leftmost node (bpf_rbtree_first, bpf_rbtree_remove): its key
 *     and value go into the slot's sum, the object is dropped (XDP_DROP when
 *     the tree is empty);
 *   2 walk down from bpf_rbtree_root, left or right by the key's bits
 *     (bpf_rbtree_left/right), at most 6 levels: the keys met are folded into
 *     the slot's shape hash and the depth reached is kept;
 *   3 search the key down from the root and remove the node holding it (an
 *     inner node: erase's rebalancing), its value into the sum (XDP_DROP when
 *     not found);
 *   4 add into the global tree (.bss) and remove its leftmost past 5 nodes.
 * Nodes left in a tree are freed when the map's value is updated or the map
 * goes (bpf_rb_root_free).
 *
 * xdp_rbtree_refcount keeps refcounted objects (struct rnode: a bpf_refcount,
 * a tree node and a list node) in a tree and a list of one value at once:
 *   0 a new object, a second reference to it (bpf_refcount_acquire), one added
 *     to the tree, the other pushed at the back of the list;
 *   1 pop the list's front and remove that object from the tree through the
 *     owned reference (NULL, counted, when it left the tree already): both
 *     references dropped;
 *   2 remove the tree's leftmost (it stays on the list): key into the sum;
 *   3 the shape walk of command 2 above;
 *   4 take a reference to the leftmost through the non-owning one
 *     bpf_rbtree_first gives and add it again: it fails (-EINVAL, counted; the
 *     reference dropped) as the object is in the tree already.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"
#include "pyxdp_kfuncs.h"

#define SLOTS 2

static long (* const bpf_spin_lock)(struct bpf_spin_lock *lock) = (void *) 93;
static long (* const bpf_spin_unlock)(struct bpf_spin_lock *lock) = (void *) 94;

struct tnode {
	__u64 key;
	struct bpf_rb_node rb;
	__u64 v;
};

struct tslot {
	struct bpf_spin_lock lock;
	struct bpf_rb_root root __contains(tnode, rb);
	__u64 added;
	__u64 sum;
	__u64 shape;
	__u64 depth;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLOTS);
	__type(key, __u32);
	__type(value, struct tslot);
} tslots SEC(".maps");

#define private(name) SEC(".bss." #name) __attribute__((aligned(8)))

private(T) struct bpf_spin_lock glock;
private(T) struct bpf_rb_root groot __contains(tnode, rb);
private(T) __u64 gcount;
__u64 gsum;

static _Bool less(struct bpf_rb_node *a, const struct bpf_rb_node *b)
{
	return container_of(a, struct tnode, rb)->key < container_of(b, struct tnode, rb)->key;
}

static int add(struct tslot *s, __u64 key, __u64 v)
{
	struct tnode *n = bpf_obj_new(struct tnode);

	if (!n)
		return XDP_ABORTED;
	n->key = key;
	n->v = v;
	bpf_spin_lock(&s->lock);
	bpf_rbtree_add(&s->root, &n->rb, less);
	s->added++;
	bpf_spin_unlock(&s->lock);
	return XDP_TX;
}

static int remove_first(struct tslot *s)
{
	struct bpf_rb_node *n;
	struct tnode *t;

	bpf_spin_lock(&s->lock);
	n = bpf_rbtree_first(&s->root);
	if (n)
		n = bpf_rbtree_remove(&s->root, n);
	bpf_spin_unlock(&s->lock);
	if (!n)
		return XDP_DROP;
	t = container_of(n, struct tnode, rb);
	s->sum += t->key * 1000 + t->v;
	bpf_obj_drop(t);
	return XDP_PASS;
}

static int walk(struct tslot *s, __u8 bits)
{
	struct bpf_rb_node *n;
	__u64 h = 0;
	int i;

	bpf_spin_lock(&s->lock);
	n = bpf_rbtree_root(&s->root);
	for (i = 0; i < 6 && n; i++) {
		h = h * 31 + container_of(n, struct tnode, rb)->key + 1;
		if ((bits >> i) & 1)
			n = bpf_rbtree_right(&s->root, n);
		else
			n = bpf_rbtree_left(&s->root, n);
	}
	bpf_spin_unlock(&s->lock);
	s->shape = s->shape * 7 + h;
	s->depth = i;
	return XDP_PASS;
}

static int remove_key(struct tslot *s, __u64 key)
{
	struct bpf_rb_node *n, *found = NULL;
	struct tnode *t;
	__u64 k;
	int i;

	bpf_spin_lock(&s->lock);
	n = bpf_rbtree_root(&s->root);
	for (i = 0; i < 12 && n; i++) {
		k = container_of(n, struct tnode, rb)->key;
		if (k == key) {
			found = bpf_rbtree_remove(&s->root, n);
			break;
		}
		if (key < k)
			n = bpf_rbtree_left(&s->root, n);
		else
			n = bpf_rbtree_right(&s->root, n);
	}
	bpf_spin_unlock(&s->lock);
	if (!found)
		return XDP_DROP;
	t = container_of(found, struct tnode, rb);
	s->sum += t->v;
	bpf_obj_drop(t);
	return XDP_PASS;
}

static int global(__u64 key)
{
	struct tnode *t = bpf_obj_new(struct tnode);
	struct bpf_rb_node *n = NULL;

	if (!t)
		return XDP_ABORTED;
	t->key = key;
	bpf_spin_lock(&glock);
	bpf_rbtree_add(&groot, &t->rb, less);
	if (++gcount > 5) {
		n = bpf_rbtree_first(&groot);
		if (n)
			n = bpf_rbtree_remove(&groot, n);
		gcount--;
	}
	bpf_spin_unlock(&glock);
	if (!n)
		return XDP_PASS;
	t = container_of(n, struct tnode, rb);
	gsum = gsum * 3 + t->key;
	bpf_obj_drop(t);
	return XDP_TX;
}

SEC("xdp")
int xdp_rbtree(struct xdp_md *ctx)
{
	__u8 *p = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct tslot *s;
	__u32 k;

	if (p + 3 > end)
		return XDP_PASS;
	k = p[1] % SLOTS;
	s = bpf_map_lookup_elem(&tslots, &k);
	if (!s)
		return XDP_ABORTED;
	switch (p[0]) {
	case 0:
		return add(s, p[2], end - p);
	case 1:
		return remove_first(s);
	case 2:
		return walk(s, p[2]);
	case 3:
		return remove_key(s, p[2]);
	case 4:
		return global(p[2]);
	}
	return XDP_PASS;
}

struct rnode {
	__u64 key;
	struct bpf_rb_node rb;
	struct bpf_refcount ref;
	struct bpf_list_node l;
};

struct both {
	struct bpf_spin_lock lock;
	struct bpf_rb_root root __contains(rnode, rb);
	struct bpf_list_head head __contains(rnode, l);
	__u64 sum;
	__u64 fails;
	__u64 shape;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLOTS);
	__type(key, __u32);
	__type(value, struct both);
} boths SEC(".maps");

static _Bool rless(struct bpf_rb_node *a, const struct bpf_rb_node *b)
{
	return container_of(a, struct rnode, rb)->key < container_of(b, struct rnode, rb)->key;
}

SEC("xdp")
int xdp_rbtree_refcount(struct xdp_md *ctx)
{
	__u8 *p = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct bpf_list_node *l;
	struct bpf_rb_node *n;
	struct rnode *e, *e2;
	struct both *v;
	__u64 h = 0;
	__u32 k;
	int i, r;

	if (p + 3 > end)
		return XDP_PASS;
	k = p[1] % SLOTS;
	v = bpf_map_lookup_elem(&boths, &k);
	if (!v)
		return XDP_ABORTED;
	switch (p[0]) {
	case 0:
		e = bpf_obj_new(struct rnode);
		if (!e)
			return XDP_ABORTED;
		e->key = p[2];
		e2 = bpf_refcount_acquire(e);
		bpf_spin_lock(&v->lock);
		bpf_rbtree_add(&v->root, &e->rb, rless);
		bpf_list_push_back(&v->head, &e2->l);
		bpf_spin_unlock(&v->lock);
		return XDP_TX;
	case 1:
		bpf_spin_lock(&v->lock);
		l = bpf_list_pop_front(&v->head);
		if (!l) {
			bpf_spin_unlock(&v->lock);
			return XDP_DROP;
		}
		e = container_of(l, struct rnode, l);
		n = bpf_rbtree_remove(&v->root, &e->rb);
		bpf_spin_unlock(&v->lock);
		v->sum += e->key;
		bpf_obj_drop(e);
		if (!n) {
			v->fails++;
			return XDP_DROP;
		}
		bpf_obj_drop(container_of(n, struct rnode, rb));
		return XDP_PASS;
	case 2:
		bpf_spin_lock(&v->lock);
		n = bpf_rbtree_first(&v->root);
		if (n)
			n = bpf_rbtree_remove(&v->root, n);
		bpf_spin_unlock(&v->lock);
		if (!n)
			return XDP_DROP;
		e = container_of(n, struct rnode, rb);
		v->sum += e->key * 3;
		bpf_obj_drop(e);
		return XDP_PASS;
	case 3:
		bpf_spin_lock(&v->lock);
		n = bpf_rbtree_root(&v->root);
		for (i = 0; i < 6 && n; i++) {
			h = h * 31 + container_of(n, struct rnode, rb)->key + 1;
			if ((p[2] >> i) & 1)
				n = bpf_rbtree_right(&v->root, n);
			else
				n = bpf_rbtree_left(&v->root, n);
		}
		bpf_spin_unlock(&v->lock);
		v->shape = v->shape * 7 + h;
		return XDP_PASS;
	case 4:
		e2 = NULL;
		bpf_spin_lock(&v->lock);
		n = bpf_rbtree_first(&v->root);
		if (n)
			e2 = bpf_refcount_acquire(container_of(n, struct rnode, rb));
		bpf_spin_unlock(&v->lock);
		if (!e2)
			return XDP_DROP;
		bpf_spin_lock(&v->lock);
		r = bpf_rbtree_add(&v->root, &e2->rb, rless);
		bpf_spin_unlock(&v->lock);
		if (r)
			v->fails += 100;
		return r ? XDP_DROP : XDP_TX;
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";

// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * graph_obj - BPF linked lists and red-black trees inside objects the program
 * allocates (a bpf_list_head and a bpf_rb_root beside the object's own
 * bpf_spin_lock), the objects kept in a map value's __kptr between runs. A
 * packet's first byte is the command, its second the slot (of 4), its third
 * a key:
 *   0 push an item of the packet's length plus the key at the back of the
 *     slot's bag (a new bag when the slot holds none);
 *   1 pop the bag's front item into the slot's sum and drop it (XDP_DROP when
 *     the list is empty, XDP_TX when there is no bag);
 *   2 add a tree item of the key to the bag's tree (ordered by key);
 *   3 remove the bag's leftmost tree item into the sum (weighted by 3);
 *   4 drop the bag with whatever its list and tree hold (bpf_obj_drop frees
 *     them; XDP_REDIRECT);
 *   5 a new nbag holding one item of the key (its own list under its own
 *     lock), pushed on the slot's list of nbags (the map value's lock);
 *   6 pop the front nbag, its front item into the sum (weighted by 5), and
 *     drop the nbag with any items left in it.
 * A bag left in the map is dropped, with what it holds, when the value is
 * updated or the map goes.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"
#include "pyxdp_kfuncs.h"

#define SLOTS 4

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

struct bag {
	__u64 n;
	struct bpf_spin_lock lock;
	struct bpf_list_head items __contains(item, node);
	struct bpf_rb_root tree __contains(titem, rb);
};

struct nbag {
	struct bpf_list_node node;
	struct bpf_spin_lock lock;
	struct bpf_list_head items __contains(item, node);
	__u64 k;
};

struct slot {
	struct bag __kptr *bag;
	__u64 sum;
	__u64 made;
	struct bpf_spin_lock lock;
	struct bpf_list_head nbags __contains(nbag, node);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLOTS);
	__type(key, __u32);
	__type(value, struct slot);
} slots SEC(".maps");

static _Bool tless(struct bpf_rb_node *a, const struct bpf_rb_node *b)
{
	return container_of(a, struct titem, rb)->k < container_of(b, struct titem, rb)->k;
}

static __always_inline int nbag_cmd(struct slot *s, __u8 cmd, __u8 key)
{
	struct bpf_list_node *n;
	struct item *it;
	struct nbag *nb;

	if (cmd == 5) {
		nb = bpf_obj_new(struct nbag);
		if (!nb)
			return XDP_ABORTED;
		nb->k = key;
		it = bpf_obj_new(struct item);
		if (it) {
			it->v = key;
			bpf_spin_lock(&nb->lock);
			bpf_list_push_back(&nb->items, &it->node);
			bpf_spin_unlock(&nb->lock);
		}
		bpf_spin_lock(&s->lock);
		bpf_list_push_back(&s->nbags, &nb->node);
		bpf_spin_unlock(&s->lock);
		return XDP_PASS;
	}
	bpf_spin_lock(&s->lock);
	n = bpf_list_pop_front(&s->nbags);
	bpf_spin_unlock(&s->lock);
	if (!n)
		return XDP_DROP;
	nb = container_of(n, struct nbag, node);
	bpf_spin_lock(&nb->lock);
	n = bpf_list_pop_front(&nb->items);
	bpf_spin_unlock(&nb->lock);
	if (n) {
		it = container_of(n, struct item, node);
		s->sum += 5 * it->v + nb->k;
		bpf_obj_drop(it);
	}
	bpf_obj_drop(nb);
	return XDP_PASS;
}

SEC("xdp")
int xdp_graph_obj(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u8 *p = data;
	struct bpf_list_node *n;
	struct bpf_rb_node *r;
	struct titem *t;
	struct item *it;
	struct slot *s;
	struct bag *b;
	int ret = XDP_PASS;
	__u64 v;
	__u32 k;

	if (data + 3 > end)
		return XDP_ABORTED;
	k = p[1] % SLOTS;
	s = bpf_map_lookup_elem(&slots, &k);
	if (!s)
		return XDP_ABORTED;
	if (p[0] >= 5)
		return nbag_cmd(s, p[0], p[2]);
	b = bpf_kptr_xchg(&s->bag, NULL);
	if (!b) {
		if (p[0] != 0 && p[0] != 2)
			return XDP_TX;
		b = bpf_obj_new(struct bag);
		if (!b)
			return XDP_ABORTED;
		s->made++;
	}
	switch (p[0]) {
	case 0:
		it = bpf_obj_new(struct item);
		if (!it)
			break;
		it->v = (end - data) + p[2];
		bpf_spin_lock(&b->lock);
		bpf_list_push_back(&b->items, &it->node);
		b->n++;
		bpf_spin_unlock(&b->lock);
		break;
	case 1:
		bpf_spin_lock(&b->lock);
		n = bpf_list_pop_front(&b->items);
		bpf_spin_unlock(&b->lock);
		if (!n) {
			ret = XDP_DROP;
			break;
		}
		it = container_of(n, struct item, node);
		v = it->v;
		bpf_obj_drop(it);
		s->sum += v;
		break;
	case 2:
		t = bpf_obj_new(struct titem);
		if (!t)
			break;
		t->k = p[2];
		bpf_spin_lock(&b->lock);
		bpf_rbtree_add(&b->tree, &t->rb, tless);
		bpf_spin_unlock(&b->lock);
		break;
	case 3:
		bpf_spin_lock(&b->lock);
		r = bpf_rbtree_first(&b->tree);
		if (r)
			r = bpf_rbtree_remove(&b->tree, r);
		bpf_spin_unlock(&b->lock);
		if (!r) {
			ret = XDP_DROP;
			break;
		}
		t = container_of(r, struct titem, rb);
		v = t->k;
		bpf_obj_drop(t);
		s->sum += 3 * v;
		break;
	default:
		bpf_obj_drop(b);
		return XDP_REDIRECT;
	}
	b = bpf_kptr_xchg(&s->bag, b);
	if (b)
		bpf_obj_drop(b);
	return ret;
}

char _license[] SEC("license") = "GPL";

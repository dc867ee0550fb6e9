// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * graph_list - BPF linked lists (bpf_list_head in a map value and in global
 * data, guarded by a bpf_spin_lock) of objects the program allocates. A
 * packet's first byte is the command, its second the slot (of 4):
 *   0 push a struct elem of the packet's length at the front, 1 at the back
 *     (and, through the non-owning reference the push leaves, add 1000 to the
 *     value of the element pushed while the lock is held);
 *   2 pop the front element, 3 the back one: its value is added to the
 *     slot's popped sum and the element dropped (XDP_PASS; XDP_DROP when the
 *     list is empty);
 *   4 read the values of the front and back elements in place (front - 3 *
 *     back into the slot's peek sum);
 *   5 push into the global list (.bss) and pop its front again when it holds
 *     more than 3 (the count kept beside it).
 * Elements left in a list are freed when the map's value is updated or the
 * map goes (bpf_list_head_free).
 *
 * xdp_graph_refcount keeps refcounted objects (struct rnode: a bpf_refcount
 * and two list nodes) on two lists of one value (of 2, by the second byte):
 *   0 a new object of the packet's length, a second reference to it
 *     (bpf_refcount_acquire), one pushed at the front of list a, the other at
 *     the back of list b;
 *   1 pop the front of list a, 2 the back of list b, into the value's sum
 *     (b's thrice) and drop it (freed when no list holds it any more;
 *     XDP_DROP when the list is empty);
 *   3 take a reference to the front of list a through the non-owning one
 *     bpf_list_front gives and push it at the back of list b: it fails
 *     (-EINVAL, counted; the reference dropped) when the object is on b
 *     already.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"
#include "pyxdp_kfuncs.h"

#define SLOTS 4

static long (* const bpf_spin_lock)(struct bpf_spin_lock *lock) = (void *) 93;
static long (* const bpf_spin_unlock)(struct bpf_spin_lock *lock) = (void *) 94;

struct elem {
	__u64 v;
	struct bpf_list_node node;
	__u32 seq;
};

struct slot {
	__u64 pushed;
	struct bpf_spin_lock lock;
	struct bpf_list_head head __contains(elem, node);
	__u64 popped;
	__s64 peek;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLOTS);
	__type(key, __u32);
	__type(value, struct slot);
} slots SEC(".maps");

#define private(name) SEC(".bss." #name) __attribute__((aligned(8)))

private(G) struct bpf_spin_lock glock;
private(G) struct bpf_list_head ghead __contains(elem, node);
private(G) __u64 gcount;
__u64 gsum;

static int push(struct slot *s, __u64 v, int back)
{
	struct elem *e = bpf_obj_new(struct elem);

	if (!e)
		return XDP_ABORTED;
	e->v = v;
	e->seq = s->pushed++;
	bpf_spin_lock(&s->lock);
	if (back)
		bpf_list_push_back(&s->head, &e->node);
	else
		bpf_list_push_front(&s->head, &e->node);
	e->v += 1000;	/* a non-owning reference until the unlock */
	bpf_spin_unlock(&s->lock);
	return XDP_TX;
}

static int pop(struct slot *s, int back)
{
	struct bpf_list_node *n;
	struct elem *e;

	bpf_spin_lock(&s->lock);
	n = back ? bpf_list_pop_back(&s->head) : bpf_list_pop_front(&s->head);
	bpf_spin_unlock(&s->lock);
	if (!n)
		return XDP_DROP;
	e = container_of(n, struct elem, node);
	s->popped += e->v * 16 + e->seq;
	bpf_obj_drop(e);
	return XDP_PASS;
}

static int peek(struct slot *s)
{
	struct bpf_list_node *f, *b;
	__s64 d = 0;

	bpf_spin_lock(&s->lock);
	f = bpf_list_front(&s->head);
	b = bpf_list_back(&s->head);
	if (f)
		d += container_of(f, struct elem, node)->v;
	if (b)
		d -= container_of(b, struct elem, node)->v * 3;
	bpf_spin_unlock(&s->lock);
	s->peek += d;
	return XDP_PASS;
}

static int global(__u64 v)
{
	struct elem *e = bpf_obj_new(struct elem);
	struct bpf_list_node *n = NULL;

	if (!e)
		return XDP_ABORTED;
	e->v = v;
	bpf_spin_lock(&glock);
	bpf_list_push_back(&ghead, &e->node);
	if (++gcount > 3) {
		n = bpf_list_pop_front(&ghead);
		gcount--;
	}
	bpf_spin_unlock(&glock);
	if (!n)
		return XDP_PASS;
	e = container_of(n, struct elem, node);
	gsum += e->v;
	bpf_obj_drop(e);
	return XDP_TX;
}

SEC("xdp")
int xdp_graph_list(struct xdp_md *ctx)
{
	__u8 *p = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u32 k;
	struct slot *s;
	__u8 cmd;

	if (p + 2 > end)
		return XDP_PASS;
	cmd = p[0];
	k = p[1] % SLOTS;
	s = bpf_map_lookup_elem(&slots, &k);
	if (!s)
		return XDP_ABORTED;
	switch (cmd) {
	case 0:
	case 1:
		return push(s, end - p, cmd);
	case 2:
	case 3:
		return pop(s, cmd == 3);
	case 4:
		return peek(s);
	case 5:
		return global(end - p);
	}
	return XDP_PASS;
}

struct rnode {
	__u64 v;
	struct bpf_list_node a;
	struct bpf_refcount ref;
	struct bpf_list_node b;
};

struct pair {
	struct bpf_spin_lock lock;
	struct bpf_list_head ha __contains(rnode, a);
	struct bpf_list_head hb __contains(rnode, b);
	__u64 sum;
	__u64 fails;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct pair);
} pairs SEC(".maps");

SEC("xdp")
int xdp_graph_refcount(struct xdp_md *ctx)
{
	__u8 *p = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct rnode *e, *e2 = NULL;
	struct bpf_list_node *n;
	struct pair *v;
	__u32 k;
	__u8 cmd;
	int r;

	if (p + 2 > end)
		return XDP_PASS;
	cmd = p[0];
	k = p[1] % 2;
	v = bpf_map_lookup_elem(&pairs, &k);
	if (!v)
		return XDP_ABORTED;
	if (cmd == 0) {
		e = bpf_obj_new(struct rnode);
		if (!e)
			return XDP_ABORTED;
		e->v = end - p;
		e2 = bpf_refcount_acquire(e);
		bpf_spin_lock(&v->lock);
		bpf_list_push_front(&v->ha, &e->a);
		bpf_list_push_back(&v->hb, &e2->b);
		bpf_spin_unlock(&v->lock);
		return XDP_TX;
	}
	if (cmd == 1 || cmd == 2) {
		bpf_spin_lock(&v->lock);
		n = cmd == 1 ? bpf_list_pop_front(&v->ha) : bpf_list_pop_back(&v->hb);
		bpf_spin_unlock(&v->lock);
		if (!n)
			return XDP_DROP;
		if (cmd == 1) {
			e = container_of(n, struct rnode, a);
			v->sum += e->v;
		} else {
			e = container_of(n, struct rnode, b);
			v->sum += e->v * 3;
		}
		bpf_obj_drop(e);
		return XDP_PASS;
	}
	if (cmd == 3) {
		bpf_spin_lock(&v->lock);
		n = bpf_list_front(&v->ha);
		if (n)
			e2 = bpf_refcount_acquire(container_of(n, struct rnode, a));
		bpf_spin_unlock(&v->lock);
		if (!e2)
			return XDP_DROP;
		bpf_spin_lock(&v->lock);
		r = bpf_list_push_back(&v->hb, &e2->b);
		bpf_spin_unlock(&v->lock);
		if (r)
			v->fails += 1;
		return r ? XDP_DROP : XDP_TX;
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";

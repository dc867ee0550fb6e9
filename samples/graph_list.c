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

char _license[] SEC("license") = "GPL";

// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * res_lock - resilient queued spin locks (struct bpf_res_spin_lock in map
 * values, Linux 6.15+): bpf_res_spin_lock/_unlock and the _irqsave/
 * _irqrestore pair.
 *
 * Each run takes locks[0]'s lock, then the lock of locks[k] where k is the
 * packet's first byte & 3: for k = 0 that is the lock this run already holds,
 * which rqspinlock's AA check answers with -EDEADLK (the verifier cannot see
 * it: the two lookups give two pointers). Under the first lock it takes a
 * value's res lock nested in a struct (inner.lock) with _irqsave, and a plain
 * bpf_spin_lock of another map is taken around a res lock. Every return code
 * goes into out[] as the 64-bit register holds it; counts[k] counts the runs
 * that held both locks. The verdict is XDP_DROP when the second lock failed,
 * else XDP_PASS.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

#define __ksym __attribute__((section(".ksyms")))

struct bpf_res_spin_lock {
	__u32 val;
};

extern int bpf_res_spin_lock(struct bpf_res_spin_lock *lock) __ksym;
extern void bpf_res_spin_unlock(struct bpf_res_spin_lock *lock) __ksym;
extern int bpf_res_spin_lock_irqsave(struct bpf_res_spin_lock *lock,
				     unsigned long *flags__irq_flag) __ksym;
extern void bpf_res_spin_unlock_irqrestore(struct bpf_res_spin_lock *lock,
					   unsigned long *flags__irq_flag) __ksym;
static long (* const bpf_spin_lock)(struct bpf_spin_lock *lock) = (void *) 93;
static long (* const bpf_spin_unlock)(struct bpf_spin_lock *lock) = (void *) 94;

struct elem {
	struct bpf_res_spin_lock lock;
	__u32 pad;
	__u64 count;
};

struct nested {
	__u64 before;
	struct {
		__u32 x;
		struct bpf_res_spin_lock lock;
	} inner;
	__u64 count;
};

struct plain {
	struct bpf_spin_lock lock;
	__u32 count;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct elem);
} locks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nested);
} deep SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct plain);
} plain SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __s64);
} out SEC(".maps");

static __always_inline void note(__u32 k, long v)
{
	__s64 *o = bpf_map_lookup_elem(&out, &k);

	if (o)
		*o = v;
}

SEC("xdp")
int xdp_res_lock(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *p = data;
	__u32 k0 = 0, k;
	struct elem *a, *b;
	struct nested *n;
	struct plain *pl;
	unsigned long flags;
	long r, r0, r2;
	int verdict = XDP_PASS;

	if (p + 1 > (__u8 *)data_end)
		return XDP_ABORTED;
	k = *p & 3;
	a = bpf_map_lookup_elem(&locks, &k0);
	b = bpf_map_lookup_elem(&locks, &k);
	n = bpf_map_lookup_elem(&deep, &k0);
	pl = bpf_map_lookup_elem(&plain, &k0);
	if (!a || !b || !n || !pl)
		return XDP_ABORTED;

	r0 = bpf_res_spin_lock(&a->lock);
	if (r0) {
		note(0, r0);
		return XDP_ABORTED;
	}
	r2 = bpf_res_spin_lock(&b->lock);
	if (!r2) {
		b->count++;
		bpf_res_spin_unlock(&b->lock);
	} else {
		verdict = XDP_DROP;
	}
	r = bpf_res_spin_lock_irqsave(&n->inner.lock, &flags);
	if (!r) {
		n->count += k;
		bpf_res_spin_unlock_irqrestore(&n->inner.lock, &flags);
	}
	bpf_res_spin_unlock(&a->lock);
	note(0, r0);
	note(1, r2);
	note(2, r);

	bpf_spin_lock(&pl->lock);
	r = bpf_res_spin_lock(&a->lock);
	if (!r) {
		a->count++;
		bpf_res_spin_unlock(&a->lock);
	}
	pl->count++;
	bpf_spin_unlock(&pl->lock);
	note(3, r);
	return verdict;
}

char _license[] SEC("license") = "GPL";

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
 *
 * xdp_res_lock_iter sums 0..n-1 (n: the first byte & 7) with the numbers
 * iterator while it holds the nested lock (the iterator kfuncs may be called
 * under a lock) and adds it to deep[0].count; xdp_res_lock_neg tests the
 * lock's return with "r < 0" and counts in deep[0].before;
 * xdp_res_lock_global counts under a lock in global data (.data.A).
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

#define __ksym __attribute__((section(".ksyms")))

struct bpf_res_spin_lock {
	__u32 val;
};

struct bpf_iter_num {
	__u64 __opaque[1];
} __attribute__((aligned(8)));

extern int bpf_res_spin_lock(struct bpf_res_spin_lock *lock) __ksym;
extern void bpf_res_spin_unlock(struct bpf_res_spin_lock *lock) __ksym;
extern int bpf_res_spin_lock_irqsave(struct bpf_res_spin_lock *lock,
				     unsigned long *flags__irq_flag) __ksym;
extern void bpf_res_spin_unlock_irqrestore(struct bpf_res_spin_lock *lock,
					   unsigned long *flags__irq_flag) __ksym;
extern int bpf_iter_num_new(struct bpf_iter_num *it, int start, int end) __ksym;
extern int *bpf_iter_num_next(struct bpf_iter_num *it) __ksym;
extern void bpf_iter_num_destroy(struct bpf_iter_num *it) __ksym;
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

/* a lock in global data (.data.A: a DATASEC's variables hold fields too) */
struct bpf_res_spin_lock glock SEC(".data.A");
long gcount SEC(".data.A");

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

SEC("xdp")
int xdp_res_lock_iter(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *p = data;
	__u32 k0 = 0;
	struct nested *n;
	struct bpf_iter_num it;
	int *v, sum = 0;

	if (p + 1 > (__u8 *)data_end)
		return XDP_ABORTED;
	n = bpf_map_lookup_elem(&deep, &k0);
	if (!n || bpf_res_spin_lock(&n->inner.lock))
		return XDP_ABORTED;
	bpf_iter_num_new(&it, 0, *p & 7);
	while ((v = bpf_iter_num_next(&it)))
		sum += *v;
	bpf_iter_num_destroy(&it);
	n->count += sum;
	bpf_res_spin_unlock(&n->inner.lock);
	return XDP_PASS;
}

SEC("xdp")
int xdp_res_lock_neg(struct xdp_md *ctx)
{
	__u32 k0 = 0;
	struct nested *n = bpf_map_lookup_elem(&deep, &k0);
	int r;

	if (!n)
		return XDP_ABORTED;
	r = bpf_res_spin_lock(&n->inner.lock);
	if (r < 0)
		return XDP_DROP;
	n->before++;
	bpf_res_spin_unlock(&n->inner.lock);
	return XDP_PASS;
}

SEC("xdp")
int xdp_res_lock_global(struct xdp_md *ctx)
{
	if (bpf_res_spin_lock(&glock))
		return XDP_DROP;
	gcount++;
	bpf_res_spin_unlock(&glock);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";

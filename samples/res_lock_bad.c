// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * res_lock_bad - programs Linux's verifier refuses for their use of
 * resilient spin locks (struct bpf_res_spin_lock) and of special fields in
 * nested structs; each is SEC("?xdp") (autoload off) and the comment above
 * it gives the first error. res_lock.c has the programs it accepts.
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
struct bpf_ct_opts {
	__s32 netns_id;
	__s32 error;
	__u8 l4proto;
	__u8 dir;
	__u16 ct_zone_id;
	__u8 ct_zone_dir;
	__u8 reserved[3];
};
/* Defined, not declared: libbpf matches a kfunc's prototype against the kernel's,
 * where a forward declaration is no struct. */
struct nf_conn { int status; };
extern struct nf_conn *bpf_xdp_ct_lookup(struct xdp_md *xdp_ctx,
					 struct bpf_sock_tuple *bpf_tuple,
					 __u32 len_tuple, struct bpf_ct_opts *opts,
					 __u32 len_opts) __ksym;
extern void bpf_ct_release(struct nf_conn *ct) __ksym;
extern void bpf_local_irq_save(unsigned long *flags__irq_flag) __ksym;
extern void bpf_local_irq_restore(unsigned long *flags__irq_flag) __ksym;

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

struct bpf_res_spin_lock glock SEC(".data.A");

static __always_inline struct elem *get(__u32 k)
{
	return bpf_map_lookup_elem(&locks, &k);
}

/* bpf_res_spin_unlock without taking a lock (the failed lock's path) */
SEC("?xdp")
int unchecked(struct xdp_md *ctx)
{
	struct elem *a = get(0);

	if (!a)
		return XDP_ABORTED;
	bpf_res_spin_lock(&a->lock);
	a->count++;
	bpf_res_spin_unlock(&a->lock);
	return XDP_PASS;
}

/* Acquiring the same lock again, AA deadlock detected */
SEC("?xdp")
int aa(struct xdp_md *ctx)
{
	struct elem *a = get(0);

	if (!a || bpf_res_spin_lock(&a->lock))
		return XDP_ABORTED;
	if (!bpf_res_spin_lock(&a->lock))
		bpf_res_spin_unlock(&a->lock);
	bpf_res_spin_unlock(&a->lock);
	return XDP_PASS;
}

/* BPF_EXIT instruction in main prog cannot be used inside bpf_spin_lock-ed region */
SEC("?xdp")
int exit_held(struct xdp_md *ctx)
{
	struct elem *a = get(0);

	if (!a || bpf_res_spin_lock(&a->lock))
		return XDP_ABORTED;
	return XDP_PASS;
}

/* function calls are not allowed while holding a lock */
SEC("?xdp")
int helper_held(struct xdp_md *ctx)
{
	struct elem *a = get(0), *b;

	if (!a || bpf_res_spin_lock(&a->lock))
		return XDP_ABORTED;
	b = get(1);
	if (b)
		b->count++;
	bpf_res_spin_unlock(&a->lock);
	return XDP_PASS;
}

/* bpf_res_spin_unlock cannot be out of order */
SEC("?xdp")
int out_of_order(struct xdp_md *ctx)
{
	struct elem *a = get(0), *b = get(1);

	if (!a || !b || bpf_res_spin_lock(&a->lock))
		return XDP_ABORTED;
	if (bpf_res_spin_lock(&b->lock)) {
		bpf_res_spin_unlock(&a->lock);
		return XDP_DROP;
	}
	bpf_res_spin_unlock(&a->lock);
	bpf_res_spin_unlock(&b->lock);
	return XDP_PASS;
}

/* bpf_res_spin_unlock of different lock (taken with _irqsave) */
SEC("?xdp")
int wrong_kind(struct xdp_md *ctx)
{
	struct elem *a = get(0);
	unsigned long f;

	if (!a || bpf_res_spin_lock_irqsave(&a->lock, &f))
		return XDP_ABORTED;
	bpf_res_spin_unlock(&a->lock);
	return XDP_PASS;
}

/* irq flag acquired by native kfuncs cannot be restored with lock kfuncs */
SEC("?xdp")
int irq_class(struct xdp_md *ctx)
{
	struct elem *a = get(0);
	unsigned long f1, f2;

	if (!a)
		return XDP_ABORTED;
	bpf_local_irq_save(&f2);
	if (!bpf_res_spin_lock_irqsave(&a->lock, &f1))
		bpf_res_spin_unlock_irqrestore(&a->lock, &f2);
	bpf_local_irq_restore(&f2);
	return XDP_PASS;
}

/* map 'plain' has no valid bpf_res_spin_lock */
SEC("?xdp")
int wrong_map(struct xdp_md *ctx)
{
	__u32 k = 0;
	struct plain *p = bpf_map_lookup_elem(&plain, &k);

	if (!p || bpf_res_spin_lock((struct bpf_res_spin_lock *)&p->lock))
		return XDP_ABORTED;
	bpf_res_spin_unlock((struct bpf_res_spin_lock *)&p->lock);
	return XDP_PASS;
}

/* arg#0 doesn't point to map value or allocated object */
SEC("?xdp")
int on_stack(struct xdp_md *ctx)
{
	struct bpf_res_spin_lock l = {};

	if (bpf_res_spin_lock(&l))
		return XDP_ABORTED;
	bpf_res_spin_unlock(&l);
	return XDP_PASS;
}

/* bpf_res_spin_lock cannot be accessed directly by load/store (a helper
 * reading the value holding it) */
SEC("?xdp")
int helper_overlap(struct xdp_md *ctx)
{
	__u32 k = 1;
	struct elem *a = get(0);

	if (!a)
		return XDP_ABORTED;
	bpf_map_update_elem(&locks, &k, a, 0);
	return XDP_PASS;
}

/* R1 doesn't have constant offset. bpf_res_spin_lock has to be at the
 * constant offset */
SEC("?xdp")
int var_off(struct xdp_md *ctx)
{
	struct elem *a = get(0);
	__u32 i = ctx->rx_queue_index & 1;

	if (!a || bpf_res_spin_lock((void *)a + i * 4))
		return XDP_ABORTED;
	bpf_res_spin_unlock(&a->lock);
	return XDP_PASS;
}

/* arg#1 arg#2 memory, len pair leads to invalid memory access (a kfunc's
 * memory argument over the value holding the lock: check_map_access first
 * logs "bpf_res_spin_lock cannot be accessed directly by load/store") */
SEC("?xdp")
int kfunc_overlap(struct xdp_md *ctx)
{
	struct bpf_ct_opts opts = { .netns_id = -1, .l4proto = 6 };
	struct elem *a = get(0);
	struct nf_conn *ct;

	if (!a)
		return XDP_ABORTED;
	ct = bpf_xdp_ct_lookup(ctx, (struct bpf_sock_tuple *)a, 12, &opts,
			       sizeof(opts));
	if (ct)
		bpf_ct_release(ct);
	return XDP_PASS;
}

/* bpf_res_spin_lock cannot be accessed directly by load/store (a store into
 * the lock of a nested struct) */
SEC("?xdp")
int nested_store(struct xdp_md *ctx)
{
	__u32 k = 0;
	struct nested *n = bpf_map_lookup_elem(&deep, &k);

	if (!n)
		return XDP_ABORTED;
	n->inner.lock.val = 1;
	return XDP_PASS;
}

/* off 8 doesn't point to 'struct bpf_res_spin_lock' that is at 12 */
SEC("?xdp")
int nested_wrong_off(struct xdp_md *ctx)
{
	__u32 k = 0;
	struct nested *n = bpf_map_lookup_elem(&deep, &k);

	if (!n || bpf_res_spin_lock((struct bpf_res_spin_lock *)&n->inner.x))
		return XDP_ABORTED;
	bpf_res_spin_unlock((struct bpf_res_spin_lock *)&n->inner.x);
	return XDP_PASS;
}

/* Acquiring the same lock again, AA deadlock detected (a lock in global data:
 * the same map value pointer, id 0, both times) */
SEC("?xdp")
int global_aa(struct xdp_md *ctx)
{
	if (bpf_res_spin_lock(&glock))
		return XDP_ABORTED;
	if (!bpf_res_spin_lock(&glock))
		bpf_res_spin_unlock(&glock);
	bpf_res_spin_unlock(&glock);
	return XDP_PASS;
}

static __always_inline struct plain *get_plain(void)
{
	__u32 k = 0;

	return bpf_map_lookup_elem(&plain, &k);
}

/* function calls are not allowed while holding a lock (the bpf_spin_lock
 * helper under a res lock) */
SEC("?xdp")
int plain_under_res(struct xdp_md *ctx)
{
	struct elem *a = get(0);
	struct plain *p = get_plain();

	if (!a || !p || bpf_res_spin_lock(&a->lock))
		return XDP_ABORTED;
	bpf_spin_lock(&p->lock);
	bpf_spin_unlock(&p->lock);
	bpf_res_spin_unlock(&a->lock);
	return XDP_PASS;
}

/* bpf_spin_unlock cannot be out of order (a res lock taken under it is
 * still held) */
SEC("?xdp")
int plain_unlock_first(struct xdp_md *ctx)
{
	struct elem *a = get(0);
	struct plain *p = get_plain();

	if (!a || !p)
		return XDP_ABORTED;
	bpf_spin_lock(&p->lock);
	if (bpf_res_spin_lock(&a->lock)) {
		bpf_spin_unlock(&p->lock);
		return XDP_DROP;
	}
	bpf_spin_unlock(&p->lock);
	bpf_res_spin_unlock(&a->lock);
	return XDP_PASS;
}

/* bpf_spin_unlock of different lock (only a res lock is held) */
SEC("?xdp")
int res_unlock_plain(struct xdp_md *ctx)
{
	struct elem *a = get(0);
	struct plain *p = get_plain();

	if (!a || !p || bpf_res_spin_lock(&a->lock))
		return XDP_ABORTED;
	bpf_spin_unlock(&p->lock);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";

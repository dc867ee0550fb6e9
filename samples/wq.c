// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * wq - bpf_wq work items in array, hash and LRU hash map values, queued
 * from XDP.
 *
 * One run of xdp_wq initialises and starts these work items (every kfunc's
 * return code goes into the element's rc[]); their callbacks count runs, note
 * the key they were given and their own kfuncs' return codes in cb_rc[]:
 *
 *   wqs[0]   init with flags 1 (-EINVAL), init (0), init again (-EBUSY),
 *            start before a callback (-EINVAL), set_callback with flags 1
 *            (-EINVAL), set_callback, start with flags 1 (-EINVAL), start;
 *            the callback starts it again until it has run 3 times and tries
 *            to init it (-EBUSY)
 *   wqs[1]   started, then the element is overwritten by
 *            bpf_map_update_elem: the work is cancelled (never runs) and
 *            start says -EINVAL (not initialised)
 *   wqs[2]   started with one callback, then set_callback gives it another
 *            before it runs: the other one runs (it notes 2 in cb_rc[1])
 *   wqs[3]   initialised with its callback, never started: never runs
 *   hwqs[5]  a hash element's work: runs once with key 5
 *   hwqs[6]  started, then deleted and inserted again: the work is
 *            cancelled; the new element's start is -EINVAL
 *   lwqs[4]  an LRU hash element's work: runs once with key 4
 *
 * Once the work has run, the maps hold the same numbers on Linux and on pyxdp.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

#define __ksym __attribute__((section(".ksyms")))
#define RERUNS 3

/* include/uapi/linux/bpf.h (6.10 and later) */
struct bpf_wq {
	__u64 __opaque[2];
} __attribute__((aligned(8)));

extern int bpf_wq_init(struct bpf_wq *wq, void *p__map, unsigned int flags) __ksym;
extern int bpf_wq_set_callback_impl(struct bpf_wq *wq,
				    int (callback_fn)(void *map, int *key, void *value),
				    unsigned int flags, void *aux__prog) __ksym;
extern int bpf_wq_start(struct bpf_wq *wq, unsigned int flags) __ksym;

struct elem {
	__u64 runs;
	struct bpf_wq w;
	__u32 key_seen;
	__u32 target;
	__s64 rc[8];
	__s64 cb_rc[2];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct elem);
	__uint(max_entries, 4);
} wqs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct elem);
	__uint(max_entries, 8);
} hwqs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, __u32);
	__type(value, struct elem);
	__uint(max_entries, 8);
} lwqs SEC(".maps");

/* Count, note the key, start again until target runs. */
static int wq_cb(void *map, int *key, void *value)
{
	struct elem *e = value;

	e->runs++;
	e->key_seen = *key;
	if (e->runs < e->target)
		e->cb_rc[0] = bpf_wq_start(&e->w, 0);
	e->cb_rc[1] = bpf_wq_init(&e->w, map, 0);
	return 0;
}

/* The callback set last on wqs[2]. */
static int other_cb(void *map, int *key, void *value)
{
	struct elem *e = value;

	e->runs++;
	e->key_seen = *key;
	e->cb_rc[1] = 2;
	return 0;
}

static __always_inline struct elem *array_elem(__u32 k)
{
	return bpf_map_lookup_elem(&wqs, &k);
}

static __always_inline struct elem *new_elem(void *map, __u32 k)
{
	struct elem zero = {};

	if (bpf_map_update_elem(map, &k, &zero, BPF_NOEXIST))
		return 0;
	return bpf_map_lookup_elem(map, &k);
}

SEC("xdp")
int xdp_wq(struct xdp_md *ctx)
{
	struct elem zero = {};
	struct elem *e;
	__u32 k;

	e = array_elem(0);
	if (!e)
		return XDP_ABORTED;
	e->target = RERUNS;
	e->rc[0] = bpf_wq_init(&e->w, &wqs, 1);
	e->rc[1] = bpf_wq_init(&e->w, &wqs, 0);
	e->rc[2] = bpf_wq_init(&e->w, &wqs, 0);
	e->rc[3] = bpf_wq_start(&e->w, 0);
	e->rc[4] = bpf_wq_set_callback_impl(&e->w, wq_cb, 1, 0);
	e->rc[5] = bpf_wq_set_callback_impl(&e->w, wq_cb, 0, 0);
	e->rc[6] = bpf_wq_start(&e->w, 1);
	e->rc[7] = bpf_wq_start(&e->w, 0);

	k = 1;
	e = array_elem(k);
	if (!e)
		return XDP_ABORTED;
	bpf_wq_init(&e->w, &wqs, 0);
	bpf_wq_set_callback_impl(&e->w, wq_cb, 0, 0);
	bpf_wq_start(&e->w, 0);
	zero.rc[0] = bpf_map_update_elem(&wqs, &k, &zero, BPF_ANY);
	e->rc[1] = bpf_wq_start(&e->w, 0);
	e->rc[0] = zero.rc[0];

	e = array_elem(2);
	if (!e)
		return XDP_ABORTED;
	e->rc[0] = bpf_wq_init(&e->w, &wqs, 0);
	e->rc[1] = bpf_wq_set_callback_impl(&e->w, wq_cb, 0, 0);
	e->rc[2] = bpf_wq_start(&e->w, 0);
	e->rc[3] = bpf_wq_set_callback_impl(&e->w, other_cb, 0, 0);

	e = array_elem(3);
	if (!e)
		return XDP_ABORTED;
	e->rc[0] = bpf_wq_init(&e->w, &wqs, 0);
	e->rc[1] = bpf_wq_set_callback_impl(&e->w, wq_cb, 0, 0);

	e = new_elem(&hwqs, 5);
	if (!e)
		return XDP_ABORTED;
	e->rc[0] = bpf_wq_init(&e->w, &hwqs, 0);
	e->rc[1] = bpf_wq_set_callback_impl(&e->w, wq_cb, 0, 0);
	e->rc[2] = bpf_wq_start(&e->w, 0);

	e = new_elem(&hwqs, 6);
	if (!e)
		return XDP_ABORTED;
	bpf_wq_init(&e->w, &hwqs, 0);
	bpf_wq_set_callback_impl(&e->w, wq_cb, 0, 0);
	bpf_wq_start(&e->w, 0);
	k = 6;
	zero.rc[0] = bpf_map_delete_elem(&hwqs, &k);
	e = new_elem(&hwqs, 6);
	if (!e)
		return XDP_ABORTED;
	e->rc[0] = zero.rc[0];
	e->rc[1] = bpf_wq_start(&e->w, 0);

	e = new_elem(&lwqs, 4);
	if (!e)
		return XDP_ABORTED;
	e->rc[0] = bpf_wq_init(&e->w, &lwqs, 0);
	e->rc[1] = bpf_wq_set_callback_impl(&e->w, wq_cb, 0, 0);
	e->rc[2] = bpf_wq_start(&e->w, 0);
	return XDP_PASS;
}

LICENSE("GPL");

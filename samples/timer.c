// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * timer - bpf_timer in array and hash map values, armed from XDP.
 *
 * One run of xdp_timer arms these timers (every helper's return code goes
 * into the element's rc[]); their callbacks count fires, note the key they
 * were given and their own helpers' return codes in cb_rc[]:
 *
 *   timers[0]  CLOCK_MONOTONIC, init twice (-EBUSY), start before a callback
 *              (-EINVAL), start with an unknown flag (-EINVAL), then 1 us; the
 *              callback re-arms it until it has fired 5 times and tries to
 *              cancel itself (-EDEADLK)
 *   timers[1]  CLOCK_REALTIME, 1 s, cancelled while queued (1), cancelled
 *              again (0), started after the cancel dropped its callback
 *              (-EINVAL); init with clock 5 and with flags 16 (-EINVAL)
 *   timers[2]  CLOCK_BOOTTIME, 1 s, re-armed at once to absolute time 0
 *              (BPF_F_TIMER_ABS): fires once
 *   timers[3]  armed for 1 s, then the element is overwritten by
 *              bpf_map_update_elem: the timer is freed (start: -EINVAL), init
 *              again, 1 us with BPF_F_TIMER_CPU_PIN: fires once
 *   htimers[7] a hash element's timer, 1 us; its callback cancels
 *              htimers[9]'s timer (1: it was queued)
 *   htimers[8] armed for 1 s, then deleted and inserted again: the new
 *              element's timer is not initialised (start: -EINVAL); init, and
 *              armed for 1 s again
 *   htimers[9] armed for 1 s (cancelled by htimers[7]'s callback)
 *
 * After a few milliseconds the maps hold the same numbers on Linux and on
 * pyxdp (fires, keys seen, return codes); nothing depends on clock values.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

#define CLOCK_REALTIME 0
#define CLOCK_MONOTONIC 1
#define CLOCK_BOOTTIME 7
#define BPF_F_TIMER_ABS 1
#define BPF_F_TIMER_CPU_PIN 2
#define LONG_NS 1000000000ULL
#define SHORT_NS 1000ULL
#define REARMS 5

static long (* const bpf_timer_init)(struct bpf_timer *timer, void *map,
				     __u64 flags) = (void *) 169;
static long (* const bpf_timer_set_callback)(struct bpf_timer *timer,
					     void *callback_fn) = (void *) 170;
static long (* const bpf_timer_start)(struct bpf_timer *timer, __u64 nsecs,
				      __u64 flags) = (void *) 171;
static long (* const bpf_timer_cancel)(struct bpf_timer *timer) = (void *) 172;

struct elem {
	struct bpf_timer t;
	__u64 fires;
	__u32 key_seen;
	__u32 target;
	__s64 rc[8];
	__s64 cb_rc[4];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct elem);
	__uint(max_entries, 4);
} timers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct elem);
	__uint(max_entries, 16);
} htimers SEC(".maps");

/* Array timers: count, note the key, re-arm until target fires. */
static int array_cb(void *map, __u32 *key, struct elem *e)
{
	e->fires++;
	e->key_seen = *key;
	if (e->fires < e->target)
		e->cb_rc[0] = bpf_timer_start(&e->t, SHORT_NS, 0);
	e->cb_rc[1] = bpf_timer_cancel(&e->t);
	return 0;
}

/* htimers[7]: count, note the key, cancel htimers[9]'s timer. */
static int hash_cb(void *map, __u32 *key, struct elem *e)
{
	__u32 k9 = 9;
	struct elem *other;

	e->fires++;
	e->key_seen = *key;
	other = bpf_map_lookup_elem(&htimers, &k9);
	if (other)
		e->cb_rc[0] = bpf_timer_cancel(&other->t);
	return 0;
}

static __always_inline struct elem *array_elem(__u32 k)
{
	return bpf_map_lookup_elem(&timers, &k);
}

static __always_inline struct elem *hash_elem(__u32 k)
{
	struct elem zero = {};

	if (bpf_map_update_elem(&htimers, &k, &zero, BPF_NOEXIST))
		return 0;
	return bpf_map_lookup_elem(&htimers, &k);
}

SEC("xdp")
int xdp_timer(struct xdp_md *ctx)
{
	struct elem zero = {};
	struct elem *e;
	__u32 k;

	e = array_elem(0);
	if (!e)
		return XDP_ABORTED;
	e->target = REARMS;
	e->rc[0] = bpf_timer_init(&e->t, &timers, CLOCK_MONOTONIC);
	e->rc[1] = bpf_timer_init(&e->t, &timers, CLOCK_MONOTONIC);
	e->rc[2] = bpf_timer_start(&e->t, SHORT_NS, 0);
	e->rc[3] = bpf_timer_set_callback(&e->t, array_cb);
	e->rc[4] = bpf_timer_start(&e->t, SHORT_NS, 4);
	e->rc[5] = bpf_timer_start(&e->t, SHORT_NS, 0);

	e = array_elem(1);
	if (!e)
		return XDP_ABORTED;
	e->rc[0] = bpf_timer_init(&e->t, &timers, CLOCK_REALTIME);
	e->rc[1] = bpf_timer_set_callback(&e->t, array_cb);
	e->rc[2] = bpf_timer_start(&e->t, LONG_NS, 0);
	e->rc[3] = bpf_timer_cancel(&e->t);
	e->rc[4] = bpf_timer_cancel(&e->t);
	e->rc[5] = bpf_timer_start(&e->t, SHORT_NS, 0);

	e = array_elem(2);
	if (!e)
		return XDP_ABORTED;
	e->rc[0] = bpf_timer_init(&e->t, &timers, 5);
	e->rc[1] = bpf_timer_init(&e->t, &timers, 16 | CLOCK_BOOTTIME);
	e->rc[2] = bpf_timer_init(&e->t, &timers, CLOCK_BOOTTIME);
	e->rc[3] = bpf_timer_set_callback(&e->t, array_cb);
	e->rc[4] = bpf_timer_start(&e->t, LONG_NS, 0);
	e->rc[5] = bpf_timer_start(&e->t, 0, BPF_F_TIMER_ABS);

	k = 3;
	e = array_elem(k);
	if (!e)
		return XDP_ABORTED;
	bpf_timer_init(&e->t, &timers, CLOCK_MONOTONIC);
	bpf_timer_set_callback(&e->t, array_cb);
	bpf_timer_start(&e->t, LONG_NS, 0);
	zero.target = 1;
	zero.rc[0] = bpf_map_update_elem(&timers, &k, &zero, BPF_ANY);
	e->rc[1] = bpf_timer_start(&e->t, SHORT_NS, 0);
	e->rc[2] = bpf_timer_init(&e->t, &timers, CLOCK_MONOTONIC);
	e->rc[3] = bpf_timer_set_callback(&e->t, array_cb);
	e->rc[4] = bpf_timer_start(&e->t, SHORT_NS, BPF_F_TIMER_CPU_PIN);
	e->rc[0] = zero.rc[0];

	e = hash_elem(9);
	if (!e)
		return XDP_ABORTED;
	e->rc[0] = bpf_timer_init(&e->t, &htimers, CLOCK_MONOTONIC);
	e->rc[1] = bpf_timer_set_callback(&e->t, array_cb);
	e->rc[2] = bpf_timer_start(&e->t, LONG_NS, 0);

	e = hash_elem(7);
	if (!e)
		return XDP_ABORTED;
	e->rc[0] = bpf_timer_init(&e->t, &htimers, CLOCK_MONOTONIC);
	e->rc[1] = bpf_timer_set_callback(&e->t, hash_cb);
	e->rc[2] = bpf_timer_start(&e->t, SHORT_NS, 0);

	e = hash_elem(8);
	if (!e)
		return XDP_ABORTED;
	bpf_timer_init(&e->t, &htimers, CLOCK_MONOTONIC);
	bpf_timer_set_callback(&e->t, array_cb);
	bpf_timer_start(&e->t, LONG_NS, 0);
	k = 8;
	zero.rc[0] = bpf_map_delete_elem(&htimers, &k);
	e = hash_elem(8);
	if (!e)
		return XDP_ABORTED;
	e->rc[0] = zero.rc[0];
	e->rc[1] = bpf_timer_start(&e->t, SHORT_NS, 0);
	e->rc[2] = bpf_timer_init(&e->t, &htimers, CLOCK_MONOTONIC);
	e->rc[3] = bpf_timer_set_callback(&e->t, array_cb);
	e->rc[4] = bpf_timer_start(&e->t, LONG_NS, 0);
	return XDP_PASS;
}

LICENSE("GPL");

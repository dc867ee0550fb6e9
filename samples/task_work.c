// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * task_work - bpf_task_work callbacks (Linux 6.18) scheduled from XDP on the
 * task that runs the program's BPF_PROG_TEST_RUN: the callback runs when that
 * task returns to user space, so its map writes are there once the syscall
 * returns.
 *
 * The task is the thread whose id user space writes into cfg[0]. Each
 * kfunc's return code goes into its element's rc[]; callbacks count their runs
 * and note the key they were given:
 *
 *   tws[0]   scheduled with _signal (0), then with _resume while pending
 *            (-EBUSY): runs once
 *   tws[1]   scheduled, then the element is overwritten by
 *            bpf_map_update_elem (the work is cancelled), then scheduled
 *            again (0): runs once
 *   tws[2]   never scheduled: never runs
 *   htws[5]  a hash element's work (_resume): runs once with key 5
 *   htws[6]  scheduled, then the element is deleted: never runs
 *   ltws[4]  an LRU hash element's work (_signal): runs once with key 4
 *
 * A second run schedules them again (the callbacks ran: nothing is pending).
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

#define __ksym __attribute__((section(".ksyms")))
#define EBUSY 16

/* Defined, not declared: libbpf matches a kfunc's prototype against the kernel's,
 * where a forward declaration is no struct. */
struct task_struct { int pid; };
struct bpf_map { int id; };

/* include/uapi/linux/bpf.h (6.18) */
struct bpf_task_work {
	__u64 __opaque;
} __attribute__((aligned(8)));

typedef int (*task_work_cb)(struct bpf_map *map, void *key, void *value);

extern int bpf_task_work_schedule_signal_impl(struct task_struct *task,
					      struct bpf_task_work *tw, void *map__map,
					      task_work_cb callback, void *aux__prog) __ksym;
extern int bpf_task_work_schedule_resume_impl(struct task_struct *task,
					      struct bpf_task_work *tw, void *map__map,
					      task_work_cb callback, void *aux__prog) __ksym;
extern struct task_struct *bpf_task_from_pid(__s32 pid) __ksym;
extern void bpf_task_release(struct task_struct *p) __ksym;

struct elem {
	__u64 runs;
	struct bpf_task_work tw;
	__u32 key_seen;
	__u32 pad;
	__s64 rc[3];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct elem);
	__uint(max_entries, 3);
} tws SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct elem);
	__uint(max_entries, 8);
} htws SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, __u32);
	__type(value, struct elem);
	__uint(max_entries, 8);
} ltws SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 1);
} cfg SEC(".maps");

static int count(struct bpf_map *map, void *key, void *value)
{
	struct elem *e = value;

	e->runs++;
	e->key_seen = *(__u32 *)key;
	return 0;
}

static struct elem *elem_of(void *map, __u32 key)
{
	struct elem zero = {};

	bpf_map_update_elem(map, &key, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(map, &key);
}

SEC("xdp")
int xdp_task_work(struct xdp_md *ctx)
{
	struct elem zero = {};
	struct task_struct *task;
	struct elem *e;
	__u32 k = 0, *pid;

	pid = bpf_map_lookup_elem(&cfg, &k);
	if (!pid)
		return XDP_ABORTED;
	task = bpf_task_from_pid(*pid);
	if (!task)
		return XDP_ABORTED;

	e = bpf_map_lookup_elem(&tws, &k);
	if (e) {
		e->rc[0] = bpf_task_work_schedule_signal_impl(task, &e->tw, &tws, count, 0);
		e->rc[1] = bpf_task_work_schedule_resume_impl(task, &e->tw, &tws, count, 0);
	}
	k = 1;
	e = bpf_map_lookup_elem(&tws, &k);
	if (e) {
		zero.rc[0] = bpf_task_work_schedule_resume_impl(task, &e->tw, &tws, count, 0);
		zero.runs = e->runs;
		bpf_map_update_elem(&tws, &k, &zero, BPF_ANY);
		e->rc[1] = bpf_task_work_schedule_resume_impl(task, &e->tw, &tws, count, 0);
	}
	e = elem_of(&htws, 5);
	if (e)
		e->rc[0] = bpf_task_work_schedule_resume_impl(task, &e->tw, &htws, count, 0);
	e = elem_of(&htws, 6);
	if (e) {
		e->rc[0] = bpf_task_work_schedule_signal_impl(task, &e->tw, &htws, count, 0);
		k = 6;
		bpf_map_delete_elem(&htws, &k);
	}
	e = elem_of(&ltws, 4);
	if (e)
		e->rc[0] = bpf_task_work_schedule_signal_impl(task, &e->tw, &ltws, count, 0);
	bpf_task_release(task);
	return XDP_PASS;
}

LICENSE("GPL");

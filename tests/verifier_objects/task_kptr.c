// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * task_kptr - referenced kptrs to kernel structs: a struct task_struct and a
 * struct cgroup kept in a map value's __kptr fields with bpf_kptr_xchg.
 *
 * xdp_task_kptr reads a struct job from the packet's first 16 bytes and
 * works on slot job.slot of the map "held":
 *   op 0  bpf_task_from_pid(job.id) exchanged into the slot's task field;
 *         the old task (if any) has its pid recorded in seen and is released
 *   op 1  the task taken out (NULL exchanged in): its pid and tgid recorded,
 *         then released
 *   op 2  the field's plain load (an RCU pointer): its pid recorded, then
 *         bpf_task_acquire of it, its tgid recorded and released
 *   op 3  bpf_cgroup_from_id(job.id) exchanged into the cgroup field; the old
 *         one's level recorded and released
 *   op 4  the cgroup taken out: its level and kn->id recorded, released
 *   op 5  op 0 with bpf_task_from_vpid (the caller's pid namespace)
 *   op 6  the cgroup field's plain load: bpf_cgroup_acquire of it, its level
 *         and kn->id recorded, released
 * The verdict says what happened: XDP_TX when an old object was there (or
 * the plain load found one), XDP_PASS when not, XDP_DROP when the lookup
 * gave NULL, XDP_ABORTED for a bad job.
 *
 * The xdp_task_kptr_* and xdp_cpumask_* programs after it are the usual
 * mistakes; each one's Linux 6.18 verdict is recorded in tests/test_verifier.py.
 *
 * Built with (from the repository's top directory):
 *   clang-19 -target bpf -O2 -g -Wall -Isamples/include -mcpu=v3 \
 *     -c tests/verifier_objects/task_kptr.c -o tests/verifier_objects/task_kptr.o
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"
#include "pyxdp_kfuncs.h"

#define __pai __attribute__((preserve_access_index))

struct task_struct {
	int pid;
	int tgid;
} __pai;

struct kernfs_node {
	__u64 id;
} __pai;

struct cgroup {
	int level;
	struct kernfs_node *kn;
} __pai;

/* kernel/bpf/cpumask.c's struct, opaque (a __kptr's struct must be complete) */
struct bpf_cpumask {
	__u64 opaque;
};

extern struct task_struct *bpf_task_from_pid(__s32 pid) __ksym;
extern struct task_struct *bpf_task_acquire(struct task_struct *p) __ksym;
extern void bpf_task_release(struct task_struct *p) __ksym;
extern struct task_struct *bpf_task_from_vpid(__s32 vpid) __ksym;
extern struct cgroup *bpf_cgroup_from_id(__u64 cgid) __ksym;
extern struct cgroup *bpf_cgroup_acquire(struct cgroup *cgrp) __ksym;
extern void bpf_cgroup_release(struct cgroup *cgrp) __ksym;
extern void bpf_cpumask_release(struct bpf_cpumask *cpumask) __ksym;
extern long bpf_task_under_cgroup(struct task_struct *task, struct cgroup *ancestor) __ksym;
enum pid_type { PIDTYPE_PID, PIDTYPE_TGID, PIDTYPE_PGID, PIDTYPE_SID, PIDTYPE_MAX };
extern int bpf_send_signal_task(struct task_struct *task, int sig, enum pid_type type,
				__u64 value) __ksym;

struct held {
	struct task_struct __kptr *task;
	struct cgroup __kptr *cgrp;
	__s64 seen;
	__s64 extra;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct held);
} held SEC(".maps");

struct masks {
	struct bpf_cpumask __kptr *mask;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct masks);
} masks SEC(".maps");

struct job {
	__u64 id;
	__u32 slot;
	__u32 op;
};

SEC("xdp")
int xdp_task_kptr(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	struct job *job = data;
	struct task_struct *t, *old;
	struct cgroup *c, *oldc;
	struct held *v;
	__u32 slot;

	if ((void *)(job + 1) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	slot = job->slot;
	v = bpf_map_lookup_elem(&held, &slot);
	if (!v)
		return XDP_ABORTED;
	switch (job->op) {
	case 0:
	case 5:
		t = job->op ? bpf_task_from_vpid(job->id) : bpf_task_from_pid(job->id);
		if (!t)
			return XDP_DROP;
		old = bpf_kptr_xchg(&v->task, t);
		if (!old)
			return XDP_PASS;
		v->seen = old->pid;
		bpf_task_release(old);
		return XDP_TX;
	case 1:
		old = bpf_kptr_xchg(&v->task, NULL);
		if (!old)
			return XDP_PASS;
		v->seen = old->pid;
		v->extra = old->tgid;
		bpf_task_release(old);
		return XDP_TX;
	case 2:
		t = v->task;
		if (!t)
			return XDP_PASS;
		v->seen = t->pid;
		old = bpf_task_acquire(t);
		if (old) {
			v->extra = old->tgid;
			bpf_task_release(old);
		}
		return XDP_TX;
	case 3:
		c = bpf_cgroup_from_id(job->id);
		if (!c)
			return XDP_DROP;
		oldc = bpf_kptr_xchg(&v->cgrp, c);
		if (!oldc)
			return XDP_PASS;
		v->seen = oldc->level;
		bpf_cgroup_release(oldc);
		return XDP_TX;
	case 4:
		oldc = bpf_kptr_xchg(&v->cgrp, NULL);
		if (!oldc)
			return XDP_PASS;
		v->seen = oldc->level;
		v->extra = oldc->kn->id;
		bpf_cgroup_release(oldc);
		return XDP_TX;
	case 6:
		c = v->cgrp;
		if (!c)
			return XDP_PASS;
		oldc = bpf_cgroup_acquire(c);
		if (!oldc)
			return XDP_DROP;
		v->seen = oldc->level;
		v->extra = oldc->kn->id;
		bpf_cgroup_release(oldc);
		return XDP_TX;
	}
	return XDP_ABORTED;
}

static __always_inline struct held *held0(void)
{
	__u32 k = 0;

	return bpf_map_lookup_elem(&held, &k);
}

/* the task taken out is never released */
SEC("xdp")
int xdp_task_kptr_leak(struct xdp_md *ctx)
{
	struct held *v = held0();
	struct task_struct *old;

	if (!v)
		return XDP_PASS;
	old = bpf_kptr_xchg(&v->task, NULL);
	return old ? XDP_DROP : XDP_PASS;
}

/* the plain load (an RCU pointer, not referenced) given to the map */
SEC("xdp")
int xdp_task_kptr_rcu_in(struct xdp_md *ctx)
{
	struct held *v = held0();
	struct task_struct *t, *old;

	if (!v)
		return XDP_PASS;
	t = v->task;
	if (!t)
		return XDP_PASS;
	old = bpf_kptr_xchg(&v->task, t);
	if (old)
		bpf_task_release(old);
	return XDP_PASS;
}

/* a cgroup exchanged into the task field */
SEC("xdp")
int xdp_task_kptr_wrong_type(struct xdp_md *ctx)
{
	struct held *v = held0();
	struct cgroup *c;
	struct task_struct *old;

	if (!v)
		return XDP_PASS;
	c = bpf_cgroup_from_id(1);
	if (!c)
		return XDP_PASS;
	old = bpf_kptr_xchg(&v->task, c);
	if (old)
		bpf_task_release(old);
	return XDP_PASS;
}

/* the task used after the map took it */
SEC("xdp")
int xdp_task_kptr_use_after(struct xdp_md *ctx)
{
	struct held *v = held0();
	struct task_struct *t, *old;

	if (!v)
		return XDP_PASS;
	t = bpf_task_from_pid(1);
	if (!t)
		return XDP_PASS;
	old = bpf_kptr_xchg(&v->task, t);
	if (old)
		bpf_task_release(old);
	return t->pid == 1 ? XDP_DROP : XDP_PASS;
}

/* the old task released without its NULL check */
SEC("xdp")
int xdp_task_kptr_maybe_null(struct xdp_md *ctx)
{
	struct held *v = held0();

	if (!v)
		return XDP_PASS;
	bpf_task_release(bpf_kptr_xchg(&v->task, NULL));
	return XDP_PASS;
}

/* the plain load released */
SEC("xdp")
int xdp_task_kptr_release_rcu(struct xdp_md *ctx)
{
	struct held *v = held0();
	struct task_struct *t;

	if (!v)
		return XDP_PASS;
	t = v->task;
	if (t)
		bpf_task_release(t);
	return XDP_PASS;
}

/* the plain loads given to a KF_RCU kfunc */
SEC("xdp")
int xdp_task_kptr_under_cgroup(struct xdp_md *ctx)
{
	struct held *v = held0();
	struct task_struct *t;
	struct cgroup *c;

	if (!v)
		return XDP_PASS;
	t = v->task;
	c = v->cgrp;
	if (!t || !c)
		return XDP_PASS;
	return bpf_task_under_cgroup(t, c) ? XDP_DROP : XDP_PASS;
}

/* a plain load given to a KF_TRUSTED_ARGS kfunc */
SEC("xdp")
int xdp_task_kptr_signal_rcu(struct xdp_md *ctx)
{
	struct held *v = held0();
	struct task_struct *t;

	if (!v)
		return XDP_PASS;
	t = v->task;
	if (!t)
		return XDP_PASS;
	return bpf_send_signal_task(t, 0, 0, 0) ? XDP_DROP : XDP_PASS;
}

/* a task taken out of one element's field and put into another's */
SEC("xdp")
int xdp_task_kptr_move(struct xdp_md *ctx)
{
	struct held *v = held0(), *w;
	struct task_struct *t;
	__u32 k = 1;

	w = bpf_map_lookup_elem(&held, &k);
	if (!v || !w)
		return XDP_PASS;
	t = bpf_kptr_xchg(&v->task, NULL);
	if (!t)
		return XDP_PASS;
	t = bpf_kptr_xchg(&w->task, t);
	if (t)
		bpf_task_release(t);
	return XDP_TX;
}

/* a struct bpf_cpumask taken out of its field: XDP may not release it */
SEC("xdp")
int xdp_cpumask_kptr_release(struct xdp_md *ctx)
{
	__u32 k = 0;
	struct masks *m = bpf_map_lookup_elem(&masks, &k);
	struct bpf_cpumask *old;

	if (!m)
		return XDP_PASS;
	old = bpf_kptr_xchg(&m->mask, NULL);
	if (old)
		bpf_cpumask_release(old);
	return XDP_PASS;
}

/* a struct bpf_cpumask's field only read: a NULL check of the RCU pointer */
SEC("xdp")
int xdp_cpumask_kptr_load(struct xdp_md *ctx)
{
	__u32 k = 0;
	struct masks *m = bpf_map_lookup_elem(&masks, &k);

	if (!m)
		return XDP_PASS;
	return m->mask ? XDP_DROP : XDP_PASS;
}

LICENSE("GPL");

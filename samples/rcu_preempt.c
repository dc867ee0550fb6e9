// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * rcu_preempt - bpf_rcu_read_lock/_unlock and bpf_preempt_disable/_enable
 * around map updates: an RCU read section, preemption disabled twice
 * (nested) and enabled twice, a section opened on one path and closed on
 * both. counts[0] counts runs, counts[1] packets longer than 100 bytes,
 * counts[2] adds the packet's first byte; the verdict is XDP_PASS.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

#define __ksym __attribute__((section(".ksyms")))

extern void bpf_rcu_read_lock(void) __ksym;
extern void bpf_rcu_read_unlock(void) __ksym;
extern void bpf_preempt_disable(void) __ksym;
extern void bpf_preempt_enable(void) __ksym;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

static __always_inline void add(__u32 k, __u64 v)
{
	__u64 *c = bpf_map_lookup_elem(&counts, &k);

	if (c)
		*c += v;
}

SEC("xdp")
int xdp_rcu_preempt(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *p = data;

	bpf_rcu_read_lock();
	add(0, 1);
	bpf_preempt_disable();
	bpf_preempt_disable();
	if (data_end - data > 100)
		add(1, 1);
	bpf_preempt_enable();
	bpf_preempt_enable();
	bpf_rcu_read_unlock();

	if (p + 1 <= (__u8 *)data_end) {
		bpf_rcu_read_lock();
		add(2, *p);
		bpf_rcu_read_unlock();
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";

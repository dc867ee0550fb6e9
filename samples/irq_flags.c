// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * irq_flags - bpf_local_irq_save/_restore around map updates: one IRQ
 * state saved into a stack slot and restored, two nested ones restored last
 * saved first, and a state saved on one path and restored on it while the
 * other path saves none. counts[0] counts runs, counts[1] packets longer than
 * 100 bytes, counts[2] adds the packet's first byte; the verdict is XDP_PASS,
 * or XDP_DROP for a packet whose first byte is 0xff.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

#define __ksym __attribute__((section(".ksyms")))

extern void bpf_local_irq_save(unsigned long *flags__irq_flag) __ksym;
extern void bpf_local_irq_restore(unsigned long *flags__irq_flag) __ksym;

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
int xdp_irq_flags(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *p = data;
	unsigned long outer, inner, once;
	int verdict = XDP_PASS;

	bpf_local_irq_save(&outer);
	add(0, 1);
	bpf_local_irq_save(&inner);
	if (data_end - data > 100)
		add(1, 1);
	bpf_local_irq_restore(&inner);
	bpf_local_irq_restore(&outer);

	if (p + 1 <= (__u8 *)data_end) {
		bpf_local_irq_save(&once);
		add(2, *p);
		if (*p == 0xff)
			verdict = XDP_DROP;
		bpf_local_irq_restore(&once);
	}
	return verdict;
}

char _license[] SEC("license") = "GPL";

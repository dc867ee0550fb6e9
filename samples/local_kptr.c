// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * local_kptr - objects a program allocates (bpf_obj_new), keeps in a map
 * value's __kptr field (bpf_kptr_xchg) and frees (bpf_obj_drop). Each packet
 * picks a slot by its first byte (slot 0 for an empty packet) and makes a
 * struct flow of its length and first byte. A packet whose first byte is
 * 0xff takes the slot's object out and drops it (XDP_DROP); any other puts
 * its object in, and the one it replaces is counted (packets, bytes) and
 * dropped (XDP_PASS). The object in the slot is also read in place first
 * (a plain load of the __kptr field: an RCU pointer, NULL checked).
 * xdp_local_kptr_global keeps the last packet's object in a global __kptr
 * variable instead (.bss) and adds the length of the one it replaces to a
 * global counter.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"
#include "pyxdp_kfuncs.h"

#define SLOTS 4

struct flow {
	__u64 packets;
	__u32 len;
	__u8 first;
};

struct slot {
	__u64 replaced;
	__u64 bytes;
	__u64 peeked;
	struct flow __kptr *flow;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLOTS);
	__type(key, __u32);
	__type(value, struct slot);
} slots SEC(".maps");

SEC("xdp")
int xdp_local_kptr(struct xdp_md *ctx)
{
	__u8 *p = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct flow *f, *old, *cur;
	struct slot *s;
	__u32 k = 0;
	__u8 first = 0;

	if (p + 1 <= end)
		first = *p;
	k = first % SLOTS;
	s = bpf_map_lookup_elem(&slots, &k);
	if (!s)
		return XDP_ABORTED;
	cur = s->flow;
	if (cur)
		s->peeked += cur->first;
	if (first == 0xff) {
		old = bpf_kptr_xchg(&s->flow, NULL);
		if (!old)
			return XDP_PASS;
		bpf_obj_drop(old);
		return XDP_DROP;
	}
	f = bpf_obj_new(struct flow);
	if (!f)
		return XDP_ABORTED;
	f->packets = 1;
	f->len = end - p;
	f->first = first;
	old = bpf_kptr_xchg(&s->flow, f);
	if (old) {
		s->replaced += old->packets;
		s->bytes += old->len;
		bpf_obj_drop(old);
	}
	return XDP_PASS;
}

struct flow __kptr *last;
__u64 last_bytes;

SEC("xdp")
int xdp_local_kptr_global(struct xdp_md *ctx)
{
	struct flow *f = bpf_obj_new(struct flow), *old;

	if (!f)
		return XDP_ABORTED;
	f->len = ctx->data_end - ctx->data;
	old = bpf_kptr_xchg(&last, f);
	if (old) {
		last_bytes += old->len;
		bpf_obj_drop(old);
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";

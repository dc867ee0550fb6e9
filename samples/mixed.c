// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * mixed - an object as xdp-bench or a selftest builds it: XDP programs next to
 * a tc classifier, tracepoint and fentry programs, and maps libbpf sizes.
 *
 *   xdp_count           (xdp)                  counts packets and bytes, reports every
 *                                              packet's length to a ring buffer and a
 *                                              perf event array, passes;
 *   xdp_legacy          (xdp_devmap/legacy)    a pre-1.0 section name: libbpf 1.x knows
 *                                              no such prefix, so this is a plain XDP
 *                                              program, not a devmap one;
 *   xdp_off             (?xdp)                 autoload off;
 *   tc_count            (tc)                   the same count for skbs (sched_cls);
 *   tp_exception        (tp_btf/xdp_exception) counts XDP exceptions per action and
 *                                              keeps the device's ifindex, read
 *                                              through a CO-RE struct net_device;
 *   tp_redirect         (tracepoint/xdp/xdp_redirect) counts redirects;
 *   unknown             (pyxdp_unknown)        a section libbpf knows no type for.
 *
 * events_perf has no max_entries (libbpf makes it one slot per possible CPU)
 * and events_rb asks for 5000 bytes (libbpf rounds up to 8192).
 */
#include "pyxdp_bpf.h"
#include "pyxdp_core.h"

struct counters {
	__u64 xdp_packets;
	__u64 xdp_bytes;
	__u64 tc_packets;
	__u64 exceptions[5];
	__u64 redirects;
	__u32 exception_ifindex;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct counters);
	__uint(max_entries, 1);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} events_perf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 5000);
} events_rb SEC(".maps");

struct net_device___mixed {
	int ifindex;
} __core;

static __always_inline struct counters *get_counters(void)
{
	__u32 key = 0;

	return bpf_map_lookup_elem(&counters, &key);
}

SEC("xdp")
int xdp_count(struct xdp_md *ctx)
{
	struct counters *c = get_counters();
	__u32 len = ctx->data_end - ctx->data;

	if (!c)
		return XDP_ABORTED;
	__sync_fetch_and_add(&c->xdp_packets, 1);
	__sync_fetch_and_add(&c->xdp_bytes, len);
	bpf_ringbuf_output(&events_rb, &len, sizeof(len), 0);
	bpf_perf_event_output(ctx, &events_perf, BPF_F_CURRENT_CPU, &len, sizeof(len));
	return XDP_PASS;
}

SEC("xdp_devmap/legacy")
int xdp_legacy(struct xdp_md *ctx)
{
	return XDP_DROP;
}

SEC("?xdp")
int xdp_off(struct xdp_md *ctx)
{
	return XDP_TX;
}

SEC("tc")
int tc_count(struct __sk_buff *skb)
{
	struct counters *c = get_counters();

	if (c)
		__sync_fetch_and_add(&c->tc_packets, 1);
	return 0; /* TC_ACT_OK */
}

SEC("tp_btf/xdp_exception")
int tp_exception(__u64 *ctx)
{
	struct net_device___mixed *dev = (void *)ctx[0];
	__u32 act = ctx[2];
	struct counters *c = get_counters();

	if (!c)
		return 0;
	if (act < 5)
		__sync_fetch_and_add(&c->exceptions[act], 1);
	c->exception_ifindex = dev->ifindex;
	return 0;
}

SEC("tracepoint/xdp/xdp_redirect")
int tp_redirect(void *ctx)
{
	struct counters *c = get_counters();

	if (c)
		__sync_fetch_and_add(&c->redirects, 1);
	return 0;
}

SEC("pyxdp_unknown")
int unknown(void *ctx)
{
	return 0;
}

LICENSE("GPL");

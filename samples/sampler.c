// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * sampler - count every packet, copy one in sample_every to user space.
 *
 * Every packet is counted (per CPU, packets and bytes) and passed on. One
 * packet in sample_every (.rodata, 16 by default; 0 turns sampling off),
 * chosen with a global sequence counter in .bss, is also reported twice,
 * to show both channels to user space:
 *
 *   - as a struct sample_rec in the samples_rb ring buffer
 *     (bpf_ringbuf_reserve/submit): metadata and the first SAMPLE_BYTES
 *     bytes of the packet, copied with bpf_xdp_load_bytes (which also reads
 *     from the fragments of a multi-buffer packet);
 *   - as a perf event on the current CPU's samples_perf ring
 *     (bpf_perf_event_output): a struct perf_sample_hdr, to which the
 *     helper itself appends the packet's first cap_len bytes, because the
 *     flags carry that length in their upper 32 bits (BPF_F_CTXLEN_MASK).
 *
 * The first sample is also announced with bpf_trace_printk, once (an
 * atomic exchange on a .bss flag decides which packet does it).
 */
#include "pyxdp_bpf.h"

/* Packet bytes copied into each sample. */
#define SAMPLE_BYTES 64
/* Entries of samples_perf: at least the number of possible CPUs. */
#define MAX_CPUS 128

struct sample_rec {
	__u64 seq;      /* packet sequence number (0-based) */
	__u64 time_ns;  /* bpf_ktime_get_ns() */
	__u32 ifindex;  /* receiving device */
	__u32 rx_queue; /* receive queue */
	__u32 cpu;      /* CPU that ran the program */
	__u32 pkt_len;  /* length of the whole packet */
	__u32 cap_len;  /* valid bytes in data (the rest is zero) */
	__u32 pad;
	__u8 data[SAMPLE_BYTES];
};

struct perf_sample_hdr {
	__u64 seq;
	__u32 ifindex;
	__u32 pkt_len;
	__u16 cap_len;  /* packet bytes that follow this header */
	__u16 magic;    /* PERF_SAMPLE_MAGIC */
	__u32 pad;
};

#define PERF_SAMPLE_MAGIC 0x5058 /* "PX" */

struct sampler_stats {
	__u64 packets;
	__u64 bytes;
	__u64 sampled;
	__u64 ringbuf_full; /* samples lost: no room in samples_rb */
	__u64 perf_errors;  /* samples lost: bpf_perf_event_output failed */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct sampler_stats);
	__uint(max_entries, 1);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024); /* bytes; a power-of-2 number of pages */
} samples_rb SEC(".maps");

/* Perf event arrays take no BTF types: sizes only. User space opens one
 * perf event (PERF_COUNT_SW_BPF_OUTPUT) per CPU and stores its fd at the
 * CPU's index. */
struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
	__uint(max_entries, MAX_CPUS);
} samples_perf SEC(".maps");

/* One packet in sample_every is sampled (.rodata). */
const volatile __u32 sample_every = 16;

/* Packets seen by all CPUs (.bss). */
__u64 packets_seen;
/* Set by the packet that printed the trace message (.bss). */
__u32 announced;

SEC("xdp")
int xdp_sampler(struct xdp_md *ctx)
{
	__u32 key = 0, pkt_len, cap;
	struct sampler_stats *st;
	struct sample_rec *rec;
	struct perf_sample_hdr hdr = {};
	__u64 seq, flags;
	__u32 every = sample_every;

	pkt_len = bpf_xdp_get_buff_len(ctx);

	st = bpf_map_lookup_elem(&stats, &key);
	if (!st)
		return XDP_PASS;
	st->packets++;
	st->bytes += pkt_len;

	seq = __sync_fetch_and_add(&packets_seen, 1);
	if (every == 0 || seq % every != 0)
		return XDP_PASS;
	st->sampled++;

	/* cap = min(pkt_len, SAMPLE_BYTES), written so the comparison is made
	 * on cap itself: the verifier must see cap <= SAMPLE_BYTES when it is
	 * used as a length below (a bound learnt on a copy would not do). */
	cap = pkt_len;
	barrier_var(cap);
	if (cap > SAMPLE_BYTES)
		cap = SAMPLE_BYTES;

	if (__sync_lock_test_and_set(&announced, 1) == 0)
		bpf_printk("pyxdp sampler: first sample, ifindex %u, %u bytes\n",
			   ctx->ingress_ifindex, pkt_len);

	/* Ring buffer: reserve a record, fill it in place, submit it. */
	rec = bpf_ringbuf_reserve(&samples_rb, sizeof(*rec), 0);
	if (rec) {
		rec->seq = seq;
		rec->time_ns = bpf_ktime_get_ns();
		rec->ifindex = ctx->ingress_ifindex;
		rec->rx_queue = ctx->rx_queue_index;
		rec->cpu = bpf_get_smp_processor_id();
		rec->pkt_len = pkt_len;
		rec->pad = 0;
		__builtin_memset(rec->data, 0, sizeof(rec->data));
		/* The length must be provably within 1..SAMPLE_BYTES. */
		if (cap != 0 && bpf_xdp_load_bytes(ctx, 0, rec->data, cap) == 0)
			rec->cap_len = cap;
		else
			rec->cap_len = 0;
		bpf_ringbuf_submit(rec, 0);
	} else {
		st->ringbuf_full++;
	}

	/* Perf event: the header from the stack, the packet bytes appended
	 * by the helper. */
	hdr.seq = seq;
	hdr.ifindex = ctx->ingress_ifindex;
	hdr.pkt_len = pkt_len;
	hdr.cap_len = cap;
	hdr.magic = PERF_SAMPLE_MAGIC;
	flags = BPF_F_CURRENT_CPU | ((__u64)cap << 32);
	if (bpf_perf_event_output(ctx, &samples_perf, flags, &hdr, sizeof(hdr)))
		st->perf_errors++;

	return XDP_PASS;
}

LICENSE("GPL");

// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * kern_ctx - the kernel's structs behind the context, as Linux's selftests
 * (progs/type_cast.c) read them.
 *
 * xdp_kern_ctx takes the kernel's struct xdp_buff with bpf_cast_to_kern_ctx
 * and records in out (key: the slot numbers below):
 *   0 kctx->rxq->dev->ifindex      1 kctx->rxq->queue_index
 *   2 kctx->frame_sz               3 kctx->data_end - kctx->data
 *   4 kctx->data - kctx->data_hard_start
 *   5 kctx->data_meta <= kctx->data     6 kctx->data is ctx->data
 *   7 kctx->txq is NULL (no egress device)
 *   8 the first byte of the frame read through kctx->data (untrusted memory)
 *   9 h_proto of the frame's struct ethhdr through bpf_rdonly_cast
 *  10 a field of a struct ethhdr at a bad address (a probe read: 0)
 *  11 byte 13 of the frame through bpf_rdonly_cast(data, 0) (void: memory)
 *  12 kctx->data - kctx->data_hard_start after bpf_xdp_adjust_head(ctx, 2)
 *  13 kctx->data is ctx->data after it
 *  14 kctx->rxq->dev->mtu          15 the first 8 bytes of kctx->rxq->dev->name
 *  16 kctx->rxq->dev->nd_net.net->ns.inum (the device's namespace)
 * The verdict is XDP_PASS.
 *
 * The kernel structs are read through CO-RE (preserve_access_index): their
 * offsets come from the kernel's BTF, and bpf_core_type_id_kernel names the
 * kernel's struct ethhdr.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

#define __ksym __attribute__((section(".ksyms")))
#define __pai __attribute__((preserve_access_index))
#define bpf_core_type_id_kernel(type) __builtin_btf_type_id(*(typeof(type) *)0, 1)

struct ns_common {
	unsigned int inum;
} __pai;

struct net {
	struct ns_common ns;
} __pai;

typedef struct {
	struct net *net;
} possible_net_t;

struct net_device {
	int ifindex;
	unsigned int mtu;
	char name[16];
	possible_net_t nd_net;
} __pai;

struct xdp_rxq_info {
	struct net_device *dev;
	__u32 queue_index;
} __pai;

struct xdp_txq_info {
	struct net_device *dev;
} __pai;

struct xdp_buff {
	void *data;
	void *data_end;
	void *data_meta;
	void *data_hard_start;
	struct xdp_rxq_info *rxq;
	struct xdp_txq_info *txq;
	__u32 frame_sz;
} __pai;

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 17);
	__type(key, __u32);
	__type(value, __u64);
} out SEC(".maps");

static __always_inline void put(__u32 slot, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&out, &slot);

	if (p)
		*p = v;
}

SEC("xdp")
int xdp_kern_ctx(struct xdp_md *ctx)
{
	struct xdp_buff *kctx = bpf_cast_to_kern_ctx(ctx);
	struct net_device *dev = kctx->rxq->dev;
	struct ethhdr *eth;
	unsigned char *bytes;
	__u64 name;

	put(0, kctx->rxq->dev->ifindex);
	put(1, kctx->rxq->queue_index);
	put(2, kctx->frame_sz);
	put(3, kctx->data_end - kctx->data);
	put(4, kctx->data - kctx->data_hard_start);
	put(5, kctx->data_meta <= kctx->data);
	put(6, kctx->data == (void *)(long)ctx->data);
	put(7, kctx->txq == NULL);
	put(8, *(unsigned char *)kctx->data);
	eth = bpf_rdonly_cast(kctx->data, bpf_core_type_id_kernel(struct ethhdr));
	put(9, bpf_ntohs(eth->h_proto));
	eth = bpf_rdonly_cast((void *)0x18, bpf_core_type_id_kernel(struct ethhdr));
	put(10, eth->h_proto);
	bytes = bpf_rdonly_cast(kctx->data, 0);
	put(11, bytes[13]);
	if (bpf_xdp_adjust_head(ctx, 2))
		return XDP_ABORTED;
	put(12, kctx->data - kctx->data_hard_start);
	put(13, kctx->data == (void *)(long)ctx->data);
	put(14, dev->mtu);
	__builtin_memcpy(&name, dev->name, sizeof(name));
	put(15, name);
	put(16, dev->nd_net.net->ns.inum);
	return XDP_PASS;
}

LICENSE("GPL");

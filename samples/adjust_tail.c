// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * adjust_tail - answer oversized IPv4 packets with ICMP "fragmentation
 * needed", built in place.
 *
 * An IPv4 packet longer than max_pkt_size bytes (Ethernet header included;
 * 600 by default, set it in .rodata before loading) is turned into the ICMP
 * error its sender would get from a router whose next-hop MTU is too small:
 *
 *   before:            [eth 14][ip 20][payload ......................]
 *   adjust_head(-28):  [28 new][eth 14][ip 20][payload ...............]
 *   adjust_tail:       [28 new][eth 14][ip 20][8 payload]   (70 bytes)
 *   rewrite:           [eth 14][ip 20][icmp 8][ip 20][8 payload]
 *
 * The 28 bytes of headroom become the front of the reply, and the original
 * IP header plus the first 8 bytes of its payload, which RFC 792 asks an
 * ICMP error to quote, are already where the reply needs them. The program
 * then writes a new Ethernet header (MACs swapped), a new IP header (addresses
 * swapped, checksum with bpf_csum_diff) and the ICMP header (type 3, code 4,
 * next-hop MTU; checksum with bpf_csum_diff over the ICMP message), and
 * returns XDP_TX. Every reply is counted in icmp_sent.
 *
 * Packets with IP options, fragments and anything not IPv4 pass untouched.
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

/* Largest frame (Ethernet header included) let through; read-only global
 * data in .rodata, which a loader may patch before loading. */
const volatile __u32 max_pkt_size = 600;

/* Bytes of the offending packet quoted after the ICMP header: its IP header
 * and the first 64 bits of its payload. */
#define QUOTE_LEN (sizeof(struct iphdr) + 8)
/* What the reply adds in front of the quote. */
#define REPLY_HDRS_LEN (sizeof(struct iphdr) + sizeof(struct icmphdr))
/* Size of the whole reply frame. */
#define REPLY_LEN (sizeof(struct ethhdr) + REPLY_HDRS_LEN + QUOTE_LEN)

#define ICMP_MSG_LEN (sizeof(struct icmphdr) + QUOTE_LEN)

/* Number of ICMP errors sent (one slot, updated atomically). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
} icmp_sent SEC(".maps");

static __always_inline void count_reply(void)
{
	__u32 key = 0;
	__u64 *sent = bpf_map_lookup_elem(&icmp_sent, &key);

	if (sent)
		__sync_fetch_and_add(sent, 1);
}

SEC("xdp")
int xdp_icmp_too_big(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *iph = data + sizeof(*eth);
	struct ethhdr orig_eth;
	__be32 orig_saddr, orig_daddr;
	__u32 pkt_len = data_end - data;
	__u32 mtu = max_pkt_size - sizeof(struct ethhdr);
	struct iphdr ip = {};
	struct icmphdr *icmp;

	if ((void *)(iph + 1) > data_end)
		return XDP_PASS;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || iph->ihl != 5)
		return XDP_PASS;
	/* Only whole datagrams: neither a fragment nor "more fragments". */
	if (iph->frag_off & bpf_htons(PYXDP_IP_MF | PYXDP_IP_OFFSET))
		return XDP_PASS;
	if (pkt_len <= max_pkt_size || pkt_len < REPLY_LEN)
		return XDP_PASS;

	/* Keep what the reply needs from the headers about to be overwritten. */
	__builtin_memcpy(&orig_eth, eth, sizeof(orig_eth));
	orig_saddr = iph->saddr;
	orig_daddr = iph->daddr;

	/* Room for the new IP and ICMP headers in front ... */
	if (bpf_xdp_adjust_head(ctx, 0 - (int)REPLY_HDRS_LEN))
		return XDP_PASS;
	/* ... and cut everything after the quote. The packet is now
	 * pkt_len + REPLY_HDRS_LEN bytes long. */
	if (bpf_xdp_adjust_tail(ctx, (int)REPLY_LEN - (int)(pkt_len + REPLY_HDRS_LEN)))
		return XDP_DROP; /* head already moved: the frame is garbage */

	/* All packet pointers are invalid after the adjust helpers. */
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (data + REPLY_LEN > data_end)
		return XDP_DROP;

	/* Ethernet: back to the sender. */
	eth = data;
	__builtin_memcpy(eth->h_dest, orig_eth.h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, orig_eth.h_dest, ETH_ALEN);
	eth->h_proto = bpf_htons(ETH_P_IP);

	/* IP: built on the stack, checksummed, then copied in. */
	ip.version = 4;
	ip.ihl = 5;
	ip.tot_len = bpf_htons(REPLY_HDRS_LEN + QUOTE_LEN);
	ip.ttl = 64;
	ip.protocol = IPPROTO_ICMP;
	ip.saddr = orig_daddr;
	ip.daddr = orig_saddr;
	ip.check = pyxdp_ipv4_csum(&ip);
	__builtin_memcpy(data + sizeof(*eth), &ip, sizeof(ip));

	/* ICMP destination unreachable, fragmentation needed. */
	icmp = data + sizeof(*eth) + sizeof(ip);
	icmp->type = ICMP_DEST_UNREACH;
	icmp->code = ICMP_FRAG_NEEDED;
	icmp->checksum = 0;
	icmp->un.frag.__unused = 0;
	icmp->un.frag.mtu = bpf_htons(mtu);
	icmp->checksum = pyxdp_csum_fold(bpf_csum_diff(NULL, 0, (__be32 *)icmp, ICMP_MSG_LEN, 0));

	count_reply();
	return XDP_TX;
}

LICENSE("GPL");

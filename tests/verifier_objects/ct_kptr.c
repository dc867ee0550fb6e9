// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * ct_kptr - a conntrack entry (struct nf_conn, from bpf_xdp_ct_lookup) kept in
 * a map value's referenced __kptr field with bpf_kptr_xchg. The kernel has no
 * destructor kfunc for struct nf_conn (btf_find_dtor_kfunc), so Linux 6.18
 * refuses the object's BTF at BPF_BTF_LOAD (btf_parse_struct_metas parses the
 * struct holding the kptr: ENOENT); libbpf goes on without BTF and the verifier
 * refuses bpf_kptr_xchg on the BTF-less map. tests/test_kptr_dtor.py holds
 * pyxdp to that.
 *
 * Built with (from the repository's top directory):
 *   clang-16 -target bpf -O2 -g -Wall -Isamples/include -mcpu=v3 \
 *     -c tests/verifier_objects/ct_kptr.c -o tests/verifier_objects/ct_kptr.o
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"
#include "pyxdp_kfuncs.h"

struct nf_conn {
	unsigned long status;
} __attribute__((preserve_access_index));

struct bpf_ct_opts {
	__s32 netns_id;
	__s32 error;
	__u8 l4proto;
	__u8 dir;
	__u16 ct_zone_id;
	__u8 ct_zone_dir;
	__u8 reserved[3];
};

extern struct nf_conn *bpf_xdp_ct_lookup(struct xdp_md *xdp_ctx, struct bpf_sock_tuple *bpf_tuple,
					 __u32 tuple__sz, struct bpf_ct_opts *opts,
					 __u32 opts__sz) __ksym;
extern void bpf_ct_release(struct nf_conn *nfct) __ksym;

struct held {
	struct nf_conn __kptr *ct;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct held);
} ctmap SEC(".maps");

SEC("xdp")
int xdp_ct_kptr(struct xdp_md *ctx)
{
	struct bpf_sock_tuple tup = {};
	struct bpf_ct_opts opts = { .netns_id = -1, .l4proto = 17 };
	struct nf_conn *ct, *old;
	__u32 k = 0;
	struct held *h = bpf_map_lookup_elem(&ctmap, &k);

	if (!h)
		return XDP_PASS;
	ct = bpf_xdp_ct_lookup(ctx, &tup, sizeof(tup.ipv4), &opts, sizeof(opts));
	if (!ct)
		return XDP_PASS;
	old = bpf_kptr_xchg(&h->ct, ct);
	if (old)
		bpf_ct_release(old);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";

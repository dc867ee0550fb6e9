// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * syscall_prog - SEC("syscall") programs (BPF_PROG_TYPE_SYSCALL, run by
 * BPF_PROG_TEST_RUN on a context of bytes alone) and an XDP program reading
 * what they left in a map.
 *
 * sys_store's context is a struct args: it keeps args->value under
 * args->key in the hash map `kv` (BPF_ANY), counts its runs in `runs`, writes
 * back the previous value it replaced (args->old, args->found), the sum of a
 * bpf_loop over args->loops iterations (args->sum) and bytes of args->name
 * reversed in place, and returns args->value + args->key, whose upper 32 bits
 * the kernel drops from retval.
 *
 * sys_null returns 7 when it has no context (r1 NULL), 8 otherwise (it reads
 * none); sys_wide reads and writes at 4 KiB into its context.
 *
 * xdp_get returns XDP_PASS when kv holds the packet's first four bytes as a
 * key and writes the value over the packet's bytes 4..11; XDP_DROP otherwise.
 *
 * Built with (from the repository's top directory):
 *   clang-16 -target bpf -O2 -g -Wall -Isamples/include -mcpu=v3 \
 *     -c tests/verifier_objects/syscall_prog.c -o tests/verifier_objects/syscall_prog.o
 */
#include "pyxdp_bpf.h"

struct args {
	__u32 key;
	__u32 loops;
	__u64 value;
	__u64 old;
	__u64 sum;
	__s32 found;
	__u32 pad;
	char name[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} kv SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} runs SEC(".maps");

static long add_index(__u32 i, void *data)
{
	__u64 *sum = data;

	*sum += i * 3 + 1;
	return 0;
}

SEC("syscall")
int sys_store(struct args *args)
{
	__u32 key = args->key, zero = 0;
	__u64 value = args->value, sum = 0;
	__u64 *old, *n;
	int i;

	old = bpf_map_lookup_elem(&kv, &key);
	args->found = old != 0;
	args->old = old ? *old : 0;
	bpf_map_update_elem(&kv, &key, &value, BPF_ANY);
	n = bpf_map_lookup_elem(&runs, &zero);
	if (n)
		__sync_fetch_and_add(n, 1);
	bpf_loop(args->loops, add_index, &sum, 0);
	args->sum = sum;
	for (i = 0; i < 8; i++) {
		char c = args->name[i];

		args->name[i] = args->name[15 - i];
		args->name[15 - i] = c;
	}
	return value + key;
}

SEC("syscall")
int sys_null(__u8 *ctx)
{
	return ctx ? 8 : 7;
}

SEC("syscall")
int sys_wide(__u64 *ctx)
{
	ctx[512] = ctx[511] * 2;
	return 1;
}

SEC("xdp")
int xdp_get(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u64 *value;
	__u32 key;

	if (data + 12 > end)
		return XDP_ABORTED;
	key = *(__u32 *)data;
	value = bpf_map_lookup_elem(&kv, &key);
	if (!value)
		return XDP_DROP;
	__builtin_memcpy(data + 4, value, 8);
	return XDP_PASS;
}

LICENSE("GPL");

// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * stream - BPF streams (Linux 6.17+): an XDP program prints into its own stdout
 * and stderr with bpf_stream_vprintk_impl (libbpf's bpf_stream_printk), and user
 * space reads them back (BPF_PROG_STREAM_READ_BY_FD; pyxdp's Program.stream_read).
 *
 * xdp_stream notes each call's return code in rcs[i]:
 *
 *   0  stdout: numbers, a stack string, an IPv4 address   0
 *   1  stderr: a char, widths and padding, a %llx          0
 *   2  stream 3 (neither stdout nor stderr)                 -ENOENT
 *   3  an argument array of 12 bytes (not a multiple of 8)  -EINVAL
 *   4  a format that wants two arguments given one          -EINVAL
 *   5  an output of 1100 bytes (more than MAX_BPRINTF_BUF)  -ENOMEM
 *   6  an output of exactly 1024 bytes: all pushed, its     0
 *      last byte the NUL bstr_printf ended it with
 *   7  an empty message                                     0
 *
 * xdp_flood prints 1000 bytes into stdout per run and counts in rcs[8] the runs
 * that could (rcs[9] holds the first refusal, -ENOSPC once the stream is full).
 */
#include "pyxdp_bpf.h"
#include "pyxdp_net.h"

#define __ksym __attribute__((section(".ksyms")))

extern int bpf_stream_vprintk_impl(int stream_id, const char *fmt__str, const void *args,
				   __u32 len__sz, void *aux__prog) __ksym;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __s64);
	__uint(max_entries, 10);
} rcs SEC(".maps");

static const char fmt_out[] = "hello %d %u from %s at %pI4\n";
static const char fmt_err[] = "%c|%5d|%-5d|%05d|%llx|\n";
static const char fmt_one[] = "one %d\n";
static const char fmt_two[] = "%d %d\n";
static const char fmt_long[] = "%1100d";
static const char fmt_full[] = "%1024d";
static const char fmt_empty[] = "";
static const char fmt_flood[] = "%999d\n";

static void note(__u32 i, __s64 rc)
{
	__s64 *slot = bpf_map_lookup_elem(&rcs, &i);

	if (slot)
		*slot = rc;
}

SEC("xdp")
int xdp_stream(struct xdp_md *ctx)
{
	char name[8] = "pyxdp";
	__u8 ip[4] = {192, 0, 2, 7};
	__u64 args[5];

	args[0] = -42;
	args[1] = 7;
	args[2] = (__u64)(long)name;
	args[3] = (__u64)(long)ip;
	note(0, bpf_stream_vprintk_impl(1, fmt_out, args, 32, 0));
	args[0] = 'x';
	args[1] = 12;
	args[2] = -3;
	args[3] = 42;
	args[4] = 0xdeadbeefcafeULL;
	note(1, bpf_stream_vprintk_impl(2, fmt_err, args, 40, 0));
	note(2, bpf_stream_vprintk_impl(3, fmt_one, args, 8, 0));
	note(3, bpf_stream_vprintk_impl(1, fmt_one, args, 12, 0));
	note(4, bpf_stream_vprintk_impl(1, fmt_two, args, 8, 0));
	note(5, bpf_stream_vprintk_impl(1, fmt_long, args, 8, 0));
	note(6, bpf_stream_vprintk_impl(2, fmt_full, args, 8, 0));
	note(7, bpf_stream_vprintk_impl(1, fmt_empty, args, 0, 0));
	return XDP_PASS;
}

SEC("xdp")
int xdp_flood(struct xdp_md *ctx)
{
	__u64 args[1] = {1};
	__u32 ok = 8, bad = 9;
	__s64 *runs = bpf_map_lookup_elem(&rcs, &ok);
	__s64 *first = bpf_map_lookup_elem(&rcs, &bad);
	int rc = bpf_stream_vprintk_impl(1, fmt_flood, args, 8, 0);

	if (!runs || !first)
		return XDP_ABORTED;
	if (!rc)
		*runs += 1;
	else if (!*first)
		*first = rc;
	return XDP_PASS;
}

LICENSE("GPL");

// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * Loader feature test: global variables in every kind of data section.
 *
 * A loader turns each data section into a one-element array map whose
 * value is the section's contents, and rewrites each 64-bit immediate load
 * of a variable's address into a map-value pointer (src_reg = 2,
 * BPF_PSEUDO_MAP_VALUE, with the variable's offset in the second half):
 *
 *   .data            initialised, writable            (data_counter, ...)
 *   .rodata          const volatile: read-only for the program, the loader
 *                    may patch it before loading and freeze the map
 *   .bss             zero-initialised, no bytes in the file (SHT_NOBITS)
 *   .rodata.str1.1   merged string literals: the trace_printk format, used
 *                    directly (address of the string, not a stack copy)
 *   .data.custom     a named data section of its own (SEC(".data.custom"))
 *
 * Variables with internal linkage ("static") are referenced through the
 * section symbol plus an offset rather than their own symbol.
 */
#include "pyxdp_bpf.h"

/* .data */
__u32 data_counter = 7;
__u8 data_bytes[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
static __u64 data_static = 0x1122334455667788ULL;

/* .rodata */
const volatile __u32 ro_limit = 100;
const volatile __u8 ro_mac[6] = { 0x02, 0x11, 0x22, 0x33, 0x44, 0x55 };
static const volatile __u16 ro_static = 0xbeef;

/* .bss */
__u64 bss_total;
__u32 bss_array[4];
static __u32 bss_static;

/* A custom data section. */
__u32 custom_value SEC(".data.custom") = 42;

SEC("xdp")
int globals_prog(struct xdp_md *ctx)
{
	__u32 len = ctx->data_end - ctx->data;
	__u32 slot = len & 3;

	data_counter++;
	data_static += len;
	__sync_fetch_and_add(&bss_total, len);
	bss_array[slot] += data_bytes[slot] + ro_mac[slot];
	bss_static ^= ro_static;
	custom_value += 1;

	if (len > ro_limit)
		/* Format string from .rodata.str1.1, passed by address. */
		bpf_trace_printk("globals: len %u over limit %u\n",
				 sizeof("globals: len %u over limit %u\n"), len, ro_limit);

	return XDP_PASS;
}

LICENSE("GPL");

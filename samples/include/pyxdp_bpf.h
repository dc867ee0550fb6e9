/* SPDX-License-Identifier: MIT */
/*
 * pyxdp_bpf.h - the small BPF-side header used by pyxdp's sample programs.
 *
 * It provides, in pyxdp's own words:
 *   - SEC() and LICENSE() to place programs, maps and the license string in
 *     the ELF sections that loaders look for;
 *   - __uint/__type/__array, the conventions for BTF-defined maps in ".maps"
 *     (a loader reads the map parameters back out of the BTF of each member:
 *     __uint(name, N) is a pointer to an array of N ints, __type(name, T) a
 *     pointer to T, __array(name, T) an array of pointers to T);
 *   - declarations of the BPF helpers the samples call, each as a constant
 *     function pointer whose value is the helper id from enum bpf_func_id,
 *     so that clang emits "call <id>";
 *   - byte-order helpers and compiler attributes.
 *
 * The UAPI definitions (struct xdp_md, map types, helper flags...) come from
 * the system's <linux/bpf.h>.
 */
#ifndef PYXDP_BPF_H
#define PYXDP_BPF_H

#include <linux/types.h>
#include <linux/bpf.h>

/* ------------------------------------------------------------------------ */
/* Placement                                                                 */
/* ------------------------------------------------------------------------ */

/* Put a program, map or variable in the named ELF section. "used" keeps it
 * even when nothing in the file refers to it. */
#define SEC(name) __attribute__((section(name), used))

/* The license string the kernel checks: GPL-only helpers need a
 * GPL-compatible one. */
#define LICENSE(name) char _license[] SEC("license") = name

/* ------------------------------------------------------------------------ */
/* BTF-defined maps                                                          */
/* ------------------------------------------------------------------------ */

#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name
#define __array(name, val) typeof(val) *name[]

/* ------------------------------------------------------------------------ */
/* Compiler attributes                                                       */
/* ------------------------------------------------------------------------ */

/* <linux/stddef.h> defines a plain "inline" __always_inline; force it. */
#undef __always_inline
#define __always_inline inline __attribute__((always_inline))
#ifndef __noinline
#define __noinline __attribute__((noinline))
#endif
#ifndef __weak
#define __weak __attribute__((weak))
#endif

#ifndef likely
#define likely(x) __builtin_expect(!!(x), 1)
#endif
#ifndef unlikely
#define unlikely(x) __builtin_expect(!!(x), 0)
#endif

#ifndef NULL
#define NULL ((void *)0)
#endif

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Stop the compiler from caching or reordering a memory access. */
#define READ_ONCE(x) (*(const volatile typeof(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile typeof(x) *)&(x) = (v))

/* An optimisation barrier for a value: the compiler forgets what it knows
 * about var (useful to keep a bounds check where the verifier needs it). */
#define barrier_var(var) asm volatile("" : "+r"(var))

/* ------------------------------------------------------------------------ */
/* Byte order                                                                */
/* ------------------------------------------------------------------------ */

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define bpf_htons(x) ((__be16)__builtin_bswap16((__u16)(x)))
#define bpf_ntohs(x) ((__u16)__builtin_bswap16((__u16)(x)))
#define bpf_htonl(x) ((__be32)__builtin_bswap32((__u32)(x)))
#define bpf_ntohl(x) ((__u32)__builtin_bswap32((__u32)(x)))
#else
#define bpf_htons(x) ((__be16)(__u16)(x))
#define bpf_ntohs(x) ((__u16)(x))
#define bpf_htonl(x) ((__be32)(__u32)(x))
#define bpf_ntohl(x) ((__u32)(x))
#endif

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/*                                                                           */
/* The number after "= (void *)" is the helper's id in enum bpf_func_id of   */
/* include/uapi/linux/bpf.h; ids are ABI and never change.                   */
/* ------------------------------------------------------------------------ */

struct bpf_fib_lookup;

/* Maps */
static void *(* const bpf_map_lookup_elem)(void *map, const void *key) = (void *) 1;
static long (* const bpf_map_update_elem)(void *map, const void *key, const void *value,
					  __u64 flags) = (void *) 2;
static long (* const bpf_map_delete_elem)(void *map, const void *key) = (void *) 3;
static long (* const bpf_map_push_elem)(void *map, const void *value, __u64 flags) = (void *) 87;
static long (* const bpf_map_pop_elem)(void *map, void *value) = (void *) 88;
static long (* const bpf_map_peek_elem)(void *map, void *value) = (void *) 89;
static long (* const bpf_for_each_map_elem)(void *map, void *callback_fn, void *callback_ctx,
					    __u64 flags) = (void *) 164;
static void *(* const bpf_map_lookup_percpu_elem)(void *map, const void *key,
						  __u32 cpu) = (void *) 195;

/* Time, randomness, CPU */
static __u64 (* const bpf_ktime_get_ns)(void) = (void *) 5;
static __u32 (* const bpf_get_prandom_u32)(void) = (void *) 7;
static __u32 (* const bpf_get_smp_processor_id)(void) = (void *) 8;
static long (* const bpf_get_numa_node_id)(void) = (void *) 42;
static __u64 (* const bpf_jiffies64)(void) = (void *) 118;
static __u64 (* const bpf_ktime_get_boot_ns)(void) = (void *) 125;

/* Output */
static long (* const bpf_trace_printk)(const char *fmt, __u32 fmt_size, ...) = (void *) 6;
static long (* const bpf_perf_event_output)(void *ctx, void *map, __u64 flags, void *data,
					    __u64 size) = (void *) 25;
static long (* const bpf_ringbuf_output)(void *ringbuf, void *data, __u64 size,
					 __u64 flags) = (void *) 130;
static void *(* const bpf_ringbuf_reserve)(void *ringbuf, __u64 size, __u64 flags) = (void *) 131;
static void (* const bpf_ringbuf_submit)(void *data, __u64 flags) = (void *) 132;
static void (* const bpf_ringbuf_discard)(void *data, __u64 flags) = (void *) 133;
static __u64 (* const bpf_ringbuf_query)(void *ringbuf, __u64 flags) = (void *) 134;

/* Control flow */
static long (* const bpf_tail_call)(void *ctx, void *prog_array_map, __u32 index) = (void *) 12;
static long (* const bpf_loop)(__u32 nr_loops, void *callback_fn, void *callback_ctx,
			       __u64 flags) = (void *) 181;

/* Redirection */
static long (* const bpf_redirect)(__u32 ifindex, __u64 flags) = (void *) 23;
static long (* const bpf_redirect_map)(void *map, __u64 key, __u64 flags) = (void *) 51;

/* Packet access and checksums */
static __s64 (* const bpf_csum_diff)(__be32 *from, __u32 from_size, __be32 *to, __u32 to_size,
				     __wsum seed) = (void *) 28;
static long (* const bpf_xdp_adjust_head)(struct xdp_md *xdp_md, int delta) = (void *) 44;
static long (* const bpf_xdp_adjust_meta)(struct xdp_md *xdp_md, int delta) = (void *) 54;
static long (* const bpf_xdp_adjust_tail)(struct xdp_md *xdp_md, int delta) = (void *) 65;
static __u64 (* const bpf_xdp_get_buff_len)(struct xdp_md *xdp_md) = (void *) 188;
static long (* const bpf_xdp_load_bytes)(struct xdp_md *xdp_md, __u32 offset, void *buf,
					 __u32 len) = (void *) 189;
static long (* const bpf_xdp_store_bytes)(struct xdp_md *xdp_md, __u32 offset, void *buf,
					  __u32 len) = (void *) 190;

/* Routing */
static long (* const bpf_fib_lookup)(void *ctx, struct bpf_fib_lookup *params, int plen,
				     __u32 flags) = (void *) 69;
static long (* const bpf_check_mtu)(void *ctx, __u32 ifindex, __u32 *mtu_len, __s32 len_diff,
				    __u64 flags) = (void *) 163;

/* bpf_printk("fmt", args...): trace_printk with a format kept on the stack
 * (at most three arguments). Output goes to the kernel's trace_pipe. */
#define bpf_printk(fmt, ...)                                                    \
	({                                                                      \
		char ____fmt[] = fmt;                                           \
		bpf_trace_printk(____fmt, sizeof(____fmt), ##__VA_ARGS__);      \
	})

#endif /* PYXDP_BPF_H */

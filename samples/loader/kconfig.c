// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * Loader feature test: __kconfig externs.
 *
 * Each extern becomes a slot of the read-only ".kconfig" array map the
 * loader builds and fills (libbpf: from the running kernel's Kconfig and
 * uname); a load of an extern's address becomes a map-value pointer to its
 * slot. The types a Kconfig value can take: an int (CONFIG_HZ), a bool (a y
 * or n option), a tristate (enum libbpf_tristate: y, n or m), a char (the
 * letter itself), a char array (a string, truncated to fit), and the
 * virtual LINUX_KERNEL_VERSION and LINUX_HAS_BPF_COOKIE. __weak externs the
 * configuration lacks read as 0.
 *
 * The program copies every value into out[] and returns XDP_PASS.
 */
#include "pyxdp_bpf.h"

#define __kconfig __attribute__((section(".kconfig")))
#define __weak __attribute__((weak))

enum libbpf_tristate {
	TRI_NO = 0,
	TRI_YES = 1,
	TRI_MODULE = 2,
};

extern int CONFIG_HZ __kconfig;
extern unsigned int LINUX_KERNEL_VERSION __kconfig;
extern _Bool LINUX_HAS_BPF_COOKIE __kconfig;
extern _Bool CONFIG_BPF_SYSCALL __kconfig;
extern _Bool CONFIG_PYXDP_UNSET_BOOL __kconfig __weak;
extern enum libbpf_tristate CONFIG_XDP_SOCKETS __kconfig __weak;
extern char CONFIG_NET __kconfig __weak;
extern char CONFIG_DEFAULT_HOSTNAME[4] __kconfig __weak;
extern unsigned long long CONFIG_PYXDP_UNSET_U64 __kconfig __weak;
extern short CONFIG_LOG_BUF_SHIFT __kconfig __weak;

#define NOUT 10

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NOUT);
	__type(key, __u32);
	__type(value, __u64);
} out SEC(".maps");

static __always_inline void put(__u32 k, __u64 v)
{
	__u64 *slot = bpf_map_lookup_elem(&out, &k);

	if (slot)
		*slot = v;
}

SEC("xdp")
int xdp_kconfig(struct xdp_md *ctx)
{
	put(0, CONFIG_HZ);
	put(1, LINUX_KERNEL_VERSION);
	put(2, LINUX_HAS_BPF_COOKIE);
	put(3, CONFIG_BPF_SYSCALL);
	put(4, CONFIG_PYXDP_UNSET_BOOL);
	put(5, CONFIG_XDP_SOCKETS);
	put(6, CONFIG_NET);
	put(7, (__u64)CONFIG_DEFAULT_HOSTNAME[0] << 24 | CONFIG_DEFAULT_HOSTNAME[1] << 16 |
	       CONFIG_DEFAULT_HOSTNAME[2] << 8 | CONFIG_DEFAULT_HOSTNAME[3]);
	put(8, CONFIG_PYXDP_UNSET_U64);
	put(9, CONFIG_LOG_BUF_SHIFT);
	return XDP_PASS;
}

LICENSE("GPL");

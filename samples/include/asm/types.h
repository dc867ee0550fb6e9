/* SPDX-License-Identifier: MIT */
/*
 * Architecture-neutral stand-in for <asm/types.h>.
 *
 * The Linux UAPI headers include <asm/...> headers, which normally live in
 * the host's multiarch directory. For the BPF target every one of them
 * reduces to the generic variant, so pyxdp supplies these one-line shims
 * instead: the build then needs no host-specific include directory and the
 * objects are the same whatever the build machine's architecture is.
 */
#ifndef PYXDP_ASM_TYPES_H
#define PYXDP_ASM_TYPES_H
#include <asm-generic/int-ll64.h>
#endif

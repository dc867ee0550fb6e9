/* SPDX-License-Identifier: MIT */
/*
 * Architecture-neutral <asm/swab.h>: no arch-specific byte swaps, so
 * <linux/swab.h> falls back to its generic versions (which clang turns into
 * BPF byte-swap instructions anyway).
 */
#ifndef PYXDP_ASM_SWAB_H
#define PYXDP_ASM_SWAB_H
#endif

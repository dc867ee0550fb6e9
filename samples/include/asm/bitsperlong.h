/* SPDX-License-Identifier: MIT */
/* Architecture-neutral <asm/bitsperlong.h>: BPF is a 64-bit target. */
#ifndef PYXDP_ASM_BITSPERLONG_H
#define PYXDP_ASM_BITSPERLONG_H
#define __BITS_PER_LONG 64
#include <asm-generic/bitsperlong.h>
#endif

/* SPDX-License-Identifier: MIT */
/*
 * <asm/byteorder.h> chosen by the target's byte order: -target bpf follows
 * the host (bpfel on x86-64 and arm64), bpfeb is big-endian.
 */
#ifndef PYXDP_ASM_BYTEORDER_H
#define PYXDP_ASM_BYTEORDER_H
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#include <linux/byteorder/little_endian.h>
#else
#include <linux/byteorder/big_endian.h>
#endif
#endif

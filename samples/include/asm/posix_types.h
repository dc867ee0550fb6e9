/* SPDX-License-Identifier: MIT */
/* Architecture-neutral <asm/posix_types.h> (see asm/types.h). */
#ifndef PYXDP_ASM_POSIX_TYPES_H
#define PYXDP_ASM_POSIX_TYPES_H
#include <asm-generic/posix_types.h>
#endif

/* SPDX-License-Identifier: MIT */
/*
 * pyxdp_ext.h - helpers pyxdp offers beyond Linux.
 *
 * pyxdp runs programs calling these on its own datapath; the kernel's
 * verifier refuses them ("invalid func unknown#1024"), so a program using
 * one loads on pyxdp only. Their ids sit far above Linux's helper range
 * (enum bpf_func_id stops at 211), so no kernel helper can collide.
 */
#ifndef PYXDP_EXT_H
#define PYXDP_EXT_H

#include "pyxdp_bpf.h"

/*
 * bpf_redirect_xsk - redirect to the AF_XDP socket of the packet's rx queue.
 *
 * bind() registers the first socket bound to an rx queue on that queue; the
 * helper redirects the packet to it and returns XDP_REDIRECT, or returns the
 * action in the low two bits of flags when the queue has no socket (other
 * flag bits give XDP_ABORTED). No XSKMAP to create or fill. From the
 * bpf-next series "bpf_redirect_xsk()" of January 2021, never merged into
 * Linux.
 */
static long (* const bpf_redirect_xsk)(struct xdp_md *ctx, __u64 flags) = (void *) 1024;

#endif /* PYXDP_EXT_H */

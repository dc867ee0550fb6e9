"""Kernel user-space API (``include/uapi/linux``) constants, under their kernel names.

:mod:`pyxdp.uapi.bpf` mirrors ``include/uapi/linux/bpf.h``: the ``bpf(2)``
commands, map/program/attach types, flag sets, the helper id table
(``___BPF_FUNC_MAPPER``), ``enum xdp_action`` and ``struct xdp_md``.
"""

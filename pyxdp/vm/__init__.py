"""pyxdp's userspace eBPF engines: memory regions, the reference interpreter, helpers."""

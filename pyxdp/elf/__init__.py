"""eBPF ELF objects (``clang -O2 -g -target bpf -c``) read into collection specs.

:func:`load_collection_spec` is the entry point: it parses the ELF container,
BTF and ``.BTF.ext``, maps, relocations and links every XDP program the way
libbpf's ``bpf_object__open`` + relocation steps do, without kernel calls.
"""

from pyxdp.elf.reader import (
    internal_map_name,
    load_collection_spec,
    object_name,
    program_type,
)

__all__ = ["internal_map_name", "load_collection_spec", "object_name", "program_type"]

"""The eBPF instruction set: opcodes, slots, assembler and disassembler (no kernel calls)."""

"""pyxdp's eBPF verifier: what Linux 6.18's ``kernel/bpf/verifier.c`` refuses, refused
before a program runs in user space, with Linux's message (:func:`verify`)."""

from pyxdp.verifier.verifier import BPF_COMPLEXITY_LIMIT_INSNS, VerifierResult, verify

__all__ = ["BPF_COMPLEXITY_LIMIT_INSNS", "VerifierResult", "verify"]

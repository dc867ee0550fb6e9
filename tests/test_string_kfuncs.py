"""The string kfuncs (pyxdp/vm/string_kfuncs.py, kernel/bpf/helpers.c) called directly:
their rules without Linux, and hostile arguments (any address, any count) never raising.
tests/kernel/test_string_kfuncs_kernel.py holds samples/strings.o to Linux."""

from __future__ import annotations

import errno
import random
import struct
from functools import partial

import pytest

from pyxdp.asm.assembler import assemble
from pyxdp.collection import Collection
from pyxdp.testing.native import python_calls
from pyxdp.vm import string_kfuncs as sk
from pyxdp.vm.interpreter import Interpreter
from pyxdp.vm.memory import Region

M32 = 0xFFFF_FFFF
A, B, BIG = 0x1000, 0x2000, 0x10_0000


def _vm() -> Interpreter:
    vm = Interpreter(assemble("r0 = 0\nexit"))
    big = bytearray(b"x" * 70000)
    vm.mem.reset([Region("a", A, bytearray(b"Hello, World!\0\xc0\xd7\0")),
                  Region("b", B, bytearray(b"hello, world!\0lo\0")),
                  Region("big", BIG, big)])
    return vm


def _r(fn: object, *args: int) -> int:
    vm = _vm()
    regs = (list(args) + [0] * 5)[:5]
    r = fn(vm, *regs)  # type: ignore[operator]
    assert 0 <= r <= M32  # an int, zero-extended
    return r - (1 << 32) if r >> 31 else r


def test_string_rules() -> None:
    assert _r(sk.strcmp, A, B) == -1 and _r(sk.strcasecmp, A, B) == 0
    assert _r(sk.strcasecmp, A + 14, B) == 1  # 0xc0 folds to 0xe0 (Latin-1), unsigned
    assert _r(sk.strlen, A) == 13 and _r(sk.strnlen, A, 4) == 4
    assert _r(sk.strchr, A, ord("o")) == 4 and _r(sk.strchr, A, 0x100 | ord("o")) == 4
    assert _r(sk.strrchr, A, ord("o")) == 8 and _r(sk.strrchr, A + 14, 0x1D7) == -errno.ENOENT
    assert _r(sk.strrchr, A + 14, 0xD7) == 1 and _r(sk.strchrnul, A, ord("q")) == 13
    assert _r(sk.strnchr, A, 4, ord("o")) == -errno.ENOENT
    assert _r(sk.strstr, B, B + 14) == 3 and _r(sk.strnstr, B, B + 14, 5) == 3
    assert _r(sk.strnstr, B, B + 14, 4) == -errno.ENOENT
    assert _r(sk.strspn, B, B + 14) == 0 and _r(sk.strspn, B + 2, B + 14) == 3
    assert _r(sk.strcspn, A, B + 14) == 2
    assert _r(sk.strlen, BIG) == -errno.E2BIG and _r(sk.strnlen, BIG, 65535) == 65535
    assert _r(sk.strlen, 1) == -errno.ERANGE and _r(sk.strlen, -1) == -errno.EFAULT
    assert _r(sk.strnlen, -1, 0) == 0 and _r(sk.strnlen, 1, 0) == -errno.ERANGE
    assert _r(sk.strlen, 0xFFFF_FFFF_FF60_0000) == -errno.ERANGE  # the vsyscall page
    assert _r(sk.strcmp, A, 0x8000_0000_0000) == -errno.ERANGE  # not canonical


def test_unterminated_string_faults_at_the_region_end() -> None:
    vm = _vm()
    vm.mem.reset([Region("a", A, bytearray(b"abc")), Region("next", A + 3, bytearray(b"d\0"))])
    assert sk.strlen(vm, A, 0, 0, 0, 0) == 4  # on into the region that follows
    vm.mem.reset([Region("a", A, bytearray(b"abc"))])
    assert sk.strlen(vm, A, 0, 0, 0, 0) == -errno.EFAULT & M32


@pytest.mark.parametrize("name", sorted(sk.STRING_KFUNCS))
def test_hostile_arguments_never_raise(name: str) -> None:
    fn = sk.STRING_KFUNCS[name]
    rng = random.Random(name)
    vm = _vm()
    picks = [0, 1, -1, A, A + 13, A + 17, B + 16, BIG, BIG + 69999, 0xFFFF_8000_0000_0000,
             1 << 63, 0x7FFF_FFFF_FFFF]
    for _ in range(300):
        regs = [rng.choice(picks) + rng.randrange(-2, 3) if rng.random() < 0.8
                else rng.getrandbits(64) for _ in range(5)]
        r = fn(vm, *(x & 0xFFFF_FFFF_FFFF_FFFF for x in regs))
        assert 0 <= r <= M32


# -- the JIT's native twins against the interpreter --------------------------------------

NATIVE = tuple(sorted(sk.STRING_KFUNCS))
# Strings on the stack (r10 - 32 .. r10 - 1): "Hello, wORLD\xc0\xd7" and "hello\0" with
# no NUL after the first one's last byte but the stack's end.
_CALL = """
r1 = 0x57202c6f6c6c6548 ll
*(u64 *)(r10 -32) = r1
r1 = 0xd7c0444c524f ll
*(u64 *)(r10 -24) = r1
r1 = 0x6f6c6c6568 ll
*(u64 *)(r10 -16) = r1
r1 = 0x4141414141414141 ll
*(u64 *)(r10 -8) = r1
*(u32 *)(r10 -36) = 0
r1 = MAP(arr)
r2 = r10
r2 += -36
call 1
if r0 == 0 goto out
r6 = *(u64 *)(r0 +0)
r7 = *(u64 *)(r0 +8)
*(u32 *)(r10 -36) = 1
r1 = MAP(arr)
r2 = r10
r2 += -36
call 1
if r0 == 0 goto out
r8 = *(u64 *)(r0 +0)
r9 = r0
r1 = r6
r2 = r7
r3 = r8
call KFUNC({name})
*(u64 *)(r9 +8) = r0
out:
r0 = 2
exit"""


def _drive(c: Collection, prog: str, args: list[list[int]], out: list[int]) -> None:
    """Run ``prog`` once per argument triple (in the map's two slots); its results."""
    arr = c.maps["arr"].handle
    m = 0xFFFF_FFFF_FFFF_FFFF
    for a, b, d in args:
        arr.update(struct.pack("<I", 0), struct.pack("<QQ", a & m, b & m))
        arr.update(struct.pack("<I", 1), struct.pack("<QQ", d & m, 0))
        assert c.programs[prog].test_run(bytes(64)).retval == 2
        raw = arr.lookup(struct.pack("<I", 1))
        assert raw is not None
        out.append(struct.unpack("<QQ", raw)[1])


def test_native_twins_agree_with_python_on_any_argument() -> None:
    from pyxdp.testing.verifier_cases import VerifierCase
    from pyxdp.vm.memory import STACK_BASE, STACK_SIZE

    top = STACK_BASE + STACK_SIZE
    picks = [0, 1, -1, 0xFFFF_8000_0000_0000, 0xFFFF_FFFF_FF60_0010, 1 << 47, top,
             *(top - k for k in range(1, 40)), ord("o"), ord("L"), 0xC0, 0xD7, 0x1D7, 0x16F]
    rng = random.Random(7)
    args = [[rng.choice(picks) if rng.random() < 0.9 else rng.getrandbits(64)
             for _ in range(3)] for _ in range(150)]
    calls = 0
    for name in NATIVE:
        spec = VerifierCase(name[4:], _CALL.replace("{name}", name), None).spec()
        got = {}
        for engine in ("interp", "jit"):
            with Collection(spec, "userspace", engine=engine) as c:
                out: list[int] = []
                n = python_calls([sk], partial(_drive, c, name[4:], args, out))
                if engine == "jit":
                    calls += n
                got[engine] = out
        assert got["jit"] == got["interp"], name
        assert all(0 <= r <= M32 for r in got["jit"])
        assert len(set(got["jit"])) > 3, name  # the picks reach several outcomes
    assert calls == 0  # the JIT called no Python kfunc

"""The string kfuncs against Linux: samples/strings.o under BPF_PROG_TEST_RUN on Linux
and on pyxdp's interpreter and JIT - every kfunc on strings in a map value, on the stack,
in the packet and at raw addresses (NULL, user, non-canonical, vsyscall, kernel): the
same results, -ENOENT, -E2BIG past 65,536 bytes, -EFAULT and -ERANGE, unsigned
characters, Latin-1 case folding, r0's upper half."""

from __future__ import annotations

import errno
import struct
from pathlib import Path

import pytest

from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.net.prog import jit_available
from pyxdp.testing.verifier_cases import VerifierCase

pytestmark = pytest.mark.kernel

OBJ = Path(__file__).resolve().parents[2] / "samples" / "strings.o"
MAP, STACK, PKT, RAW = range(4)
(STRCMP, STRCASECMP, STRCHR, STRCHRNUL, STRNCHR, STRRCHR, STRLEN, STRNLEN,
 STRSPN, STRCSPN, STRSTR, STRNSTR) = range(12)
TEXT = 70000
M64 = (1 << 64) - 1


def _text() -> bytes:
    text = bytearray(TEXT)
    for off, s in ((0, b"Hello, World!\0"), (16, b"hello, world!\0"), (32, b"openat\0"),
                   (40, b"open\0"), (48, b"\xc0\xe9\xd7z\0"), (56, b"\xe0\xc9\xf7Z\0"),
                   (64, b"\x80abc\0"), (72, b"abc\0"), (80, b"aabbccxyz\0"), (96, b"abc\0"),
                   (104, b"xyz\0"), (112, b"\0"),
                   (200, b"a" * 69000 + b"\0")):  # from 200: no NUL within 65,536 bytes
        text[off:off + len(s)] = s
    return bytes(text)


TEXT_BYTES = _text()
PACKET = bytes(range(1, 256)) + b"\0" + b"Hello\0"
# (op, where1, off1, where2, off2, arg, raw1, raw2); STRNCHR's arg is count << 8 | c
CASES: list[tuple[int, ...]] = [
    (STRCMP, MAP, 0, MAP, 16), (STRCMP, MAP, 16, MAP, 0), (STRCMP, MAP, 0, MAP, 0),
    (STRCASECMP, MAP, 0, MAP, 16), (STRCASECMP, MAP, 48, MAP, 56), (STRCMP, MAP, 64, MAP, 72),
    (STRCMP, STACK, 0, MAP, 0), (STRCMP, MAP, 200, MAP, 200), (STRCMP, RAW, 0, MAP, 0, 0, 1),
    (STRCMP, MAP, 0, RAW, 0, 0, 0, -1), (STRCMP, RAW, 0, RAW, 0, 0, -1, 1),
    (STRCHR, MAP, 0, MAP, 0, ord("o")), (STRCHR, MAP, 0, MAP, 0, 0),
    (STRCHR, MAP, 0, MAP, 0, ord("q")), (STRCHR, MAP, 0, MAP, 0, 0x100 + ord("W")),
    (STRCHR, MAP, 200, MAP, 0, ord("b")), (STRCHR, MAP, 48, MAP, 0, 0xd7),
    (STRCHRNUL, MAP, 0, MAP, 0, ord("q")), (STRCHRNUL, MAP, 0, MAP, 0, ord(",")),
    (STRCHRNUL, MAP, 200, MAP, 0, ord("q")), (STRNCHR, MAP, 0, MAP, 0, (5 << 8) | ord("o")),
    (STRNCHR, MAP, 0, MAP, 0, (4 << 8) | ord("o")), (STRNCHR, MAP, 0, MAP, 0, (0 << 8) | ord("H")),
    (STRNCHR, MAP, 200, MAP, 0, (70000 << 8) | ord("b")),
    (STRNCHR, MAP, 200, MAP, 0, (100 << 8) | ord("b")), (STRNCHR, MAP, 0, MAP, 0, (100 << 8)),
    (STRRCHR, MAP, 0, MAP, 0, ord("o")), (STRRCHR, MAP, 0, MAP, 0, ord("q")),
    (STRRCHR, MAP, 48, MAP, 0, 0xd7), (STRRCHR, MAP, 48, MAP, 0, -41),
    (STRRCHR, MAP, 0, MAP, 0, 0), (STRRCHR, MAP, 200, MAP, 0, ord("a")), (STRLEN, MAP, 0),
    (STRLEN, MAP, 112), (STRLEN, STACK, 0), (STRLEN, PKT, 0), (STRLEN, PKT, 256),
    (STRLEN, MAP, 200), (STRLEN, RAW, 0, MAP, 0, 0, 0), (STRLEN, RAW, 0, MAP, 0, 0, 1),
    (STRLEN, RAW, 0, MAP, 0, 0, -1), (STRLEN, RAW, 0, MAP, 0, 0, 0xffff800000000000),
    (STRLEN, RAW, 0, MAP, 0, 0, 0x800000000000), (STRLEN, RAW, 0, MAP, 0, 0, 0xffffffffff600000),
    (STRNLEN, MAP, 0, MAP, 0, 5), (STRNLEN, MAP, 0, MAP, 0, 100),
    (STRNLEN, MAP, 200, MAP, 0, 65535), (STRNLEN, MAP, 200, MAP, 0, 65536),
    (STRNLEN, MAP, 200, MAP, 0, -1), (STRNLEN, RAW, 0, MAP, 0, 0, -1),
    (STRNLEN, RAW, 0, MAP, 0, 0, 1), (STRSPN, MAP, 80, MAP, 96), (STRSPN, MAP, 80, MAP, 112),
    (STRSPN, MAP, 112, MAP, 96), (STRSPN, MAP, 200, MAP, 96), (STRSPN, MAP, 96, MAP, 200),
    (STRSPN, MAP, 96, RAW, 0, 0, 0, -1), (STRCSPN, MAP, 80, MAP, 104),
    (STRCSPN, MAP, 80, MAP, 112), (STRCSPN, MAP, 0, MAP, 104), (STRCSPN, MAP, 96, MAP, 200),
    (STRCSPN, MAP, 200, MAP, 104), (STRSTR, MAP, 32, MAP, 40), (STRSTR, MAP, 0, MAP, 112),
    (STRSTR, MAP, 0, MAP, 104), (STRSTR, MAP, 80, MAP, 104), (STRSTR, MAP, 200, MAP, 104),
    (STRSTR, PKT, 256, MAP, 0), (STRNSTR, MAP, 32, MAP, 40, 4), (STRNSTR, MAP, 32, MAP, 40, 3),
    (STRNSTR, MAP, 32, MAP, 40, 0), (STRNSTR, MAP, 32, MAP, 112, 0),
    (STRNSTR, MAP, 80, MAP, 104, 9), (STRNSTR, MAP, 80, MAP, 104, 8),
    (STRNSTR, MAP, 200, MAP, 104, 70000), (STRNSTR, MAP, 80, RAW, 104, 9, 0, 1),
    (STRNSTR, MAP, 200, MAP, 200, -1),
]


def _run(coll: Collection, op: int, w1: int = MAP, o1: int = 0, w2: int = MAP, o2: int = 0,
         arg: int = 0, raw1: int = 0, raw2: int = 0) -> int:
    coll.maps["cfg"].handle.update(bytes(4), struct.pack(
        "<IIIIIIQQQ", op, w1, w2, o1, o2, 0, arg & M64, raw1 & M64, raw2 & M64))
    assert coll.programs["xdp_str"].test_run(PACKET).retval == 2
    raw = coll.maps["out"].handle.lookup(bytes(4))
    assert raw is not None
    return int(struct.unpack("<q", raw)[0])


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_string_kfuncs_match_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    spec = load_collection_spec(OBJ)
    got = set()
    with Collection(spec, "kernel") as kern, Collection(spec, "userspace",
                                                        engine=engine) as user:
        for coll in (kern, user):
            coll.maps["text"].handle.update(bytes(4), TEXT_BYTES)
        for case in CASES:
            k = _run(kern, *case)
            assert _run(user, *case) == k, case
            got.add(k)
    # Linux took each error path
    assert {-errno.ENOENT, -errno.E2BIG, -errno.EFAULT, -errno.ERANGE} <= got


# (program, r0 on Linux): the int return with r0's upper half (r0 >> 32 << 16 | low 16)
_R0 = {
    "strlen_erange": "r1 = 1\ncall KFUNC(bpf_strlen)",
    "strlen_efault": "r1 = -1\ncall KFUNC(bpf_strlen)",
    "strcmp_less": "*(u64 *)(r10 -8) = 0x41\n*(u64 *)(r10 -16) = 0x42\nr1 = r10\nr1 += -8\n"
                   "r2 = r10\nr2 += -16\ncall KFUNC(bpf_strcmp)",
    "strchr_enoent": "*(u64 *)(r10 -8) = 0x41\nr1 = r10\nr1 += -8\nr2 = 0x42\n"
                     "call KFUNC(bpf_strchr)",
    "strrchr_hi32": "*(u64 *)(r10 -8) = 0x41\nr1 = r10\nr1 += -8\nr2 = 0x100000041 ll\n"
                    "call KFUNC(bpf_strrchr)",
}


@pytest.mark.parametrize("engine", ["interp", "jit"])
def test_string_kfunc_r0_as_linux(engine: str) -> None:
    if engine == "jit" and not jit_available():
        pytest.skip("the JIT needs llvmlite")
    for name, call in _R0.items():
        asm = f"{call}\nr6 = r0\nr0 >>= 32\nr0 <<= 16\nr6 &= 0xffff\nr0 |= r6\nexit"
        spec = VerifierCase(name[:15], asm, None).spec()
        with Collection(spec, "kernel") as kern, Collection(spec, "userspace",
                                                            engine=engine) as user:
            k = kern.programs[name[:15]].test_run(bytes(64)).retval
            assert user.programs[name[:15]].test_run(bytes(64)).retval == k, name

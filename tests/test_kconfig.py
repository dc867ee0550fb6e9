"""``__kconfig`` externs resolved as libbpf resolves them (pyxdp.elf.kconfig): layout,
Kconfig text parsing, the virtual LINUX_ externs, weak defaults and the errors; and
``samples/loader/kconfig.*.o`` through the ELF loader with Kconfig text of its own."""

from __future__ import annotations

import pytest

import pyxdp.elf.kconfig as kc
from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.elf.kconfig import KconfigExtern, Kind, kernel_version, resolve_kconfig
from pyxdp.errors import ObjectError

SAMPLE = "samples/loader/kconfig.v3.o"
# What the sample's externs read from this Kconfig (no system Kconfig needed).
TEXT = """\
CONFIG_HZ=1000
CONFIG_BPF_SYSCALL=y
# CONFIG_PYXDP_UNSET_BOOL is not set
CONFIG_XDP_SOCKETS=m
CONFIG_NET=y
CONFIG_DEFAULT_HOSTNAME="pyxdp"
CONFIG_LOG_BUF_SHIFT=0x12
"""


def _ext(name: str, kind: Kind, size: int, *, signed: bool = False, weak: bool = False,
         offset: int = 0) -> KconfigExtern:
    return KconfigExtern(name, kind, size, min(size, 8) if kind is not Kind.CHAR_ARR else 1,
                         signed, weak, offset)


@pytest.fixture
def no_system_kconfig(monkeypatch: pytest.MonkeyPatch) -> None:
    """A system Kconfig that sets nothing (libbpf reads it while any extern is unset)."""
    monkeypatch.setattr(kc, "_system_kconfig", lambda: "# empty\n")


def test_sample_values_from_kconfig_text(no_system_kconfig: None) -> None:
    spec = load_collection_spec(SAMPLE, kconfig=TEXT)
    m = spec.maps[".kconfig"]
    assert m.frozen and m.value_size == 30 and m.is_global_data
    with Collection(spec, "userspace") as c:
        c.programs["xdp_kconfig"].test_run(bytes(64))
        out = [c.maps["out"][i] for i in range(10)]
    assert out[0] == 1000 and out[2] == 1 and out[3] == 1 and out[4] == 0
    assert out[5] == 2 and out[6] == ord("y") and out[8] == 0 and out[9] == 0x12
    assert out[7] == int.from_bytes(b"pyx\0", "big")  # truncated to char[4]
    assert out[1] == kernel_version()


def test_missing_strong_extern_names_it(no_system_kconfig: None) -> None:
    with pytest.raises(ObjectError, match=r"extern 'CONFIG_HZ' \(strong\): not resolved"):
        load_collection_spec(SAMPLE, kconfig=TEXT.replace("CONFIG_HZ=1000\n", ""))



def test_no_system_kconfig_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kc.os, "uname", lambda: type("U", (), {
        "release": "6.18.0-pyxdp-none", "machine": "none"})())
    monkeypatch.setattr(kc, "_SYSTEM_CONFIGS", ("/nonexistent/config.gz",))
    with pytest.raises(ObjectError, match="failed to open system Kconfig"):
        load_collection_spec(SAMPLE, kconfig="")


def test_layout_by_alignment_size_and_name() -> None:
    from pyxdp.btf.btf import Btf  # the sample's BTF: its .kconfig DATASEC after layout
    spec = load_collection_spec(SAMPLE, kconfig=TEXT)
    assert isinstance(spec.btf, Btf)
    sec = spec.btf.types[spec.btf.find(".kconfig") or 0]
    names = [(spec.btf.types[v.type].name, v.offset) for v in sec.secinfos]
    assert names == [("CONFIG_PYXDP_UNSET_U64", 0), ("CONFIG_HZ", 8),
                     ("CONFIG_XDP_SOCKETS", 12), ("LINUX_KERNEL_VERSION", 16),
                     ("CONFIG_LOG_BUF_SHIFT", 20), ("CONFIG_BPF_SYSCALL", 22),
                     ("CONFIG_NET", 23), ("CONFIG_PYXDP_UNSET_BOOL", 24),
                     ("LINUX_HAS_BPF_COOKIE", 25), ("CONFIG_DEFAULT_HOSTNAME", 26)]


@pytest.mark.parametrize(("ext", "line", "error"), [
    (_ext("CONFIG_A", Kind.BOOL, 1), "CONFIG_A=m", "implies tristate or char type"),
    (_ext("CONFIG_A", Kind.INT, 4), "CONFIG_A=y", "implies bool, tristate, or char type"),
    (_ext("CONFIG_A", Kind.INT, 2), 'CONFIG_A="x"', "implies char array type"),
    (_ext("CONFIG_A", Kind.INT, 2), "CONFIG_A=65536", "doesn't fit in 2 bytes"),
    (_ext("CONFIG_A", Kind.INT, 2, signed=True), "CONFIG_A=32768", "doesn't fit in 2 bytes"),
    (_ext("CONFIG_A", Kind.INT, 4), "CONFIG_A=12ab", "isn't a valid integer"),
    (_ext("CONFIG_A", Kind.TRISTATE, 4), "CONFIG_A=3", "implies integer type"),
    (_ext("CONFIG_A", Kind.INT, 4), "CONFIG_A=", "no value"),
    (_ext("CONFIG_A", Kind.INT, 4), "CONFIG_A", "no separator"),
    (_ext("LINUX_FOO", Kind.INT, 4), "", "unrecognized virtual extern"),
])
def test_libbpf_errors(ext: KconfigExtern, line: str, error: str) -> None:
    with pytest.raises(ObjectError, match=error):
        resolve_kconfig([ext], ext.size, line + "\n")


def test_values() -> None:
    exts = [_ext("CONFIG_U64", Kind.INT, 8, offset=0), _ext("CONFIG_S32", Kind.INT, 4,
            signed=True, offset=8), _ext("CONFIG_OCT", Kind.INT, 2, offset=12),
            _ext("CONFIG_W", Kind.INT, 2, weak=True, offset=14),
            _ext("LINUX_UNKNOWN", Kind.INT, 4, weak=True, offset=16)]
    got = resolve_kconfig(exts, 20, "CONFIG_U64=0xffffffffffffffff\nCONFIG_S32=2147483647\n"
                                    "CONFIG_OCT=010\nCONFIG_U64=1\n# CONFIG_W is not set\n")
    assert got == bytes([0xFF] * 8) + (2**31 - 1).to_bytes(4, "little") + \
        (8).to_bytes(2, "little") + bytes(6)


def test_kernel_version() -> None:
    assert kernel_version("6.18.44-fc-v1045") == (6 << 16) + (18 << 8) + 44
    assert kernel_version("5.4.300") == (5 << 16) + (4 << 8) + 255
    assert kernel_version("6.18-rc1") == 0

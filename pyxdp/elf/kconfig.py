"""``__kconfig`` externs, resolved as libbpf resolves them (``libbpf.c``:
``bpf_object__collect_externs``, ``bpf_object__resolve_externs``,
``bpf_object__read_kconfig_file``/``_mem``).

A program declares ``extern int CONFIG_HZ __kconfig;``: clang leaves an
undefined symbol and a ``VAR`` in BTF's ``.kconfig`` DATASEC. The loader
lays the externs out in one read-only, frozen ``.kconfig`` array map
(sorted by alignment, descending, then size and name; each at its alignment)
and points every ``ld_imm64`` against an extern at its slot.

Values: ``LINUX_KERNEL_VERSION`` is ``KERNEL_VERSION(a, b, c)`` of the running
kernel's release (``uname -r``, the patch level capped at 255);
``LINUX_HAS_BPF_COOKIE`` is 1 and ``LINUX_HAS_SYSCALL_WRAPPER`` whether
``__<arch>_sys_bpf`` is in ``/proc/kallsyms``, as libbpf probes; other
``LINUX_`` names are refused unless weak. ``CONFIG_`` names come first from
the caller's Kconfig text (libbpf's ``kconfig`` open option), then, for those
still unset, from ``/boot/config-$(uname -r)`` or else ``/proc/config.gz``.
``y``/``n``/``m`` go to ``bool`` (not ``m``), ``enum libbpf_tristate`` (yes 1,
module 2) or ``char``; a quoted string to a ``char`` array (truncated to fit,
NUL-terminated); a number (C syntax: decimal, ``0x``, octal) to an integer
that holds it or a ``char``. ``# CONFIG_X is not set`` lines set nothing. An
extern still unset is zero when ``__weak``, else the object does not load:
"extern 'CONFIG_X' (strong): not resolved".
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from enum import Enum, auto

from pyxdp.btf.btf import BTF_INT_BOOL, BTF_INT_SIGNED, Btf, BtfKind
from pyxdp.errors import NotSupportedError, ObjectError

__all__ = ["KconfigExtern", "kconfig_layout", "kernel_version", "resolve_kconfig"]


class Kind(Enum):
    """libbpf's ``enum kcfg_type``."""

    CHAR = auto()
    BOOL = auto()
    INT = auto()
    TRISTATE = auto()
    CHAR_ARR = auto()


@dataclass(frozen=True, slots=True)
class KconfigExtern:
    """One ``__kconfig`` extern: its type class, size, alignment and slot."""

    name: str
    kind: Kind
    size: int
    align: int
    signed: bool
    weak: bool
    offset: int = 0


def _kind(btf: Btf, type_id: int) -> tuple[Kind | None, bool]:
    """libbpf's ``find_kcfg_type``: the class of ``type_id`` and its signedness."""
    t = btf.resolved(type_id)
    if t.kind is BtfKind.INT:
        if t.size_type == 1 and t.int_encoding & BTF_INT_BOOL:
            return Kind.BOOL, False
        signed = bool(t.int_encoding & BTF_INT_SIGNED)
        if t.size_type == 1:
            return Kind.CHAR, signed
        if t.size_type not in (2, 4, 8):
            return None, signed
        return Kind.INT, signed
    if t.kind in (BtfKind.ENUM, BtfKind.ENUM64):
        if t.name != "libbpf_tristate" or (t.kind is BtfKind.ENUM and t.size_type != 4):
            return None, False
        return Kind.TRISTATE, False
    if t.kind is BtfKind.ARRAY and t.array is not None:
        if not t.array.nelems or _kind(btf, t.array.type)[0] is not Kind.CHAR:
            return None, False
        return Kind.CHAR_ARR, False
    return None, False


def _align(btf: Btf, type_id: int) -> int:
    """``btf__align_of`` for the types a kconfig extern may have."""
    t = btf.resolved(type_id)
    if t.kind is BtfKind.ARRAY and t.array is not None:
        return _align(btf, t.array.type)
    return min(t.size_type, 8)


def kconfig_layout(btf: Btf, externs: dict[str, tuple[int, bool]]
                   ) -> tuple[list[KconfigExtern], int]:
    """The externs (name -> (BTF type id, weak)) laid out as libbpf does, and the
    ``.kconfig`` map's value size."""
    found = []
    for name, (type_id, weak) in externs.items():
        kind, signed = _kind(btf, type_id)
        if kind is None:
            raise NotSupportedError(f"extern (kcfg) '{name}': type is unsupported")
        found.append(KconfigExtern(name, kind, btf.resolve_size(type_id), _align(btf, type_id),
                                   signed, weak))
    found.sort(key=lambda e: (-e.align, e.size, e.name.encode()))
    off = 0
    out = []
    for e in found:
        start = -(-off // e.align) * e.align
        out.append(KconfigExtern(e.name, e.kind, e.size, e.align, e.signed, e.weak, start))
        off = start + e.size
    return out, off


def kernel_version(release: str | None = None) -> int:
    """libbpf's ``get_kernel_version``: ``KERNEL_VERSION`` of ``uname -r`` (0 if unparsable)."""
    rel = release if release is not None else os.uname().release
    parts = []
    for p in rel.split(".")[:3]:
        digits = ""
        for ch in p:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        parts.append(int(digits))
        if digits != p:
            break
    if len(parts) < 3:
        return 0
    return (parts[0] << 16) + (parts[1] << 8) + min(parts[2], 255)


# The arch prefix of syscall entry points where the kernel wraps them (libbpf's
# arch_specific_syscall_pfx).
_SYSCALL_PFX = {"x86_64": "x64", "i686": "ia32", "aarch64": "arm64", "s390x": "s390x",
                "armv7l": "arm", "ppc64le": "powerpc", "riscv64": "riscv",
                "loongarch64": "loongarch"}


def _has_syscall_wrapper() -> bool:
    """libbpf's ``probe_kern_syscall_wrapper``: does ``__<arch>_sys_bpf`` exist?"""
    pfx = _SYSCALL_PFX.get(os.uname().machine)
    if pfx is None:
        return False
    want = f" __{pfx}_sys_bpf"
    try:
        with open("/proc/kallsyms") as fh:
            return any(ln.rstrip("\n").endswith(want) for ln in fh)
    except OSError:
        return False


_SYSTEM_CONFIGS = ("/proc/config.gz",)  # after /boot/config-<release>


def _system_kconfig() -> str:
    """``bpf_object__read_kconfig_file``: ``/boot/config-<release>``, else
    ``/proc/config.gz``."""
    for path in (f"/boot/config-{os.uname().release}", *_SYSTEM_CONFIGS):
        try:
            with gzip.open(path, "rt") as fh:  # gzopen reads plain files too
                return fh.read()
        except gzip.BadGzipFile:
            with open(path) as fh:
                return fh.read()
        except OSError:
            continue
    raise ObjectError("failed to open system Kconfig (neither /boot/config-"
                      f"{os.uname().release} nor {' nor '.join(_SYSTEM_CONFIGS)})")


class _Values:
    def __init__(self, externs: list[KconfigExtern], size: int) -> None:
        self.data = bytearray(size)
        self.by_name = {e.name: e for e in externs}
        self.set: set[str] = set()

    def num(self, e: KconfigExtern, value: int) -> None:
        """``set_kcfg_value_num``."""
        if e.kind not in (Kind.INT, Kind.CHAR, Kind.BOOL):
            raise ObjectError(f"extern (kcfg) '{e.name}': value '{value}' implies integer, "
                              f"char, or boolean type")
        if e.kind is Kind.BOOL and value > 1:
            raise ObjectError(f"extern (kcfg) '{e.name}': value '{value}' isn't boolean "
                              f"compatible")
        bits = e.size * 8
        if e.kind is not Kind.BOOL and e.size != 8:
            fits = (value + (1 << (bits - 1))) % (1 << 64) < (1 << bits) if e.signed \
                else value >> bits == 0
            if not fits:
                raise ObjectError(f"extern (kcfg) '{e.name}': value '{value}' doesn't fit in "
                                  f"{e.size} bytes")
        self.data[e.offset:e.offset + e.size] = (value % (1 << bits)).to_bytes(e.size, "little")
        self.set.add(e.name)

    def tri(self, e: KconfigExtern, value: str) -> None:
        """``set_kcfg_value_tri``."""
        if e.kind is Kind.BOOL:
            if value == "m":
                raise ObjectError(f"extern (kcfg) '{e.name}': value '{value}' implies "
                                  f"tristate or char type")
            b = int(value == "y")
        elif e.kind is Kind.TRISTATE:
            b = {"y": 1, "n": 0, "m": 2}[value]
        elif e.kind is Kind.CHAR:
            b = ord(value)
        else:
            raise ObjectError(f"extern (kcfg) '{e.name}': value '{value}' implies bool, "
                              f"tristate, or char type")
        self.data[e.offset:e.offset + e.size] = b.to_bytes(e.size, "little")
        self.set.add(e.name)

    def string(self, e: KconfigExtern, value: str) -> None:
        """``set_kcfg_value_str``."""
        if e.kind is not Kind.CHAR_ARR:
            raise ObjectError(f"extern (kcfg) '{e.name}': value '{value}' implies char "
                              f"array type")
        if len(value) < 2 or not value.endswith('"'):
            raise ObjectError(f"extern (kcfg) '{e.name}': invalid string config '{value}'")
        raw = value[1:-1].encode()[:e.size - 1]
        self.data[e.offset:e.offset + e.size] = raw.ljust(e.size, b"\0")
        self.set.add(e.name)

    def line(self, text: str) -> None:
        """``bpf_object__process_kconfig_line``."""
        if not text.startswith("CONFIG_"):
            return
        name, sep, value = text.partition("=")
        if not sep:
            raise ObjectError(f"failed to parse '{text}': no separator")
        if not value:
            raise ObjectError(f"failed to parse '{text}': no value")
        e = self.by_name.get(name)
        if e is None or name in self.set:
            return
        if value[0] in "ynm":
            self.tri(e, value[0])
        elif value[0] == '"':
            self.string(e, value)
        else:
            try:
                num = int(value, 0) if not (value.startswith("0") and value[1:].isdigit()) \
                    else int(value, 8)
            except ValueError:
                raise ObjectError(f"extern (kcfg) '{e.name}': value '{value}' isn't a valid "
                                  f"integer") from None
            if num < 0 or num >= 1 << 64:
                raise ObjectError(f"extern (kcfg) '{e.name}': value '{value}' isn't a valid "
                                  f"integer")
            if e.kind not in (Kind.INT, Kind.CHAR):
                raise ObjectError(f"extern (kcfg) '{e.name}': value '{value}' implies "
                                  f"integer type")
            self.num(e, num)

    def text(self, config: str) -> None:
        for ln in config.splitlines():
            self.line(ln)


def resolve_kconfig(externs: list[KconfigExtern], size: int, kconfig: str | None = None,
                    release: str | None = None) -> bytes:
    """The ``.kconfig`` map's value: ``bpf_object__resolve_externs`` for kconfig externs.
    ``kconfig`` is extra Kconfig text, read before the system's; ``release`` stands in
    for ``uname -r``."""
    vals = _Values(externs, size)
    need_config = False
    for e in externs:
        if e.name.startswith("CONFIG_"):
            need_config = True
        elif e.name == "LINUX_KERNEL_VERSION":
            v = kernel_version(release)
            if not v:
                raise ObjectError(f"extern (kcfg) '{e.name}': failed to get kernel version")
            vals.num(e, v)
        elif e.name == "LINUX_HAS_BPF_COOKIE":
            vals.num(e, 1)  # Linux 5.15 and later, the kernels pyxdp models
        elif e.name == "LINUX_HAS_SYSCALL_WRAPPER":
            vals.num(e, int(_has_syscall_wrapper()))
        elif not e.name.startswith("LINUX_") or not e.weak:
            raise ObjectError(f"extern (kcfg) '{e.name}': unrecognized virtual extern")
    if need_config and kconfig is not None:
        vals.text(kconfig)
        need_config = any(e.name not in vals.set for e in externs)
    if need_config:
        vals.text(_system_kconfig())
    for e in externs:
        if e.name not in vals.set and not e.weak:
            raise ObjectError(f"extern '{e.name}' (strong): not resolved")
    return bytes(vals.data)

"""Hostile input round 9: BTF of odd shapes in otherwise valid objects.

The records stay well-formed (same kinds and lengths) but name odd targets and
sizes; loading must end in one specific error, never a Python exception."""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

import pytest

from pyxdp.btf.btf import Btf, BtfKind
from pyxdp.btf.core import CoreRelocationError
from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.errors import ObjectError, PyxdpError
from pyxdp.net.packets import udp_packet
from pyxdp.spec import CollectionSpec

ROOT = Path(__file__).resolve().parents[1]


def _object_btf(name: str) -> tuple[bytes, int, Btf]:
    """A sample object's bytes, where its .BTF blob starts, and the blob parsed (it
    re-encodes byte for byte, so an edited blob of the same kinds replaces it in place)."""
    data = (ROOT / "samples" / name).read_bytes()
    at = data.find(b"\x9f\xeb\x01\x00")  # the .BTF blob's magic and version
    hdr_len, _, type_len, _, str_len = struct.unpack_from("<5I", data, at + 4)
    btf = Btf.parse(data[at:at + hdr_len + type_len + str_len])
    assert btf.encode() == data[at:at + hdr_len + type_len + str_len]
    return data, at, btf


@pytest.mark.parametrize("void_ptr", [False, True])
def test_core_bitfield_member_of_a_pointer_type(void_ptr: bool) -> None:
    """A CO-RE field relocation on a bitfield member whose type is no integer: pyxdp
    took the pointer's target id as the field's byte size, and divided by zero for a
    void pointer (ZeroDivisionError). The kernel's BTF check refuses a bitfield of a
    non-integer type; the relocation is refused as a bad local spec now."""
    spec = load_collection_spec(ROOT / "samples" / "core.o")
    btf = spec.btf
    assert btf is not None
    st = next(t for t in btf.types if t.name == "iphdr___core")
    idx = next(i for i, m in enumerate(st.members) if m.bitfield_size)
    ptr = next(t for t in btf.types if t.kind is BtfKind.PTR)
    members = list(st.members)
    members[idx] = dataclasses.replace(members[idx], type=ptr.id)
    changed = {st.id: dataclasses.replace(st, members=tuple(members))}
    if void_ptr:
        changed[ptr.id] = dataclasses.replace(ptr, size_type=0)
    odd = dataclasses.replace(spec, btf=btf.with_types(changed))
    with pytest.raises(CoreRelocationError) as e:
        Collection(odd, "userspace", engine="interp")
    msg = str(e.value)
    assert "\n" not in msg
    assert f"bitfield member #{idx} of struct iphdr___core is not of a sized integer" in msg


def test_a_struct_that_contains_itself_is_refused_at_parse() -> None:
    """struct bpf_spin_lock given a member of struct pair, which holds a bpf_spin_lock:
    a type containing itself by value has no size. pyxdp loaded the object and decoding
    a map value recursed until RecursionError; the kernel's BTF check answers "Loop
    detected", and pyxdp's parser now refuses the object in one line."""
    data, at, btf = _object_btf("graph_list.o")
    lock = btf.types[btf.find("bpf_spin_lock", BtfKind.STRUCT) or 0]
    pair = btf.find("pair", BtfKind.STRUCT)
    assert lock.members and pair is not None
    looped = btf.with_types({lock.id: dataclasses.replace(
        lock, members=(dataclasses.replace(lock.members[0], type=pair),))}).encode()
    with pytest.raises(ObjectError) as e:
        load_collection_spec(data[:at] + looped + data[at + len(looped):])
    msg = str(e.value)
    assert "\n" not in msg and "bpf_spin_lock contains itself (loop detected)" in msg


@pytest.mark.parametrize("shape", ["short", "unaligned"])
def test_a_member_outside_its_struct_is_refused_at_parse(shape: str) -> None:
    """A struct whose size leaves out its bpf_list_head member (or a member at an odd
    bit offset): pyxdp loaded it and freeing the map's lists wrote past the value in a
    finalizer ("Exception ignored ... ValueError" on stderr). btf_struct_resolve answers
    "Member exceeds struct_size" / "Member is not byte aligned"; so does the parser."""
    data, at, btf = _object_btf("graph_list.o")
    head = btf.find("bpf_list_head", BtfKind.STRUCT)
    owner = next(t for t in btf.types if t.kind is BtfKind.STRUCT
                 and any(m.type == head for m in t.members))
    idx = next(i for i, m in enumerate(owner.members) if m.type == head)
    if shape == "short":
        odd = dataclasses.replace(owner, size_type=owner.members[idx].bit_offset // 8 + 8)
    else:
        members = list(owner.members)
        members[idx] = dataclasses.replace(members[idx], bit_offset=members[idx].bit_offset + 4)
        odd = dataclasses.replace(owner, members=tuple(members))
    blob = btf.with_types({owner.id: odd}).encode()
    with pytest.raises(ObjectError) as e:
        load_collection_spec(data[:at] + blob + data[at + len(blob):])
    what = "exceeds struct_size" if shape == "short" else "is not byte aligned"
    msg = str(e.value)
    assert "\n" not in msg and f"of [{owner.id}] STRUCT {owner.name} {what}" in msg


def test_a_kconfig_char_array_above_int_max_is_e2big() -> None:
    """An extern char CONFIG_DEFAULT_HOSTNAME[] of 2^32 - 1 elements: the .kconfig
    buffer was allocated whole (4 GiB; MemoryError under a memory limit). An array
    map's value above INT_MAX is E2BIG (array_map_alloc_check); refused first now."""
    data, at, btf = _object_btf("loader/kconfig.v3.o")
    sec = btf.types[btf.find(".kconfig", BtfKind.DATASEC) or 0]
    var = next(btf.types[s.type] for s in sec.secinfos
               if btf.types[s.type].name == "CONFIG_DEFAULT_HOSTNAME")
    arr = btf.types[var.size_type]
    assert arr.array is not None
    blob = btf.with_types({arr.id: dataclasses.replace(
        arr, array=dataclasses.replace(arr.array, nelems=0xFFFF_FFFF))}).encode()
    with pytest.raises(ObjectError) as e:
        load_collection_spec(data[:at] + blob + data[at + len(blob):])
    msg = str(e.value)
    assert "\n" not in msg and "'.kconfig' externs take" in msg and "E2BIG" in msg


# --------------------------------------------------------------------------
# BTF Linux refuses: both backends go on without it, as libbpf does
# --------------------------------------------------------------------------

def _refused_btf(name: str) -> CollectionSpec:
    """A sample's spec whose BTF BPF_BTF_LOAD refuses (an int of 200 bits)."""
    spec = load_collection_spec(ROOT / "samples" / name)
    assert spec.btf is not None
    t = next(t for t in spec.btf.types if t.kind is BtfKind.INT)
    return dataclasses.replace(spec, btf=spec.btf.with_types(
        {t.id: dataclasses.replace(t, int_bits=200)}))


def _outcome(spec: CollectionSpec, backend: str) -> str:
    """What loading ``spec`` gives: the retval of each program's run, or the error."""
    try:
        with Collection(spec, backend) as coll:
            return " ".join(f"{n}={p.test_run(udp_packet(b'x')).retval}"
                            for n, p in sorted(coll.programs.items()))
    except PyxdpError as e:
        return f"{type(e).__name__}: {e}"


# sample, what both backends answer
REFUSED_BTF_OUTCOMES = [
    # nothing needs BTF: maps without BTF types, the program without func info
    ("xdp1.o", "xdp_prog1=1"),
    # a struct bpf_timer is only found through BTF: the map cannot be created
    ("timer.o", "MapError: create: EINVAL (Invalid argument): map 'timers' needs BTF (its "
                "value holds a struct bpf_timer) and none is loaded: "),
    # callbacks need func info
    ("loader/multi_prog.v3.o", "VerifierError: "),
]


@pytest.mark.parametrize(("name", "want"), REFUSED_BTF_OUTCOMES,
                         ids=[n for n, _ in REFUSED_BTF_OUTCOMES])
def test_refused_btf_userspace(name: str, want: str) -> None:
    got = _outcome(_refused_btf(name), "userspace")
    assert got.startswith(want), got
    if "needs BTF" in got:  # the reason names the BTF problem, on one line
        assert got.endswith("BTF refused: [2] INT int nr_bits exceeds 128")
    if name.startswith("loader/multi_prog"):
        assert "missing btf func_info" in got


@pytest.mark.kernel
@pytest.mark.parametrize(("name", "want"), REFUSED_BTF_OUTCOMES,
                         ids=[n for n, _ in REFUSED_BTF_OUTCOMES])
def test_refused_btf_kernel_same(name: str, want: str) -> None:
    spec = _refused_btf(name)
    got = _outcome(spec, "kernel")
    assert got.startswith(want), got
    assert got.endswith("nr_bits exceeds 128") or "needs BTF" not in got
    assert ("missing btf func_info" in got) == name.startswith("loader/multi_prog")
    user = _outcome(spec, "userspace")
    assert got.split(":")[0] == user.split(":")[0]


def test_kernel_check_survives_byte_flips() -> None:
    # any blob gets an answer (a line or None), never an exception
    import random

    from pyxdp.btf.kcheck import kernel_check, kernel_fixup
    rng = random.Random(21)
    for name in ("xdp1.o", "graph_list.o", "strings.o"):
        spec = load_collection_spec(ROOT / "samples" / name)
        assert spec.btf is not None
        raw = kernel_fixup(spec.btf)[0].raw
        for _ in range(300):
            blob = bytearray(raw)
            for _ in range(rng.randint(1, 4)):
                blob[rng.randrange(len(blob))] = rng.randrange(256)
            got = kernel_check(bytes(blob))
            assert got is None or (got and "\n" not in got)

"""A referenced __kptr to a kernel struct needs the struct's destructor kfunc, as
Linux 6.18's btf_parse_kptr wants (btf_find_dtor_kfunc): struct nf_conn has none,
so the object's BTF is refused at BPF_BTF_LOAD (ENOENT), and the map whose value
holds the kptr is refused on both backends, since it needs that BTF
(tests/verifier_objects/ct_kptr.c)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyxdp.btf.btf import BtfKind
from pyxdp.btf.vmlinux import core_target
from pyxdp.collection import Collection
from pyxdp.elf import load_collection_spec
from pyxdp.errors import MapError, UnsupportedHelper
from pyxdp.verifier.verifier import btf_load_refusal

OBJ = Path(__file__).resolve().parent / "verifier_objects" / "ct_kptr.o"
TASK_OBJ = Path(__file__).resolve().parent / "verifier_objects" / "task_kptr.o"


def test_a_kptr_to_a_struct_without_destructor_refuses_the_btf() -> None:
    """Found comparing with Linux: pyxdp took the BTF and raised UnsupportedHelper at
    the bpf_kptr_xchg ("not modelled"); Linux refuses the BTF, then the program."""
    if not core_target(None).find("nf_conn", BtfKind.STRUCT):
        pytest.skip("the kernel BTF here has no struct nf_conn (pyxdp's shipped one lacks it)")
    spec = load_collection_spec(OBJ)
    assert spec.btf is not None
    why = btf_load_refusal(spec.btf, None)
    assert why is not None and "kernel struct nf_conn" in why and "ENOENT" in why
    # task_struct and cgroup have destructors: that BTF loads
    task = load_collection_spec(TASK_OBJ).btf
    assert task is not None and btf_load_refusal(task, None) is None
    # as on the kernel backend: a map whose value needs the refused BTF is not created
    with pytest.raises(MapError, match="map 'ctmap' needs BTF .* kernel struct nf_conn, "
                       "which has no destructor kfunc") as e:
        Collection.load(OBJ, backend="userspace")
    assert not isinstance(e.value, UnsupportedHelper)


@pytest.mark.kernel
def test_linux_refuses_the_btf_with_enoent() -> None:
    """Linux's answer, through the kernel backend (which refuses a map whose value
    needs BTF once the BTF is refused, where libbpf would go on to the verifier)."""
    with pytest.raises(MapError, match="BPF_BTF_LOAD failed: ENOENT"):
        Collection.load(OBJ, backend="kernel")

"""``samples/flowtable.o`` through the kernel backend: Linux 6.18 without
``CONFIG_NF_FLOW_TABLE`` (this machine) has no ``bpf_xdp_flow_lookup`` in its BTF, so
the object is refused as libbpf refuses it, by the kfunc's name, before anything is
loaded; a kernel that has the kfunc loads it and its verifier accepts it, as pyxdp's
does. The per-packet behaviour is pyxdp's alone (tests/test_nf_flow_table.py), held to
the kernel's source."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyxdp.btf.btf import BtfKind
from pyxdp.btf.vmlinux import kernel_btf_index
from pyxdp.collection import Collection
from pyxdp.errors import PyxdpError

pytestmark = pytest.mark.kernel

FLOWTABLE = Path(__file__).resolve().parents[2] / "samples" / "flowtable.o"


def test_flowtable_object_needs_the_kfunc_in_the_kernels_btf() -> None:
    kernel = kernel_btf_index()
    assert kernel is not None, "the kernel backend needs /sys/kernel/btf/vmlinux"
    if kernel.find("bpf_xdp_flow_lookup", BtfKind.FUNC) is None:
        with pytest.raises(PyxdpError) as e:
            Collection.load(FLOWTABLE, "kernel")
        assert str(e.value).endswith("extern (func ksym) 'bpf_xdp_flow_lookup': not found "
                                     "in kernel BTF")
        assert "\n" not in str(e.value)
    else:
        with Collection.load(FLOWTABLE, "kernel") as c:
            assert "xdp_flowtable" in c.programs
    # pyxdp's engines provide it whatever the kernel has
    with Collection.load(FLOWTABLE) as c:
        assert "xdp_flowtable" in c.programs

"""BTF (BPF Type Format) and ``.BTF.ext`` parsing, modelled on the kernel's ``btf.h``.

No kernel calls: these are plain decoders/encoders for the blobs clang puts
into an object file.
"""

from pyxdp.btf.btf import (
    BTF_FUNC_EXTERN,
    BTF_FUNC_GLOBAL,
    BTF_FUNC_STATIC,
    BTF_VAR_GLOBAL_ALLOCATED,
    BTF_VAR_GLOBAL_EXTERN,
    BTF_VAR_STATIC,
    Btf,
    BtfArray,
    BtfEnumValue,
    BtfKind,
    BtfMember,
    BtfParam,
    BtfType,
    BtfVarSecinfo,
)
from pyxdp.btf.ext import BtfExt, CoreRelo, FuncInfoRecord, LineInfoRecord

__all__ = [
    "BTF_FUNC_EXTERN",
    "BTF_FUNC_GLOBAL",
    "BTF_FUNC_STATIC",
    "BTF_VAR_GLOBAL_ALLOCATED",
    "BTF_VAR_GLOBAL_EXTERN",
    "BTF_VAR_STATIC",
    "Btf",
    "BtfArray",
    "BtfEnumValue",
    "BtfExt",
    "BtfKind",
    "BtfMember",
    "BtfParam",
    "BtfType",
    "BtfVarSecinfo",
    "CoreRelo",
    "FuncInfoRecord",
    "LineInfoRecord",
]

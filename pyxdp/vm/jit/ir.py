"""Building LLVM IR as text: the function builder, constants, metadata and declarations.

The lowering writes IR as text because llvmlite's object builder costs more
Python time than LLVM spends at -O0. :class:`Text` is one function's body
(fresh SSA names, labels, loads and stores of the run context's words with
their alias tags); the module-wide metadata (branch weights, type-based alias
tags) and intrinsic declarations every module starts with are here too, so
native helper lowerings registered by other packages (see
:mod:`pyxdp.vm.jit.natives`) build their functions with the same tools.
"""

from __future__ import annotations

from pyxdp.vm.jit.abi import CTX, M64

__all__ = [
    "DECLS", "LIKELY", "METADATA", "RET_T", "TBAA_CTX", "TBAA_CTX_VALUES", "TBAA_DIRTY",
    "TBAA_MEM", "TBAA_TABLE", "UNLIKELY", "Text", "c64", "cint", "ret_if", "s32",
]

RET_T = "{ i64, i64, i64, i64, i64, i64 }"  # what a bpf function returns: r0..r5
INT_TYPES = {1: "i8", 2: "i16", 4: "i32", 8: "i64"}
INT_WIDTHS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64}
# Metadata: branch weights, and type-based alias tags: the run context's fields ("ctx"),
# the region table ("table"), ctx_values, ctx.stack_dirty ("dirty", so marking a frame
# does not make LLVM reload the table) and program memory ("mem": stack frames,
# packets, map values) never share bytes (no region maps the ctypes structures), so
# LLVM may keep table fields in registers across the program's stores. Type tags
# survive inlining (scoped noalias metadata would be cloned apart per inlined copy).
LIKELY = ", !prof !1"
UNLIKELY = ", !prof !2"
TBAA_CTX = ", !tbaa !12"
TBAA_DIRTY = ", !tbaa !16"
TBAA_MEM = ", !tbaa !14"
TBAA_TABLE = ", !tbaa !18"  # region table entries
TBAA_CTX_VALUES = ", !tbaa !20"   # ctx_values entries
METADATA = """
!1 = !{!"branch_weights", i32 1048576, i32 1}
!2 = !{!"branch_weights", i32 1, i32 1048576}
!10 = !{!"pyxdp.tbaa"}
!11 = !{!"pyxdp.ctx", !10, i64 0}
!12 = !{!11, !11, i64 0}
!13 = !{!"pyxdp.mem", !10, i64 0}
!14 = !{!13, !13, i64 0}
!15 = !{!"pyxdp.dirty", !10, i64 0}
!16 = !{!15, !15, i64 0}
!17 = !{!"pyxdp.table", !10, i64 0}
!18 = !{!17, !17, i64 0}
!19 = !{!"pyxdp.ctx_values", !10, i64 0}
!20 = !{!19, !19, i64 0}
"""
DECLS = """
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
declare void @llvm.memmove.p0.p0.i64(ptr, ptr, i64, i1)
declare i16 @llvm.bswap.i16(i16)
declare i32 @llvm.bswap.i32(i32)
declare i64 @llvm.bswap.i64(i64)
declare i64 @llvm.cttz.i64(i64, i1)
declare i64 @llvm.ctlz.i64(i64, i1)
declare i32 @clock_gettime(i32, ptr)
attributes #0 = { alwaysinline }
attributes #1 = { noinline }
"""


def c64(v: int) -> str:
    """An i64 constant; LLVM's parser wants the signed spelling of the top half."""
    v &= M64
    return str(v - (1 << 64) if v >> 63 else v)


def cint(ty: str, v: int) -> str:
    w = INT_WIDTHS[ty]
    v &= (1 << w) - 1
    return str(v - (1 << w) if v >> (w - 1) else v)


class Text:
    """One function's body as LLVM IR text: fresh SSA names, labels, instructions."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.n = 0
        self.cur = "entry"
        # Run-context words read once at a function's entry (see FuncLowering): cget
        # of ``%ctx`` gives the value read there.
        self.fixed: dict[str, str] = {}

    def tmp(self) -> str:
        self.n += 1
        return f"%t{self.n}"

    def label(self, hint: str) -> str:
        self.n += 1
        return f"{hint}.{self.n}"

    def at(self, label: str) -> None:
        self.lines.append(f"{label}:")
        self.cur = label

    def ins(self, text: str) -> str:
        v = self.tmp()
        self.lines.append(f"  {v} = {text}")
        return v

    def do(self, text: str) -> None:
        self.lines.append(f"  {text}")

    # -- small helpers ------------------------------------------------------------
    def gep(self, base: str, off: str | int) -> str:
        if off == 0 or off == "0":
            return base
        return self.ins(f"getelementptr i8, ptr {base}, i64 {off}")

    def word(self, base: str, index: int, ty: str = "i64", md: str = TBAA_CTX) -> str:
        return self.ins(f"load {ty}, ptr {self.gep(base, 8 * index)}, align 8{md}")

    def set_word(self, base: str, index: int, v: str, ty: str = "i64", md: str = TBAA_CTX) -> None:
        self.do(f"store {ty} {v}, ptr {self.gep(base, 8 * index)}, align 8{md}")

    def cget(self, ctx: str, name: str, ty: str = "i64") -> str:
        if ctx == "%ctx" and name in self.fixed:
            return self.fixed[name]
        return self.word(ctx, CTX[name], ty, TBAA_DIRTY if name == "stack_dirty" else TBAA_CTX)

    def cset(self, ctx: str, name: str, v: str, ty: str = "i64") -> None:
        self.set_word(ctx, CTX[name], v, ty, TBAA_DIRTY if name == "stack_dirty" else TBAA_CTX)

    def at_index(self, base: str, index: str, ty: str, scale: int, md: str = "") -> str:
        off = self.ins(f"mul i64 {index}, {scale}")
        return self.ins(f"load {ty}, ptr {self.gep(base, off)}, align 1{md}")

    def put_index(self, base: str, index: str, v: str, ty: str, scale: int,
                  md: str = "") -> None:
        off = self.ins(f"mul i64 {index}, {scale}")
        self.do(f"store {ty} {v}, ptr {self.gep(base, off)}, align 1{md}")

    def br(self, label: str) -> None:
        self.do(f"br label %{label}")

    def cbr(self, cond: str, yes: str, no: str, prof: str = "") -> None:
        self.do(f"br i1 {cond}, label %{yes}, label %{no}{prof}")

    # Both only ever touch program memory (stack frames, packets, map storage).
    def memset(self, p: str, n: str | int) -> None:
        self.do(f"call void @llvm.memset.p0.i64(ptr {p}, i8 0, i64 {n}, i1 false){TBAA_MEM}")

    def memmove(self, dst: str, src: str, n: str | int) -> None:
        self.do(f"call void @llvm.memmove.p0.p0.i64(ptr {dst}, ptr {src}, i64 {n}, i1 false)"
                f"{TBAA_MEM}")

    def flag(self, bit: int) -> str:
        """i1: ``ctx.nflags & bit``."""
        v = self.cget("%ctx", "nflags")
        return self.ins(f"icmp ne i64 {self.ins(f'and i64 {v}, {bit}')}, 0")

    def text(self, header: str) -> str:
        return header + " {\n" + "\n".join(self.lines) + "\n}\n"


def s32(f: Text, v: str) -> str:
    return f.ins(f"sext i32 {f.ins(f'trunc i64 {v} to i32')} to i64")


def ret_if(f: Text, cond: str, value: int) -> None:
    nxt = f.label("n")
    out = f.label("e")
    f.cbr(cond, out, nxt)
    f.at(out)
    f.do(f"ret i64 {c64(value)}")
    f.at(nxt)

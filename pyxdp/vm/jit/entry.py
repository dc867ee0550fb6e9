"""The entry points of generated code: a run, callbacks, the batch loops, the XDP entry.

What ``bpf_prog_run`` and ``bpf_prog_run_xdp`` are to a kernel program:
``<tag>_run`` starts one run on a fresh frame 0; ``<tag>_cb<pc>`` is a
callback's entry (``bpf_loop``, ``for_each_map_elem`` through Python; the native
``bpf_rbtree_add`` calls its ``less`` directly); ``pyxdp_batch``
(shared by all programs, in the runtime module) runs a program over a batch of
contexts; ``<tag>_xdp`` is the XDP batch loop that sets each frame's
``xdp_buff`` fields, packet region and ``xdp_md`` values (``pkt``), runs the
program ``repeat`` times and writes the verdicts back; ``tailcall`` enters
another program's XDP entry for a native ``bpf_tail_call``. ``zero`` clears
a fresh stack frame as the interpreter's fresh frames are.
"""

from __future__ import annotations

from pyxdp.vm.jit.abi import (
    BATCH,
    CTX_VALUES,
    FRAG_WORDS,
    FRAGS_PYTHON,
    KERN,
    REGION,
    SLOT,
    SLOT_FIELDS,
    ST_ABORT,
    ST_TAIL,
    XDP,
    XDP_FIELDS,
)
from pyxdp.vm.jit.analysis import Program
from pyxdp.vm.jit.ir import (
    DECLS,
    LIKELY,
    METADATA,
    RET_T,
    TBAA_CTX_VALUES,
    TBAA_TABLE,
    UNLIKELY,
    Text,
    c64,
)
from pyxdp.vm.memory import STACK_SIZE

__all__ = ["CALL_FROM_LOOP_INSNS", "callback_fn", "entry_fn", "pkt_fn", "runtime_module",
           "tailcall_fn", "xdp_fn", "zero_fn"]

# A program of this many instructions or more is called from its batch loop, not
# inlined into it (see xdp_fn).
CALL_FROM_LOOP_INSNS = 1000


def pkt_fn(pkt_base: int) -> str:
    """``pkt(ctx)``: region 0 and ctx_values[0..2] from the x_* fields (XdpBuff.sync_region
    and the xdp_md pointers), and the packet pointers of the run's kernel xdp_buff image
    when it has one (``kern``)."""
    f = Text()
    f.at("entry")
    data, end, meta = (f.cget("%ctx", n) for n in ("x_data", "x_data_end", "x_data_meta"))
    frame = f.cget("%ctx", "x_frame", "ptr")
    start = f.ins(f"select i1 {f.ins(f'icmp ule i64 {meta}, {data}')}, i64 {meta}, i64 {data}")
    tab = f.cget("%ctx", "regions", "ptr")
    f.set_word(tab, REGION["base"], f.ins(f"add i64 {start}, {c64(pkt_base)}"), "i64", TBAA_TABLE)
    f.set_word(tab, REGION["size"], f.ins(f"sub i64 {end}, {start}"), "i64", TBAA_TABLE)
    f.set_word(tab, REGION["host"], f.gep(frame, start), "ptr", TBAA_TABLE)
    f.set_word(tab, REGION["writable"], "1", "i64", TBAA_TABLE)
    cv = f.cget("%ctx", "ctx_values", "ptr")
    ptrs = [f.ins(f"add i64 {v}, {c64(pkt_base)}") for v in (data, end, meta)]
    for n, v in enumerate(ptrs):
        f.set_word(cv, n, v, "i64", TBAA_CTX_VALUES)
    # A kernel image of the xdp_buff (bpf_cast_to_kern_ctx's) follows the edges too, as
    # XdpBuff.sync_region keeps KernCtx in step.
    k = f.cget("%ctx", "kern", "ptr")
    f.cbr(f.ins(f"icmp eq ptr {k}, null"), "out", "kern", LIKELY)
    f.at("kern")
    host = f.word(k, KERN["host"], "ptr", "")
    f.cbr(f.ins(f"icmp eq ptr {host}, null"), "out", "mirror")
    f.at("mirror")
    for name, v in zip(("off_data", "off_data_end", "off_data_meta"), ptrs, strict=True):
        f.do(f"store i64 {v}, ptr {f.gep(host, f.word(k, KERN[name], 'i64', ''))}, align 1")
    f.br("out")
    f.at("out")
    f.do("ret void")
    return f.text("define internal void @pkt(ptr %ctx) nounwind")


def tailcall_fn() -> str:
    """``tailcall(ctx, tctx, fn, budget, slot) -> r0``: run a target program's XDP entry
    (``fn``) on this run's xdp_buff as a batch of one frame with its own run context
    ``tctx``; the buffer's edges, the redirect state and the tail call count come back.
    When the target faults, ``ctx`` gets ST_TAIL (or ST_ABORT) and the target's record."""
    f = Text()
    f.at("entry")
    desc = f.ins(f"alloca [{len(XDP_FIELDS)} x i64], align 8")
    io = f.ins("alloca [12 x i32], align 8")
    wide = f.ins("alloca [5 x i64], align 8")
    shared = ("nflags", "cpu", "xsk_table", "xsk_ntable", "ri_present", "ri_tgt_index",
              "ri_map_id", "ri_map_type", "ri_flags", "ri_map", "ri_tv_set", "ri_tv")
    for name in shared:
        f.cset("%tctx", name, f.cget("%ctx", name))
    data, end, meta = (f.cget("%ctx", n) for n in ("x_data", "x_data_end", "x_data_meta"))
    ok = f.ins(f"icmp ule i64 {meta}, {data}")
    mlen = f.ins(f"select i1 {ok}, i64 {f.ins(f'sub i64 {data}, {meta}')}, i64 0")
    cv = f.cget("%ctx", "ctx_values", "ptr")
    ins = (data, f.ins(f"sub i64 {end}, {data}"), mlen, f.word(cv, 4, "i64", TBAA_CTX_VALUES),
           f.word(cv, 3, "i64", TBAA_CTX_VALUES))
    for k, v in enumerate(ins):
        f.do(f"store i32 {f.ins(f'trunc i64 {v} to i32')}, ptr {f.gep(io, 4 * k)}, align 4")
    iop = f.ins(f"ptrtoint ptr {io} to i64")
    wp = f.ins(f"ptrtoint ptr {wide} to i64")
    words = {
        "count": "1", "repeat": "1", "budget": "%budget",
        "frames": f.ins(f"ptrtoint ptr {f.cget('%ctx', 'x_frame', 'ptr')} to i64"),
        "stride": "0", "frame_sz": f.cget("%ctx", "x_frame_sz"),
        "data_off": iop, "data_len": f.ins(f"add i64 {iop}, 4"),
        "meta_len": f.ins(f"add i64 {iop}, 8"), "meta_ok": f.ins(f"zext i1 {ok} to i64"),
        "frags": f.cget("%ctx", "x_frags"), "rxq": f.ins(f"add i64 {iop}, 12"),
        "ifindex": f.ins(f"add i64 {iop}, 16"), "egress": f.word(cv, 5, "i64", TBAA_CTX_VALUES),
        "act_out": f.ins(f"add i64 {iop}, 20"), "off_out": f.ins(f"add i64 {iop}, 24"),
        "len_out": f.ins(f"add i64 {iop}, 28"), "meta_out": f.ins(f"add i64 {iop}, 32"),
        "status_out": f.ins(f"add i64 {iop}, 36"), "pc_out": f.ins(f"add i64 {iop}, 40"),
        "addr_out": wp, "redirect_out": f.ins(f"add i64 {wp}, 8"), "done": "0",
        "tail_cnt0": f.cget("%ctx", "tail_cnt"), "rows": "0", "consume_ri": "0",
    }
    for name, v in words.items():
        f.set_word(desc, XDP[name], v, "i64", "")
    f.do(f"call void {f.ins('inttoptr i64 %fn to ptr')}(ptr %tctx, ptr {desc})")
    # The buffer's edges come back; region 0 and the xdp_md values of this run need not:
    # the calling function ends now (with the target's r0, or its fault).
    for name in ("x_data", "x_data_end", "x_data_meta", "x_frags", "tail_cnt", *shared[4:]):
        f.cset("%ctx", name, f.cget("%tctx", name))
    word = f.ins(f"zext i32 {f.ins(f'load i32, ptr {f.gep(io, 36)}, align 4')} to i64")
    status = f.ins(f"and i64 {word}, 255")
    f.cbr(f.ins(f"icmp eq i64 {status}, 0"), "fine", "fault", LIKELY)
    f.at("fine")
    act = f.ins(f"load i32, ptr {f.gep(io, 20)}, align 4")
    f.do(f"ret i64 {f.ins(f'zext i32 {act} to i64')}")
    f.at("fault")
    aborted = f.ins(f"icmp eq i64 {status}, {ST_ABORT}")
    f.cset("%ctx", "status", f.ins(f"select i1 {aborted}, i64 {ST_ABORT}, i64 {ST_TAIL}"))
    tpc = f.ins(f"load i32, ptr {f.gep(io, 40)}, align 4")
    f.cset("%ctx", "fault_pc", f.ins(f"zext i32 {tpc} to i64"))
    f.cset("%ctx", "fault_addr", f.ins(f"load i64, ptr {wide}, align 8"))
    f.cset("%ctx", "max_depth", f.ins(f"or i64 {word}, {f.ins('shl i64 %slot, 16')}"))
    f.do("ret i64 0")
    return f.text("define internal i64 @tailcall(ptr %ctx, ptr %tctx, i64 %fn, i64 %budget, "
                  "i64 %slot) nounwind")


def zero_fn(prog: Program) -> str:
    """``zero(ctx, depth)``: make frame ``depth`` all zeros, as a fresh interpreter frame.

    Between runs a frame can only hold non-zero bytes where proven stores
    write (the footprint) unless ``stack_dirty`` says otherwise."""
    f = Text()
    f.at("entry")
    frame = f.gep(f.cget("%ctx", "stack", "ptr"), f.ins("shl i64 %depth, 9"))
    footprint = prog.footprint
    if sum(b - a for a, b in footprint) >= STACK_SIZE // 2:
        footprint = [(0, STACK_SIZE)]
    dirty = f.cget("%ctx", "stack_dirty")
    bit = f.ins("shl i64 1, %depth")
    f.cbr(f.ins(f"icmp ne i64 {f.ins(f'and i64 {dirty}, {bit}')}, 0"), "full", "part", UNLIKELY)
    f.at("full")
    f.memset(frame, STACK_SIZE)
    f.cset("%ctx", "stack_dirty", f.ins(f"and i64 {dirty}, {f.ins(f'xor i64 {bit}, -1')}"))
    f.do("ret void")
    f.at("part")
    for a, b in footprint:
        f.memset(f.gep(frame, a), b - a)
    f.do("ret void")
    return f.text(f"define internal void @{prog.tag}_zero(ptr %ctx, i64 %depth) nounwind")


def _call_main(f: Text, prog: Program, r1: str, r2: str, attrs: str = "#1") -> str:
    """Start a run: frame 0 fresh, every register zero but r1, r2; return r0."""
    f.cset("%ctx", "max_depth", "0")
    f.do(f"call void @{prog.tag}_zero(ptr %ctx, i64 0)")
    args = ", ".join(["i64 0", f"i64 {r1}", f"i64 {r2}"] + ["i64 0"] * 7)
    res = f.ins(f"call {RET_T} @{prog.funcs[0]}(ptr %ctx, i64 0, {args}) {attrs}")
    return f.ins(f"extractvalue {RET_T} {res}, 0")


def entry_fn(prog: Program) -> str:
    f = Text()
    f.at("entry")
    # One copy of each bpf function: entry points call them, never inline them.
    f.do(f"ret i64 {_call_main(f, prog, '%r1', '%r2')}")
    return f.text(f"define i64 @{prog.tag}_run(ptr %ctx, i64 %r1, i64 %r2) nounwind")


def callback_fn(prog: Program, pc: int) -> str:
    f = Text()
    f.at("entry")
    args = ", ".join(["i64 0"] + [f"i64 %r{n}" for n in range(1, 6)] + ["i64 0"] * 4)
    res = f.ins(f"call {RET_T} @{prog.funcs[pc]}(ptr %ctx, i64 %depth, {args}) #1")
    f.do(f"ret i64 {f.ins(f'extractvalue {RET_T} {res}, 0')}")
    params = ", ".join(f"i64 %r{n}" for n in range(1, 6))
    return f.text(f"define i64 @{prog.tag}_cb{pc}(ptr %ctx, i64 %depth, {params}) nounwind")


def xdp_fn(prog: Program) -> str:
    """``<tag>_xdp(ctx, desc)``: run the program once per frame of an XDP batch.

    Per frame: the xdp_buff fields from the descriptor, the packet region and
    the xdp_md values from them, a fresh run (frame 0 zeroed, the budget full),
    ``repeat`` runs on the same buffer (test_run's repeat: nothing is reset
    between them, a fault ends them), then the verdict (XDP_ABORTED on a fault),
    the buffer's new edges, the fault record and the redirect state written
    back. An interrupted Python helper (ST_ABORT) ends the batch.
    """
    nat = prog.natives
    f = Text()
    f.at("entry")

    def dw(name: str, ty: str = "i64") -> str:
        return f.word("%desc", XDP[name], ty, "")

    count, repeat, budget = dw("count"), dw("repeat"), dw("budget")
    frames, stride, frame_sz = dw("frames", "ptr"), dw("stride"), dw("frame_sz")
    # rows (i64 per frame, or null): frame i is row rows[i] of the frames array, so a
    # poll can run pages scattered over a page pool without gathering them first.
    rows = dw("rows", "ptr")
    has_rows = f.ins(f"icmp ne ptr {rows}, null")
    d_off, d_len, m_len = dw("data_off", "ptr"), dw("data_len", "ptr"), dw("meta_len", "ptr")
    meta_ok, frags, tail0 = dw("meta_ok"), dw("frags"), dw("tail_cnt0")
    rxq, ifindex, egress = dw("rxq", "ptr"), dw("ifindex", "ptr"), dw("egress")
    outs = {n: dw(n, "ptr") for n in ("act_out", "off_out", "len_out", "meta_out",
                                      "status_out", "pc_out", "addr_out", "redirect_out")}
    has_meta = f.ins(f"icmp ne ptr {m_len}, null")
    sup = f.ins(f"icmp ne i64 {meta_ok}, 0")
    cv = f.cget("%ctx", "ctx_values", "ptr")
    f.br("head")
    f.at("head")
    f.do("%i = phi i64 [ 0, %entry ], [ %i1, %next ]")
    f.cbr(f.ins(f"icmp ult i64 %i, {count}"), "body", "done")
    f.at("body")
    f.cbr(has_rows, "rw", "rj")
    f.at("rw")
    row = f.at_index(rows, "%i", "i64", 8)
    f.br("rj")
    f.at("rj")
    rowi = f.ins(f"phi i64 [ {row}, %rw ], [ %i, %body ]")
    frame = f.gep(frames, f.ins(f"mul i64 {rowi}, {stride}"))
    data = f.ins(f"zext i32 {f.at_index(d_off, '%i', 'i32', 4)} to i64")
    dlen = f.at_index(d_len, "%i", "i32", 4)
    end = f.ins(f"add i64 {data}, {f.ins(f'zext i32 {dlen} to i64')}")
    f.cbr(has_meta, "ml", "mz")
    f.at("ml")
    ml = f.ins(f"zext i32 {f.at_index(m_len, '%i', 'i32', 4)} to i64")
    f.br("mj")
    f.at("mz")
    f.br("mj")
    f.at("mj")
    mlen = f.ins(f"phi i64 [ {ml}, %ml ], [ 0, %mz ]")
    meta = f.ins(f"select i1 {sup}, i64 {f.ins(f'sub i64 {data}, {mlen}')}, "
                 f"i64 {f.ins(f'add i64 {data}, 1')}")
    # x_frags: the frame's row of the frag table while it has frags (0, or FRAGS_PYTHON)
    f.cbr(f.ins(f"icmp ugt i64 {frags}, {FRAGS_PYTHON}"), "ft", "fj")
    f.at("ft")
    frow = f.ins(f"add i64 {frags}, {f.ins(f'mul i64 %i, {8 * FRAG_WORDS}')}")
    fnr = f.ins(f"load i64, ptr {f.ins(f'inttoptr i64 {frow} to ptr')}, align 8")
    frow = f.ins(f"select i1 {f.ins(f'icmp ne i64 {fnr}, 0')}, i64 {frow}, i64 0")
    f.br("fj")
    f.at("fj")
    xfrags = f.ins(f"phi i64 [ {frow}, %ft ], [ {frags}, %mj ]")
    for name, v in (("x_data", data), ("x_data_end", end), ("x_data_meta", meta),
                    ("x_frame_sz", frame_sz), ("x_frags", xfrags)):
        f.cset("%ctx", name, v)
    f.cset("%ctx", "x_frame", frame, "ptr")
    for n, arr in ((3, ifindex), (4, rxq)):
        v = f.ins(f"zext i32 {f.at_index(arr, '%i', 'i32', 4)} to i64")
        f.set_word(cv, n, v, "i64", TBAA_CTX_VALUES)
    f.set_word(cv, 5, egress, "i64", TBAA_CTX_VALUES)
    f.cset("%ctx", "batch_index", "%i")
    f.br("rep")
    f.at("rep")
    f.do("%r = phi i64 [ 0, %fj ], [ %r1, %again ]")
    # Frame 0 first: a full clear is a memset LLVM cannot tell from the context's
    # fields, which would then be reloaded in the program after being stored here.
    f.do(f"call void @{prog.tag}_zero(ptr %ctx, i64 0)")
    f.cset("%ctx", "max_depth", "0")
    f.do("call void @pkt(ptr %ctx)")
    f.cset("%ctx", "status", "0")
    f.cset("%ctx", "tail_cnt", tail0)
    f.cset("%ctx", "rem", budget)
    f.cset("%ctx", "depth", "0")
    f.cset("%ctx", "tail_exit", "0")
    args = ", ".join(["i64 0", f"i64 {c64(nat.ctx_base)}"] + ["i64 0"] * 8)
    # A small program is inlined into the loop (its run sees the fields just stored);
    # a large one is called: inlined, it made one function of the loop and the program
    # whose register coalescing took seconds (and a second copy of it where the
    # program has a run entry too), for a call that costs nothing beside its run.
    inline = "#0" if len(prog.insns) < CALL_FROM_LOOP_INSNS else "#1"
    res = f.ins(f"call {RET_T} @{prog.funcs[0]}(ptr %ctx, i64 0, {args}) {inline}")
    r0 = f.ins(f"extractvalue {RET_T} {res}, 0")
    status = f.cget("%ctx", "status")
    f.do("%r1 = add i64 %r, 1")
    more = f.ins(f"and i1 {f.ins(f'icmp eq i64 {status}, 0')}, "
                 f"{f.ins(f'icmp ult i64 %r1, {repeat}')}")
    f.cbr(more, "again", "write")
    f.at("again")
    f.br("rep")
    f.at("write")
    failed = f.ins(f"icmp ne i64 {status}, 0")
    act = f.ins(f"select i1 {failed}, i64 0, i64 {f.ins(f'and i64 {r0}, 4294967295')}")
    xd, xe, xm = (f.cget("%ctx", n) for n in ("x_data", "x_data_end", "x_data_meta"))
    msup = f.ins(f"icmp ule i64 {xm}, {xd}")
    mout = f.ins(f"select i1 {msup}, i64 {f.ins(f'sub i64 {xd}, {xm}')}, i64 0")
    for name, v in (("act_out", act), ("off_out", xd), ("len_out", f.ins(f"sub i64 {xe}, {xd}")),
                    ("meta_out", mout)):
        f.put_index(outs[name], "%i", f.ins(f"trunc i64 {v} to i32"), "i32", 4)
    maxd = f.cget("%ctx", "max_depth")
    # The word describes a fault, and only a fault: a run that ended normally writes 0
    # whatever depth it reached, so "word != 0" is "faulted" for every reader (the
    # native loops count faults by it).
    packed = f.ins(f"or i64 {status}, {f.ins(f'shl i64 {maxd}, 8')}")
    word = f.ins(f"select i1 {failed}, i64 {packed}, i64 0")
    f.put_index(outs["status_out"], "%i", f.ins(f"trunc i64 {word} to i32"), "i32", 4)
    fpc = f.ins(f"select i1 {failed}, i64 {f.cget('%ctx', 'fault_pc')}, i64 0")
    f.put_index(outs["pc_out"], "%i", f.ins(f"trunc i64 {fpc} to i32"), "i32", 4)
    faddr = f.ins(f"select i1 {failed}, i64 {f.cget('%ctx', 'fault_addr')}, i64 0")
    f.put_index(outs["addr_out"], "%i", faddr, "i64", 8)
    # The redirect record, for a redirected frame (the rows of others stay zero).
    f.cbr(f.ins(f"icmp eq i64 {act}, 4"), "rd", "rdj")
    f.at("rd")
    rd = f.gep(outs["redirect_out"], f.ins("shl i64 %i, 5"))
    for n, name in enumerate(("ri_map_id", "ri_map_type", "ri_tgt_index", "ri_flags")):
        f.set_word(rd, n, f.cget("%ctx", name), "i64", "")
    # A datapath batch (consume_ri) carries the redirect out as xdp_do_redirect
    # does, which clears map, map_id, map_type and flags (tgt_index stays).
    f.cbr(f.ins(f"icmp ne i64 {dw('consume_ri')}, 0"), "rdc", "rdj")
    f.at("rdc")
    for name in ("ri_map_id", "ri_map_type", "ri_flags", "ri_map"):
        f.cset("%ctx", name, "0")
    f.br("rdj")
    f.at("rdj")
    f.do("%i1 = add i64 %i, 1")
    f.set_word("%desc", XDP["done"], "%i1", "i64", "")
    # An interrupted Python helper stops the whole batch at this frame.
    f.cbr(f.ins(f"icmp eq i64 {status}, {ST_ABORT}"), "done", "next")
    f.at("next")
    f.br("head")
    f.at("done")
    f.do("ret void")
    return f.text(f"define void @{prog.tag}_xdp(ptr %ctx, ptr %desc) nounwind")


def _make_batch() -> str:
    """``pyxdp_batch(ctx, batch, run)``: the per-frame loop around a program's run entry.

    Before each frame the slots rewrite their region table entries; after it
    r0, the status word (``status | deepest frame << 8``, so a fault can be
    rendered later with the stack regions the run had), the fault pc and
    address are stored. Shared by every program: ``run`` is its entry point.
    """
    f = Text()
    f.at("entry")

    def dw(name: str, ty: str = "i64") -> str:
        return f.word("%desc", BATCH[name], ty, "")

    count, budget, nslots = dw("count"), dw("budget"), dw("nslots")
    slots, r1s, r2s = dw("slots", "ptr"), dw("r1", "ptr"), dw("r2", "ptr")
    r0_out, st_out, pc_out, addr_out = (dw(n, "ptr") for n in
                                        ("r0_out", "status_out", "pc_out", "addr_out"))
    cvs = dw("ctx_values", "ptr")
    table = f.cget("%ctx", "regions", "ptr")
    keep = f.cget("%ctx", "ctx_values", "ptr")
    f.br("head")
    f.at("head")
    f.do("%i = phi i64 [ 0, %entry ], [ %i1, %tail ]")
    f.cbr(f.ins(f"icmp ult i64 %i, {count}"), "body", "done")
    f.at("body")
    f.br("shead")
    f.at("shead")
    f.do("%j = phi i64 [ 0, %body ], [ %j1, %sbody.end ]")
    f.cbr(f.ins(f"icmp ult i64 %j, {nslots}"), "sbody", "go")
    f.at("sbody")
    slot = f.gep(slots, f.ins(f"mul i64 %j, {8 * len(SLOT_FIELDS)}"))
    ent = f.gep(table, f.ins(f"shl i64 {f.word(slot, SLOT['region'], 'i64', '')}, 5"))
    offsets = f.word(slot, SLOT["offsets"], "ptr", "")
    sizes = f.word(slot, SLOT["sizes"], "ptr", "")
    f.cbr(f.ins(f"icmp eq ptr {offsets}, null"), "o0", "o1")
    f.at("o1")
    o1 = f.at_index(offsets, "%i", "i64", 8)
    f.br("oj")
    f.at("o0")
    o0 = f.ins(f"mul i64 %i, {f.word(slot, SLOT['stride'], 'i64', '')}")
    f.br("oj")
    f.at("oj")
    off = f.ins(f"phi i64 [ {o1}, %o1 ], [ {o0}, %o0 ]")
    f.cbr(f.ins(f"icmp eq ptr {sizes}, null"), "z0", "z1")
    f.at("z1")
    z1 = f.at_index(sizes, "%i", "i64", 8)
    f.br("zj")
    f.at("z0")
    z0 = f.word(slot, SLOT["size"], "i64", "")
    f.br("zj")
    f.at("zj")
    size = f.ins(f"phi i64 [ {z1}, %z1 ], [ {z0}, %z0 ]")
    host = f.gep(f.word(slot, SLOT["host"], "ptr", ""), off)
    f.set_word(ent, REGION["host"], host, "ptr", TBAA_TABLE)
    f.set_word(ent, REGION["size"], size, "i64", TBAA_TABLE)
    f.do("%j1 = add i64 %j, 1")
    f.br("sbody.end")
    f.at("sbody.end")
    f.br("shead")
    f.at("go")
    # Per-frame context fields (xdp_md's data, data_end...) when the batch has them.
    own = f.gep(cvs, f.ins(f"mul i64 %i, {8 * CTX_VALUES}"))
    f.cset("%ctx", "ctx_values", f.ins(f"select i1 {f.ins(f'icmp eq ptr {cvs}, null')}, "
                                       f"ptr {keep}, ptr {own}"), "ptr")
    f.cset("%ctx", "status", "0")
    f.cset("%ctx", "rem", budget)
    f.cset("%ctx", "batch_index", "%i")
    r0 = f.ins(f"call i64 %run(ptr %ctx, i64 {f.at_index(r1s, '%i', 'i64', 8)}, "
               f"i64 {f.at_index(r2s, '%i', 'i64', 8)})")
    status = f.cget("%ctx", "status")
    failed = f.ins(f"icmp ne i64 {status}, 0")
    f.put_index(r0_out, "%i", f.ins(f"select i1 {failed}, i64 0, i64 {r0}"), "i64", 8)
    maxd = f.cget("%ctx", "max_depth")
    word = f.ins(f"or i64 {status}, {f.ins(f'shl i64 {maxd}, 8')}")
    f.put_index(st_out, "%i", f.ins(f"trunc i64 {word} to i32"), "i32", 4)
    fpc = f.ins(f"select i1 {failed}, i64 {f.cget('%ctx', 'fault_pc')}, i64 0")
    f.put_index(pc_out, "%i", f.ins(f"trunc i64 {fpc} to i32"), "i32", 4)
    fad = f.ins(f"select i1 {failed}, i64 {f.cget('%ctx', 'fault_addr')}, i64 0")
    f.put_index(addr_out, "%i", fad, "i64", 8)
    f.do("%i1 = add i64 %i, 1")
    # An interrupted Python helper stops the whole batch at this frame.
    f.cbr(f.ins(f"icmp eq i64 {status}, {ST_ABORT}"), "done", "tail")
    f.at("tail")
    f.br("head")
    f.at("done")
    f.do("ret void")
    return f.text("define void @pyxdp_batch(ptr %ctx, ptr %desc, ptr %run) nounwind")


# --- natively implemented helpers -------------------------------------------------

def runtime_module() -> str:
    """IR of the code every program shares: the batch loop and ``pyxdp_ktime_get_ns``.

    Helpers have the C ABI ``u64 f(ctx *, r1..r5)``. ``pyxdp_ktime_get_ns``
    reads CLOCK_MONOTONIC, the clock ``time.monotonic_ns`` (the interpreter's
    ktime_get_ns) reads; ``clock_gettime`` is bound by the engine.
    """
    f = Text()
    f.at("entry")
    ts = f.ins("alloca { i64, i64 }")
    f.do(f"call i32 @clock_gettime(i32 1, ptr {ts})")  # CLOCK_MONOTONIC
    sec = f.ins(f"load i64, ptr {ts}, align 8")
    nsec = f.ins(f"load i64, ptr {f.gep(ts, 8)}, align 8")
    secns = f.ins(f"mul i64 {sec}, 1000000000")
    f.do(f"ret i64 {f.ins(f'add i64 {secns}, {nsec}')}")
    kt = f.text("define i64 @pyxdp_ktime_get_ns(ptr %ctx, i64 %r1, i64 %r2, i64 %r3, i64 %r4, "
                "i64 %r5) nounwind")
    return DECLS + kt + _make_batch() + METADATA

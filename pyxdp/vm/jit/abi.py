"""The JIT's native ABI: the words machine code and Python share, and what the runtime
tells the lowering.

The kernel's JITs follow ``struct bpf_prog``, ``bpf_run_ctx`` and the calling
convention of ``arch/*/net/bpf_jit_comp.c``; pyxdp's generated code instead
shares these structures with :mod:`pyxdp.vm.jit.runtime` (which builds its
ctypes mirrors from the same field lists): the run context, the region table,
the batch descriptors (the generic one and the XDP one), the map descriptors
native helpers read, the status codes and flags. :class:`MapInfo` and
:class:`Natives` tell the lowering which twins and maps to specialise (its own input
and output records are :mod:`pyxdp.vm.jit.unit`'s).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyxdp.asm import opcodes as op
from pyxdp.vm.memory import STACK_FRAME_GAP

__all__ = [
    "BATCH_FIELDS", "CTX_FIELDS", "CTX_VALUES", "FRAGS_PYTHON", "FRAG_ENTRY", "FRAG_FRAG_SIZE",
    "FRAG_HEAD", "FRAG_NR", "FRAG_SIZE", "FRAG_WORDS", "KERN", "KERN_FIELDS", "MAPDESC_FIELDS",
    "MAX_FRAGS", "MAX_REGIONS",
    "MAX_TAIL_CALL_CNT", "NF_CLOCK", "NF_RUNCTX", "NF_XDP", "REGION_FIELDS", "SLOT_FIELDS",
    "SLOW", "ST_ABORT", "ST_BUDGET", "ST_CALLX", "ST_HELPER", "ST_OK", "ST_READ", "ST_TAIL",
    "ST_THROW", "ST_WRITE", "TAIL_WORDS", "XDP_FIELDS", "Hint", "MapInfo", "Natives",
]

M64 = 0xFFFF_FFFF_FFFF_FFFF
M32 = 0xFFFF_FFFF

# --- the ABI ------------------------------------------------------------------------
# Every field of the run context, the region table and the batch descriptors is one
# 64-bit word, so the native side indexes them as i64 arrays and ctypes mirrors them
# with c_uint64 fields in this order.
CTX_FIELDS = ("status", "rem", "fault_pc", "fault_addr", "fault_size", "max_depth",
              "depth", "nregions", "regions", "stack", "helpers", "nhelpers",
              "batch_index", "ctx_values", "tail_call", "tail_exit",
              # bit d: frame d may hold bytes outside the proven-store footprint
              "stack_dirty",
              # NF_* bits: what the native helpers may rely on in this run
              "nflags", "cpu", "maps",
              # the xdp_buff (offsets into the frame at x_frame, as XdpBuff keeps them)
              "x_frame", "x_frame_sz", "x_data", "x_data_end", "x_data_meta", "x_frags",
              # struct bpf_redirect_info as native redirects leave it
              "ri_present", "ri_tgt_index", "ri_map_id", "ri_map_type", "ri_flags", "ri_map",
              "ri_tv_set", "ri_tv",
              # native tail calls: 4 words per prog array slot (target run context,
              # its XDP entry, its budget, 0); tail calls made so far for this packet
              "tails", "tail_cnt",
              # bpf_redirect_xsk: per ifindex a bitmask of rx queues with a registered
              # AF_XDP socket (u64 *), and its length (0: no table, ask Python)
              "xsk_table", "xsk_ntable",
              # a kernel struct image of the xdp_buff to keep in step (KERN_FIELDS words,
              # null: none): bpf_cast_to_kern_ctx's, see pyxdp.net.xdp_kern_ctx
              "kern",
              # per-run scratch memory native kfuncs own (u8 *, scratch_size bytes):
              # a multi-word bits iterator's copy, see pyxdp.vm.bpf_iter
              "scratch", "scratch_size",
              # the run's conntrack table as its kfuncs' twins see it (u64 *: the
              # table's CT_DESC words, pyxdp.net.nf_conntrack; 0: none, ask Python), its
              # xfrm states' (XFRM_DESC words, pyxdp.net.xfrm_state)
              "ct", "xfrm",
              # the run's namespace's sockets as the socket helpers' twins see them (u64 *:
              # the table's SK_DESC words, pyxdp.net.inet_hashtables; 0: ask Python)
              "sk",
              # bpf_get_prandom_u32's struct rnd_state (u32[4]) of the run's RunContext
              # (pyxdp.vm.random32; 0: ask Python)
              "rnd",
              # the run's namespace's devices as bpf_check_mtu's and bpf_fib_lookup's
              # twins see them (u64 *: the DevTable's desc words, pyxdp.net.fib, which
              # lead to its lookup rows; 0: ask Python)
              "devs",
              # bpf_trace_printk's ring in the run's TraceLog (u8 *, pyxdp.vm.context;
              # 0: ask Python)
              "trace")
REGION_FIELDS = ("base", "size", "host", "writable")
BATCH_FIELDS = ("count", "budget", "nslots", "slots", "r1", "r2", "r0_out", "status_out",
                "pc_out", "addr_out", "ctx_values")
SLOT_FIELDS = ("region", "host", "offsets", "sizes", "stride", "size")
# The XDP batch: frame i is ``frames + i * stride`` (frame_sz bytes); u32 arrays but
# redirect_out (4 u64 per frame: map_id, map_type, tgt_index, flags) and addr_out.
XDP_FIELDS = ("count", "repeat", "budget", "frames", "stride", "frame_sz", "data_off",
              "data_len", "meta_len", "meta_ok", "frags", "rxq", "ifindex", "egress", "act_out",
              "off_out", "len_out", "meta_out", "status_out", "pc_out", "addr_out",
              "redirect_out", "done", "tail_cnt0", "rows", "consume_ri")
# A multi-buffer batch's frag table (the descriptor's ``frags`` word: 0 none, 1 every
# frame's frags are Python's - the twins leave them to the Python helpers - else the
# table's address): FRAG_WORDS u64 per frame i, the frags as the run leaves them -
# nr_frags, xdp_frags_size, the rx queue's frag_size, 0, then per frag its host
# address, length and index among the frame's frags when the run began. The run
# context's ``x_frags`` is the frame's row while it has frags (else 0, or 1 as above).
MAX_FRAGS = 17
FRAG_NR, FRAG_SIZE, FRAG_FRAG_SIZE, FRAG_HEAD = 0, 1, 2, 4
FRAG_ENTRY = 3  # words per frag: host address, length, first index
FRAG_WORDS = FRAG_HEAD + FRAG_ENTRY * MAX_FRAGS + 1  # 56: rows of 448 bytes
FRAGS_PYTHON = 1
# A map's storage as native helpers see it (host pointers; 0 where the type has none).
MAPDESC_FIELDS = ("key_data", "value_data", "value_row", "index", "hashes", "stamp",
                  "elem_slot", "free", "hdr", "entries", "node_plen", "node_flags", "node_child",
                  # a map-in-map's inner map handles (u64 per slot or element)
                  "inner")
# The kernel image of an xdp_buff native code writes: its host address (0: not built
# yet), the receiving ifindex, rx queue and egress ifindex it was built for, and the byte
# offsets of its members (pointers 8 bytes, frame_sz and flags 4).
KERN_FIELDS = ("host", "ifindex", "queue", "egress", "off_data", "off_data_end",
               "off_data_meta", "off_data_hard_start", "off_rxq", "off_txq", "off_frame_sz",
               "off_flags")
# ctx_values words per run (the interpreter's Interpreter.ctx_values).
CTX_VALUES = 8

CTX = {name: i for i, name in enumerate(CTX_FIELDS)}
REGION = {name: i for i, name in enumerate(REGION_FIELDS)}
BATCH = {name: i for i, name in enumerate(BATCH_FIELDS)}
SLOT = {name: i for i, name in enumerate(SLOT_FIELDS)}
XDP = {name: i for i, name in enumerate(XDP_FIELDS)}
MAPDESC = {name: i for i, name in enumerate(MAPDESC_FIELDS)}
KERN = {name: i for i, name in enumerate(KERN_FIELDS)}

# Run status, in ctx.status (the batch's status word keeps it in its low byte).
ST_OK = 0
ST_READ = 1      # out-of-bounds read
ST_WRITE = 2     # out-of-bounds or read-only write
ST_BUDGET = 3    # instruction budget used up
ST_CALLX = 4     # callx to a value that is no helper (fault_addr = value, fault_size = reg)
ST_HELPER = 5    # a Python helper raised; the exception waits on the Python side
ST_ABORT = 6     # a Python helper was interrupted (KeyboardInterrupt): stop a batch too
ST_TAIL = 7      # a natively tail-called program faulted: fault_pc/fault_addr are its, and
                 # max_depth packs its status | its deepest frame << 8 | tail entry << 16
ST_THROW = 8     # bpf_throw unwinds to the program's main function (fault_addr: the
                 # cookie), which returns it: no run ends with this status

# nflags bits.
NF_RUNCTX = 1    # the context is a RunContext: ``cpu`` is its CPU, redirect state is native
NF_CLOCK = 2     # its clock is CLOCK_MONOTONIC (time.monotonic_ns)
NF_XDP = 4       # the x_* fields describe its xdp_buff and region 0 is the packet

# What a native helper returns when the Python helper must decide instead.
SLOW = 1 << 63
MAX_TAIL_CALL_CNT = 33  # include/linux/bpf.h
TAIL_WORDS = 4
MAX_FRAMES = op.MAX_CALL_FRAMES
GAP_SHIFT = STACK_FRAME_GAP.bit_length() - 1
assert 1 << GAP_SHIFT == STACK_FRAME_GAP
MAX_REGIONS = 256


@dataclass(frozen=True)
class MapInfo:
    """A map a program names by constant, as native helpers need it.

    ``kind`` is ``array`` (ARRAY/PERCPU_ARRAY), ``hash`` (the four hash types),
    ``entries`` (DEVMAP/CPUMAP/XSKMAP: ``uint32[max_entries, 2]``), ``devhash``
    (DEVMAP_HASH: ``entries`` behind a hash index), ``lpm`` (LPM_TRIE: a node pool),
    ``inner_array``/``inner_hash`` (ARRAY_OF_MAPS/HASH_OF_MAPS: the inner
    maps' handles, the latter behind a hash index) or ``other`` (Python only).
    ``value_base`` is CPU 0's value region, ``cpu_stride`` the distance to the
    next CPU's; ``first_region`` the region table entry of CPU 0's values
    (-1 when the run does not place them at a fixed entry). ``slot`` indexes the
    run context's map descriptor table (:data:`MAPDESC_FIELDS`).
    """

    addr: int
    slot: int
    kind: str
    map_type: int
    map_id: int
    key_size: int
    value_size: int
    max_entries: int
    elem_size: int
    nr_cpus: int
    percpu: bool
    lru: bool
    capacity: int
    key_stride: int
    value_base: int
    cpu_stride: int
    value_bytes: int
    first_region: int
    flag_mask: int = 0
    tail_base: int = -1  # prog arrays (kind "progs"): first entry in the run's tail table
    py_update: bool = False  # an update frees what the old value held (special fields): Python


@dataclass(frozen=True)
class Natives:
    """Native helpers to specialise: ``helpers`` maps helper ids to the kind of the
    twin registered for them (:func:`pyxdp.vm.jit.natives.register_helper`:
    ``map_lookup``, ``ktime``, ``adjust_head``, ``redirect``...), ``maps``
    the constant maps. With ``xdp`` the packet is region 0, ``pkt_base`` is
    the fake address of ``data_hard_start`` and ``ctx_base`` the xdp_md's."""

    helpers: tuple[tuple[int, str], ...] = ()
    maps: tuple[MapInfo, ...] = ()
    xdp: bool = False
    pkt_base: int = 0
    ctx_base: int = 0
    tail_calls: bool = False  # tail calls through constant prog arrays run natively

    def kind(self, helper_id: int) -> str | None:
        for hid, kind in self.helpers:
            if hid == helper_id:
                return kind
        return None

    def map_at(self, addr: int) -> MapInfo | None:
        for m in self.maps:
            if m.addr == addr:
                return m
        return None


# Where an access lands: (kind, value, confident). kind "region": table entry value;
# "cpu": entry value + the run's CPU; "stk": a stack frame; "probe" (in ``proven``): a
# BPF_PROBE_MEM load, 0 where no region holds it.
Hint = tuple[str, int, bool]

"""Which helpers an XDP program calls run natively on the JIT: Python calls per packet.

    python bench/bench_helper_natives.py [--only NAME]

For each helper an XDP program can call (per map type where the helper takes a map),
a one-call program is loaded on the JIT and run in batches of 64 and 128 frames; the
difference of the Python calls the two batches made in pyxdp's code
(:func:`pyxdp.testing.native.python_calls` over every pyxdp module), over 64, is the
Python calls per packet: 0 means the helper's native twin ran, more means the Python
helper (or code it calls) did. A case the verifier refuses is reported as such.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from pyxdp.collection import Collection
from pyxdp.errors import PyxdpError
from pyxdp.spec import CollectionSpec, MapSpec
from pyxdp.testing.native import python_calls
from pyxdp.testing.programs import asm_collection, with_callback
from pyxdp.uapi.bpf import BpfMapType, MapFlag
from pyxdp.vm.helpers import RunContext

T = BpfMapType
NO_PREALLOC = int(MapFlag.BPF_F_NO_PREALLOC)
KEY = "*(u32 *)(r10 -4) = 1\nr2 = r10\nr2 += -4\n"
LPM_KEY = "*(u32 *)(r10 -8) = 32\n*(u32 *)(r10 -4) = 16777226\nr2 = r10\nr2 += -8\n"
VAL = "*(u64 *)(r10 -16) = 7\nr3 = r10\nr3 += -16\n"
PASS = "r0 = 2\nexit\n"

# (map type, key size, value size, max entries, flags) of each map kind
MAPS = {
    "array": (T.BPF_MAP_TYPE_ARRAY, 4, 8, 4, 0),
    "percpu_array": (T.BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8, 4, 0),
    "hash": (T.BPF_MAP_TYPE_HASH, 4, 8, 4, 0),
    "percpu_hash": (T.BPF_MAP_TYPE_PERCPU_HASH, 4, 8, 4, 0),
    "lru_hash": (T.BPF_MAP_TYPE_LRU_HASH, 4, 8, 4, 0),
    "lru_percpu_hash": (T.BPF_MAP_TYPE_LRU_PERCPU_HASH, 4, 8, 4, 0),
    "lpm_trie": (T.BPF_MAP_TYPE_LPM_TRIE, 8, 8, 4, NO_PREALLOC),
    "devmap": (T.BPF_MAP_TYPE_DEVMAP, 4, 4, 4, 0),
    "devmap_hash": (T.BPF_MAP_TYPE_DEVMAP_HASH, 4, 4, 4, 0),
    "cpumap": (T.BPF_MAP_TYPE_CPUMAP, 4, 4, 4, 0),
    "xskmap": (T.BPF_MAP_TYPE_XSKMAP, 4, 4, 4, 0),
    "queue": (T.BPF_MAP_TYPE_QUEUE, 0, 8, 4, 0),
    "stack": (T.BPF_MAP_TYPE_STACK, 0, 8, 4, 0),
    "bloom_filter": (T.BPF_MAP_TYPE_BLOOM_FILTER, 0, 8, 4, 0),
    "ringbuf": (T.BPF_MAP_TYPE_RINGBUF, 0, 0, 1 << 16, 0),
    "perf_event_array": (T.BPF_MAP_TYPE_PERF_EVENT_ARRAY, 4, 4, 0, 0),
    "prog_array": (T.BPF_MAP_TYPE_PROG_ARRAY, 4, 4, 4, 0),
    "array_of_maps": (T.BPF_MAP_TYPE_ARRAY_OF_MAPS, 4, 4, 4, 0),
    "hash_of_maps": (T.BPF_MAP_TYPE_HASH_OF_MAPS, 4, 4, 4, 0),
}
HASHES = ("hash", "percpu_hash", "lru_hash", "lru_percpu_hash")
LOOKUP = "r1 = map[fd:0]\n{key}call 1\n" + PASS
UPDATE = "r1 = map[fd:0]\n{key}" + VAL + "r4 = 0\ncall 2\n" + PASS
DELETE = "r1 = map[fd:0]\n{key}call 3\n" + PASS
MAP_VAL = "*(u64 *)(r10 -16) = 7\nr2 = r10\nr2 += -16\n"


def cases() -> list[tuple[str, str, list[str]]]:
    """(name, program text, map kinds it names) of every case."""
    out: list[tuple[str, str, list[str]]] = []
    for kind in ("array", "percpu_array", *HASHES, "lpm_trie", "devmap", "devmap_hash",
                 "xskmap", "array_of_maps", "hash_of_maps"):
        key = LPM_KEY if kind == "lpm_trie" else KEY
        out.append((f"map_lookup_elem/{kind}", LOOKUP.format(key=key), [kind]))
    for kind in ("array", "percpu_array", *HASHES, "lpm_trie"):
        key = LPM_KEY if kind == "lpm_trie" else KEY
        out.append((f"map_update_elem/{kind}", UPDATE.format(key=key), [kind]))
    for kind in (*HASHES, "lpm_trie"):
        key = LPM_KEY if kind == "lpm_trie" else KEY
        out.append((f"map_delete_elem/{kind}", DELETE.format(key=key), [kind]))
    for kind in ("percpu_array", "percpu_hash", "lru_percpu_hash"):
        out.append((f"map_lookup_percpu_elem/{kind}",
                    "r1 = map[fd:0]\n" + KEY + "r3 = 0\ncall 195\n" + PASS, [kind]))
    for kind in ("queue", "stack", "bloom_filter"):
        out.append((f"map_push_elem/{kind}",
                    "r1 = map[fd:0]\n" + MAP_VAL + "r3 = 0\ncall 87\n" + PASS, [kind]))
        out.append((f"map_peek_elem/{kind}", "r1 = map[fd:0]\n" + MAP_VAL + "call 89\n" + PASS,
                    [kind]))
        if kind != "bloom_filter":
            out.append((f"map_pop_elem/{kind}", "r1 = map[fd:0]\n" + MAP_VAL + "call 88\n"
                        + PASS, [kind]))
    for kind in ("devmap", "devmap_hash", "cpumap", "xskmap"):
        out.append((f"redirect_map/{kind}", "r1 = map[fd:0]\nr2 = 1\nr3 = 0\ncall 51\nexit\n",
                    [kind]))
    for kind in ("array", "percpu_array", "hash", "percpu_hash", "lru_hash"):
        out.append((f"for_each_map_elem/{kind}",
                    "r1 = map[fd:0]\nr2 = subprog[cb]\nr3 = 0\nr4 = 0\ncall 164\n" + PASS
                    + "cb:\nr0 = 0\nexit\n", [kind]))
    out.append(("tail_call/prog_array (empty slot)",
                "r2 = map[fd:0]\nr3 = 1\ncall 12\n" + PASS, ["prog_array"]))
    out.append(("ringbuf_output/ringbuf",
                "r1 = map[fd:0]\n" + MAP_VAL + "r3 = 8\nr4 = 0\ncall 130\n"
                + PASS, ["ringbuf"]))
    out.append(("ringbuf_reserve+submit/ringbuf",
                "r1 = map[fd:0]\nr2 = 8\nr3 = 0\ncall 131\nif r0 == 0 goto out\nr1 = r0\n"
                "r2 = 0\ncall 132\nout:\n" + PASS, ["ringbuf"]))
    out.append(("ringbuf_query/ringbuf", "r1 = map[fd:0]\nr2 = 0\ncall 134\n" + PASS,
                ["ringbuf"]))
    out.append(("perf_event_output/perf_event_array",
                "r2 = map[fd:0]\nr3 = 4294967295 ll\n*(u64 *)(r10 -16) = 7\nr4 = r10\n"
                "r4 += -16\nr5 = 8\ncall 25\n" + PASS, ["perf_event_array"]))
    plain = {
        "xdp_adjust_head": "r2 = 0\ncall 44\n",
        "xdp_adjust_meta": "r2 = 0\ncall 54\n",
        "xdp_adjust_tail": "r2 = 0\ncall 65\n",
        "xdp_get_buff_len": "call 188\n",
        "xdp_load_bytes": "r2 = 0\nr3 = r10\nr3 += -8\nr4 = 8\ncall 189\n",
        "xdp_store_bytes": "*(u64 *)(r10 -8) = 0\nr2 = 0\nr3 = r10\nr3 += -8\nr4 = 8\n"
                           "call 190\n",
        "csum_diff": "*(u64 *)(r10 -8) = 0\nr1 = 0\nr2 = 0\nr3 = r10\nr3 += -8\nr4 = 8\n"
                     "r5 = 0\ncall 28\n",
        "redirect": "r1 = 1\nr2 = 0\ncall 23\n",
        "fib_lookup": "".join(f"*(u64 *)(r10 -{8 * k}) = 0\n" for k in range(1, 9))
                      + "r2 = r10\nr2 += -64\nr3 = 64\nr4 = 0\ncall 69\n",
        "check_mtu": "*(u32 *)(r10 -4) = 0\nr2 = 0\nr3 = r10\nr3 += -4\nr4 = 0\nr5 = 0\n"
                     "call 163\n",
        "get_prandom_u32": "call 7\n",
        "ktime_get_ns": "call 5\n",
        "ktime_get_boot_ns": "call 125\n",
        "ktime_get_coarse_ns": "call 160\n",
        "ktime_get_tai_ns": "call 208\n",
        "jiffies64": "call 118\n",
        "get_smp_processor_id": "call 8\n",
        "get_numa_node_id": "call 42\n",
        "loop (empty callback)": "r1 = 4\nr2 = subprog[cb]\nr3 = 0\nr4 = 0\ncall 181\n"
                                 + PASS + "cb:\nr0 = 0\nexit\n",
        "sk_lookup_tcp (miss)": "".join(f"*(u64 *)(r10 -{8 * k}) = 0\n" for k in range(1, 6))
                                + "r2 = r10\nr2 += -40\nr3 = 12\nr4 = -1\nr5 = 0\ncall 84\n"
                                "if r0 == 0 goto out\nr1 = r0\ncall 86\nout:\n",
        "tcp_raw_gen_syncookie_ipv4": "*(u64 *)(r10 -24) = 0\n*(u64 *)(r10 -16) = 0\n"
                                      "*(u64 *)(r10 -8) = 0\nr1 = r10\nr1 += -24\n"
                                      "r2 = r10\nr2 += -40\n*(u64 *)(r10 -40) = 0\n"
                                      "*(u64 *)(r10 -32) = 0\n*(u32 *)(r10 -28) = 80\n"
                                      "r3 = 20\ncall 204\n",
    }
    for name, body in plain.items():
        text = "r6 = r1\n" + body
        if PASS not in body:
            text += PASS
        out.append((name, text, []))
    return out


def _spec(text: str, kinds: list[str]) -> CollectionSpec:
    specs = []
    for n, kind in enumerate(kinds):
        t, k, v, e, flags = MAPS[kind]
        inner = None
        if kind.endswith("_of_maps"):
            inner = MapSpec("inner", int(T.BPF_MAP_TYPE_ARRAY), 4, 8, 4)
        if kind == "perf_event_array":
            e = 1
        specs.append(MapSpec(f"m{n}", int(t), k, v, e, flags, inner=inner))
    spec = asm_collection(text, specs)
    return with_callback(spec) if "cb:" in text else spec


def first_calls(text: str, kinds: list[str]) -> str:
    """The first pyxdp functions one packet's run enters (why a case is Python)."""
    import pyxdp
    root = pyxdp.__file__.rsplit("/", 1)[0]
    seen: list[str] = []

    def prof(frame: Any, event: str, arg: object) -> None:
        code = frame.f_code
        if event == "call" and code.co_filename.startswith(root) and len(seen) < 40:
            seen.append(f"{code.co_filename[len(root) + 1:-3].replace('/', '.')}."
                        f"{code.co_name}")
    with Collection(_spec(text, kinds), "userspace", engine="jit") as c:
        prog = c.programs["t"].handle
        frames = np.zeros((1, 512), np.uint8)
        prog.run_batch(frames.copy(), 256, 64, ctx=RunContext())
        mark = len(seen)
        sys.setprofile(prof)
        try:
            prog.run_batch(frames.copy(), 256, 64, ctx=RunContext())
        finally:
            sys.setprofile(None)
    return " ".join(dict.fromkeys(s for s in seen[mark:] if "helper" in s or "maps" in s
                                  or "filter" in s)) or " ".join(seen[:6])


def per_packet(text: str, kinds: list[str]) -> float:
    """Python calls in pyxdp's code per packet of a JIT batch running ``text``."""
    mods = [m for name, m in sys.modules.items()
            if (name == "pyxdp" or name.startswith("pyxdp.")) and getattr(m, "__file__", None)]
    with Collection(_spec(text, kinds), "userspace", engine="jit") as c:
        prog = c.programs["t"].handle
        for kind in kinds:
            h = c.maps["m0"].handle
            if kind in ("devmap", "devmap_hash"):
                h.ifindex_ok = lambda i: True
                c.maps["m0"].update(1, 1)
            elif kind in ("array", "percpu_array", *HASHES):
                c.maps["m0"].update(1, 5)
        counts = []
        for n in (64, 128):
            frames = np.zeros((n, 512), np.uint8)
            prog.run_batch(frames.copy(), 256, 64, ctx=RunContext())  # compiled, warm
            counts.append(python_calls(mods, lambda f=frames: prog.run_batch(
                f.copy(), 256, 64, ctx=RunContext())))
    return (counts[1] - counts[0]) / 64


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="cases whose name contains this")
    ap.add_argument("--why", action="store_true", help="name the Python functions a run enters")
    a = ap.parse_args()
    for name, text, kinds in cases():
        if a.only not in name:
            continue
        try:
            calls = per_packet(text, kinds)
            verdict = "native" if calls == 0 else "Python"
            print(f"{name:42s} {verdict:7s} {calls:8.1f} Python calls/packet")
            if a.why and calls:
                print(f"    {first_calls(text, kinds)}")
        except PyxdpError as e:
            print(f"{name:42s} {'refused':7s} {str(e).splitlines()[0][:90]}")


if __name__ == "__main__":
    main()

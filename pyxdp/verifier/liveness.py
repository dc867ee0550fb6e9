"""Live stack slots: ``kernel/bpf/liveness.c`` of Linux 6.18.

Which stack slots a kept state must compare is what the instructions from its pc
on may read before writing them. Linux learns it from the walk itself, per call
chain (the calls leading to a function, and the function): every instruction
visited records, per frame, the slots it read (``may_read``: a union over its
visits) and the slots it wrote whole (``must_write``: the intersection over its
visits). A backward data flow over the function's instructions turns them into
the slots live before each one (``live_before``) and those every path from it
writes (``must_write_acc``); a function's entry hands both on to its call in the
caller's chain. The flow is brought up to date, for the call chains of the state
walked, after a path is popped and after a function returns; a state compares
its slots live at its pc, and in a caller's frame those live after the call (at
the call of a helper that calls back: before it, the callback may run again).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

__all__ = ["StackLiveness"]


class _Frame(Protocol):
    callsite: int  # the call that made the frame (-1: the first)
    sub: int  # its function's first instruction

_ALL = (1 << 64) - 1


class _Instance:
    """``struct func_instance``: one function under one call chain, per frame of the
    chain (allocated when first marked) and per instruction its masks of slots."""

    __slots__ = ("start", "end", "may_read", "must_write", "acc", "live", "written_once",
                 "wrote", "updated", "dropped")

    def __init__(self, start: int, end: int, depth: int) -> None:
        self.start, self.end = start, end
        self.may_read: list[list[int] | None] = [None] * depth
        self.must_write: list[list[int] | None] = [None] * depth
        self.acc: list[list[int] | None] = [None] * depth
        self.live: list[list[int] | None] = [None] * depth
        self.written_once = [False] * (end - start)  # must_write_set
        self.wrote = [False] * (end - start)  # some frame's must_write was ever not empty
        self.updated = False
        self.dropped = False  # must_write_dropped

    def frame(self, f: int) -> None:
        if self.may_read[f] is None:
            n = self.end - self.start
            self.may_read[f], self.must_write[f] = [0] * n, [0] * n
            self.acc[f], self.live[f] = [0] * n, [0] * n

    def mark_read(self, f: int, pc: int, mask: int) -> None:
        self.frame(f)
        reads, live = self.may_read[f], self.live[f]
        assert reads is not None and live is not None
        i = pc - self.start
        new = reads[i] | mask
        if new != reads[i] and (new | live[i]) != live[i]:
            self.updated = True
        reads[i] = new

    def commit(self, pc: int, masks: dict[int, int], depth: int) -> None:
        """commit_stack_write_marks: an instruction's whole-slot writes of one visit."""
        i = pc - self.start
        once = self.written_once[i]
        if once and not masks and not self.wrote[i]:
            return
        for f in range(depth):
            mask = masks.get(f, 0)
            if not mask and not once:
                continue
            self.frame(f)
            mw = self.must_write[f]
            assert mw is not None
            old = mw[i]
            if once:
                mask &= old
            if old != mask:
                mw[i] = mask
                self.updated = True
                if mask:
                    self.wrote[i] = True
            if old & ~mask:
                self.dropped = True
        self.written_once[i] = True


class StackLiveness:
    """``struct bpf_liveness``: the function instances of one verification, and the
    whole-slot writes of the instruction being walked."""

    def __init__(self, succs: Sequence[tuple[int, ...]], starts: Sequence[int],
                 calls_callback: frozenset[int]) -> None:
        self.succs = succs
        n = len(succs)
        ordered = sorted(starts)
        self.end = {s: (ordered[k + 1] if k + 1 < len(ordered) else n)
                    for k, s in enumerate(ordered)}
        self.calls_callback = calls_callback
        self.instances: dict[tuple[int, ...], _Instance] = {}
        self.writes: dict[int, int] = {}
        self.cur: _Instance | None = None  # the instance of the state walked
        self.flows: dict[int, tuple[list[tuple[int, ...]], list[list[int]]]] = {}

    def instance(self, callsites: Sequence[int], subs: Sequence[int], k: int) -> _Instance:
        """The instance of frame ``k``'s call chain (compute_callchain: the calls into
        frames 1..k and the start of frame ``k``'s function)."""
        key = (*callsites[1:k + 1], subs[k])
        inst = self.instances.get(key)
        if inst is None:
            start = subs[k]
            inst = self.instances[key] = _Instance(start, self.end[start], k + 1)
        return inst

    def _current(self, frames: Sequence[_Frame]) -> _Instance:
        inst = self.cur
        if inst is None:
            inst = self.cur = self.instance([f.callsite for f in frames],
                                            [f.sub for f in frames], len(frames) - 1)
        return inst

    def read(self, frames: Sequence[_Frame], frame: int, pc: int, spi: int) -> None:
        """bpf_mark_stack_read: the instruction at ``pc`` (in the last frame) may read
        slot ``spi`` of ``frame``."""
        if spi < 64:
            self._current(frames).mark_read(frame, pc, 1 << spi)

    def write(self, frame: int, spi: int) -> None:
        """bpf_mark_stack_write: the instruction walked writes slot ``spi`` whole."""
        if spi < 64:
            self.writes[frame] = self.writes.get(frame, 0) | 1 << spi

    def commit(self, frames: Sequence[_Frame], pc: int) -> None:
        """bpf_commit_stack_write_marks after an instruction that kept its frames."""
        inst = self.cur
        if inst is None:
            inst = self._current(frames)
        writes = self.writes
        if not writes:
            # (most instructions: nothing to commit, _Instance.commit would return at once)
            i = pc - inst.start
            if inst.written_once[i] and not inst.wrote[i]:
                return
            inst.commit(pc, writes, len(frames))
            return
        inst.commit(pc, writes, len(frames))
        self.writes = {}

    def reset(self) -> None:
        """bpf_reset_live_stack_callchain: the frames changed (a call, a return, another
        path); what the instruction wrote is not committed."""
        self.cur = None
        if self.writes:
            self.writes = {}

    def update(self, frames: Sequence[_Frame]) -> None:
        """bpf_update_live_stack: the flow of every instance of this chain, innermost
        first (each hands its entry on to its caller's call)."""
        callsites, subs = [f.callsite for f in frames], [f.sub for f in frames]
        for k in range(len(subs) - 1, -1, -1):
            inst = self.instance(callsites, subs, k)
            if inst.updated:
                self._update(inst, callsites, subs, k)
                inst.updated = inst.dropped = False

    def _flow(self, start: int) -> tuple[list[tuple[int, ...]], list[list[int]]]:
        """A function's successors and predecessors, relative to its start (a successor
        outside the function is -1)."""
        got = self.flows.get(start)
        if got is None:
            n = self.end[start] - start
            succ = [tuple(s - start if 0 <= s - start < n else -1
                          for s in self.succs[start + i]) for i in range(n)]
            pred: list[list[int]] = [[] for _ in range(n)]
            for i, ss in enumerate(succ):
                for j in ss:
                    if j >= 0:
                        pred[j].append(i)
            got = self.flows[start] = (succ, pred)
        return got

    def _update(self, inst: _Instance, callsites: Sequence[int], subs: Sequence[int],
                k: int) -> None:
        """update_instance: the fixed point of live_before and must_write_acc."""
        n = inst.end - inst.start
        if inst.dropped:
            for acc in inst.acc:
                if acc is not None:
                    acc[:] = [0] * n
        succ, pred = self._flow(inst.start)
        for f in range(k + 1):
            reads, mw, acc, live = inst.may_read[f], inst.must_write[f], inst.acc[f], \
                inst.live[f]
            if reads is None or mw is None or acc is None or live is None:
                continue
            work = list(range(n))  # popped from the end: the last instruction first
            queued = [True] * n
            while work:
                i = work.pop()
                queued[i] = False
                nxt = succ[i]
                if not nxt:
                    continue
                m = mw[i]
                if len(nxt) == 1:  # most instructions: one successor
                    j = nxt[0]
                    if j >= 0:
                        after, both = live[j], acc[j] | m
                    else:
                        after, both = 0, m
                else:
                    after, both = 0, _ALL
                    for j in nxt:
                        if j >= 0:
                            after |= live[j]
                            both &= acc[j]
                        else:
                            both = 0
                    both |= m
                before = (after & ~m) | reads[i]
                if before != live[i] or both != acc[i]:
                    live[i], acc[i] = before, both
                    for p in pred[i]:
                        if not queued[p]:
                            queued[p] = True
                            work.append(p)
        if k:
            # propagate_to_outer_instance: the entry's marks at the call in the caller
            outer = self.instance(callsites, subs, k - 1)
            call = callsites[k]
            writes = {}
            for f in range(k):
                live, acc = inst.live[f], inst.acc[f]
                if live is None or acc is None:
                    continue
                writes[f] = acc[0]
                outer.mark_read(f, call, live[0])
            outer.commit(call, writes, k)

    def alive(self, frames: Sequence[_Frame], pc: int) -> list[int]:
        """bpf_stack_slot_alive for every frame of a state at ``pc``: per frame the mask
        of its live slots."""
        callsites, subs = [f.callsite for f in frames], [f.sub for f in frames]
        top = len(subs) - 1
        insts = [self.instance(callsites, subs, k) for k in range(top + 1)]
        out = []
        for f in range(top + 1):
            mask = self._live_at(insts[top], pc, f)
            for i in range(f, top):
                call = callsites[i + 1]
                at = call if call in self.calls_callback else call + 1
                mask |= self._live_at(insts[i], at, f)
            out.append(mask)
        return out

    @staticmethod
    def _live_at(inst: _Instance, pc: int, f: int) -> int:
        live = inst.live[f] if f < len(inst.live) else None
        if live is None or not inst.start <= pc < inst.end:
            return 0
        return live[pc - inst.start]

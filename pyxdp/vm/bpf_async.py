"""``struct bpf_async_cb``: what ``bpf_timer`` and ``bpf_wq`` share (``kernel/bpf/helpers.c``).

A ``struct bpf_timer`` or ``struct bpf_wq`` lives in a map value (the verifier
checks where); in the kernel its first word points at the object its init
allocates, a ``struct bpf_hrtimer`` or ``struct bpf_work`` that both begin
with a ``struct bpf_async_cb``: the map, the value, the program and its
callback. Here that object is a :class:`BpfAsyncCb` (a subclass per kind) in
the process-wide :data:`ASYNC` table, keyed by the field's address (map windows
are never reused, so an address names one field for the life of the process).
What is common, as Linux 6.18 does it:

* init (``__bpf_async_init``): ``-EBUSY`` when already initialised, ``-EPERM``
  once user space let go of the map (``Map.release_uref``);
* set_callback (``__bpf_async_set_callback``): ``-EINVAL`` before init,
  ``-EPERM`` without user references; keeps the callback and its program (the
  callback is read when it runs: the last one set runs);
* cancel and free (``__bpf_async_cancel_and_free``, :meth:`AsyncTable.cancel_and_free`):
  the maps call it when an element holding the field is deleted or overwritten
  and, for all their fields, when user space releases them
  (:meth:`AsyncTable.free_map`); whatever was queued never runs;
* the callback (``bpf_timer_cb``, ``bpf_wq_work``): ``callback(map, key,
  value)``, the key computed from the value's place (an array index as a u32,
  a hash element's own key), run through the program that set it (its own
  engine: interpreter or JIT). What queues a callback and when it runs is the
  kind's own (:mod:`pyxdp.vm.bpf_timer`, :mod:`pyxdp.vm.bpf_wq`,
  :mod:`pyxdp.vm.bpf_task_work`, whose object is made by its first schedule).
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pyxdp.errors import HelperFault, ProgramFault
from pyxdp.uapi.bpf import BpfMapType
from pyxdp.vm.context import SCRATCH_BASE
from pyxdp.vm.map_space import ProgramMap
from pyxdp.vm.memory import Region

if TYPE_CHECKING:
    import logging

__all__ = ["ASYNC", "AsyncFault", "AsyncProgram", "AsyncTable", "BpfAsyncCb", "async_owner"]


def _log() -> logging.Logger:
    """This module's logger (logging loads with the first warning, not with the module)."""
    import logging

    return logging.getLogger(__name__)


_ARRAY = int(BpfMapType.BPF_MAP_TYPE_ARRAY)
# The key a callback gets lives in scratch memory above bpf_for_each_map_elem's windows.
_KEY_BASE = SCRATCH_BASE + (0xFF << 32)


class AsyncProgram(Protocol):
    """A loaded program as an async object keeps it: runs ``func_addr`` (one of its
    callbacks) on its own, with ``args`` in r1-r3 and ``regions`` (the key) visible
    beside its maps."""

    def run_async_callback(self, func_addr: int, args: Sequence[int],
                           regions: Sequence[Region], cpu: int) -> None: ...


def async_owner(vm: Any, what: str) -> AsyncProgram:
    """The loaded program ``vm`` runs (a set_callback keeps it, not the engine)."""
    owner: AsyncProgram | None = getattr(vm, "owner", None)
    if owner is None:
        raise HelperFault(f"{what}: the engine runs no loaded program (run it through a "
                          "Program, which runs the callback later)")
    return owner


@dataclass(eq=False)
class BpfAsyncCb:
    """``struct bpf_async_cb``: the map and value it lives in, its callback and program."""

    map: ProgramMap
    value: int              # the map value's address
    prog: AsyncProgram | None = None
    callback: int = 0       # the callback's address (0: none)
    cpu: int = 0            # where it was last queued

    def reset(self) -> None:
        """``bpf_async_cb_reset``: the program and callback are dropped."""
        self.prog, self.callback = None, 0

    def dequeue(self) -> bool:
        """Take it off its queue; whether it was queued (the kinds say how)."""
        return False


@dataclass
class AsyncFault:
    """A callback that faulted (a program loaded with ``verify=False``)."""

    obj: BpfAsyncCb
    error: ProgramFault


A = TypeVar("A", bound=BpfAsyncCb)


@dataclass(eq=False)
class AsyncTable:
    """Every initialised bpf_timer and bpf_wq of the process, by address (module doc)."""

    _objs: dict[int, BpfAsyncCb] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)
    # The object whose callback runs now (hrtimer_running, for bpf_timer_cancel).
    running: BpfAsyncCb | None = None
    faults: list[AsyncFault] = field(default_factory=list)

    def init(self, addr: int, m: ProgramMap, off: int | None, what: str,
             make: Callable[[ProgramMap, int], BpfAsyncCb]) -> int:
        """``__bpf_async_init``: ``make(map, value)`` is the kind's object for the field
        ``struct what`` at ``addr``, ``off`` bytes into its value."""
        if off is None:
            raise HelperFault(f"{what} init: map {m.name or m.id} has no struct {what} in "
                              "its value")
        with self.lock:
            if addr in self._objs:
                return -errno.EBUSY
            if getattr(m, "uref_released", False):
                return -errno.EPERM
            self._objs[addr] = make(m, addr - off)
        return 0

    def get(self, addr: int, kind: type[A]) -> A | None:
        """The initialised object of ``kind`` at ``addr`` (None: not initialised)."""
        obj = self._objs.get(addr)
        return obj if isinstance(obj, kind) else None

    def of_kind(self, kind: type[A]) -> Iterator[A]:
        return (o for o in self._objs.values() if isinstance(o, kind))

    def set_callback(self, addr: int, callback: int, prog: AsyncProgram) -> int:
        """``__bpf_async_set_callback``."""
        with self.lock:
            obj = self._objs.get(addr)
            if obj is None:
                return -errno.EINVAL
            if getattr(obj.map, "uref_released", False):
                return -errno.EPERM
            obj.prog, obj.callback = prog, callback
        return 0

    def cancel_and_free(self, addr: int) -> None:
        """``__bpf_async_cancel_and_free``: the element holding the field goes away."""
        with self.lock:
            obj = self._objs.pop(addr, None)
            if obj is not None:
                obj.reset()
                obj.dequeue()

    def free_map(self, m: ProgramMap) -> None:
        """Every field in ``m`` (``map_release_uref``: user space let go of the map)."""
        with self.lock:
            for addr in [a for a, o in self._objs.items() if o.map is m]:
                self.cancel_and_free(addr)

    def fire(self, obj: BpfAsyncCb, what: str) -> int:
        """The callback with the map, the element's key and its value; 1 if it ran."""
        prog, callback = obj.prog, obj.callback
        if prog is None or not callback:
            return 0
        m = obj.map
        if m.map_type == _ARRAY:
            key = ((obj.value - m.value_region(0).base) // m.elem_size).to_bytes(4, "little")
        else:
            key_at = getattr(m, "key_at", None)
            if key_at is None:
                raise HelperFault(f"map {m.name or m.id} cannot hold a {what}")
            key = key_at(obj.value)
        region = Region(f"{what} key of map {m.name or m.id}", _KEY_BASE, bytearray(key),
                        writable=False)
        self.running = obj
        try:
            prog.run_async_callback(callback, (m.addr, region.base, obj.value), [region],
                                    obj.cpu)
        except ProgramFault as e:
            self.faults.append(AsyncFault(obj, e))
            _log().warning("%s callback of map %s: %s", what, m.name or m.id, e)
        finally:
            self.running = None
        return 1


ASYNC = AsyncTable()
"""The process's bpf_timer, bpf_wq and bpf_task_work objects."""

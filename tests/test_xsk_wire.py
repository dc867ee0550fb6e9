"""pyxdp.net.xsk_wire: the user's side of an AF_XDP tx and completion ring in native code,
over rings in plain memory (the kernel's side played by the test)."""

from __future__ import annotations

import numpy as np

from pyxdp.net.xsk_queue import ring_bytes
from pyxdp.net.xsk_wire import XskWireState, wire_reap, wire_xmit_rows
from pyxdp.xsk.queue import RingCons, RingProd

CHUNK = 4096


def _wire(nchunks: int = 4, entries: int = 4) -> tuple[XskWireState, RingProd, RingCons,
                                                        np.ndarray, np.ndarray, list[object]]:
    txb = bytearray(ring_bytes(entries, "desc"))
    cqb = bytearray(ring_bytes(entries, "addr"))
    tx = RingProd(txb, entries, "desc")
    cq = RingCons(cqb, entries, "addr")
    umem = np.zeros(nchunks * CHUNK, np.uint8)
    free = (np.arange(nchunks, dtype=np.int64) * CHUNK)
    w = XskWireState(txq_at=tx.q.words.ctypes.data, cq_at=cq.q.words.ctypes.data,
                     umem_at=umem.ctypes.data, umem_size=umem.size, chunk_size=CHUNK,
                     free_at=free.ctypes.data, nfree=nchunks, cap=nchunks)
    return w, tx, cq, umem, free, [txb, cqb]


def test_xmit_writes_descriptors_and_publishes() -> None:
    w, tx, _cq, umem, _free, _keep = _wire()
    pages = np.arange(3 * 64, dtype=np.uint8).reshape(3, 64)
    rows = np.array([2, 0], np.int64)
    sent = wire_xmit_rows(w.words, pages, rows, np.array([4, 0], np.int64),
                          np.array([10, 64], np.int64))
    assert sent == 2 and w.sent == 2 and tx.producer == 2
    d = tx.read(0, 2)
    assert d["len"].tolist() == [10, 64] and d["options"].tolist() == [0, 0]
    a0, a1 = (int(x) for x in d["addr"])
    assert bytes(umem[a0:a0 + 10]) == bytes(pages[2, 4:14])
    assert bytes(umem[a1:a1 + 64]) == bytes(pages[0])


def test_full_ring_refuses_then_completions_come_back() -> None:
    w, tx, cq, _umem, _free, _keep = _wire(nchunks=4, entries=4)
    pages = np.zeros((1, 64), np.uint8)
    rows = np.zeros(6, np.int64)
    offs = np.zeros(6, np.int64)
    lens = np.full(6, 60, np.int64)
    assert wire_xmit_rows(w.words, pages, rows, offs, lens) == 4  # 4 chunks, 4 slots
    assert w.full == 1 and w.nfree == 0
    # The kernel sends two and completes them; one bogus completion address is ignored.
    sent = tx.read(0, 2)["addr"]
    tx._consumer[0] = 2
    cq.entries[0:3] = [sent[0], sent[1], np.uint64(1 << 40)]
    cq._producer[0] = 3
    assert wire_reap(w.words) == 3
    assert w.nfree == 2 and w.bad_completions == 1 and w.completed == 3
    assert cq.consumer == 3
    assert wire_xmit_rows(w.words, pages, rows[:2], offs[:2], lens[:2]) == 2
    assert tx.producer == 6

"""pyxdp's numba cache directory (pyxdp.net.native): named by the sources, old ones pruned."""

from __future__ import annotations

import os
from pathlib import Path

from pyxdp.net import native


def test_cache_is_named_by_the_sources_under_the_user_cache() -> None:
    name = Path(native.CACHE_DIR).name
    assert name.startswith("numba-") and len(name) == len("numba-") + 16
    assert Path(native.CACHE_DIR).parent.name == "pyxdp"


def test_stale_directories_of_other_sources_are_pruned(tmp_path: Path) -> None:
    now = 1_000_000_000.0
    keep, fresh, stale, other = (tmp_path / n for n in ("numba-keep", "numba-fresh",
                                                         "numba-stale", "unrelated"))
    for d in (keep, fresh, stale, other):
        d.mkdir()
        (d / "index").write_text("x")
    old = now - native.STALE_AFTER - 1
    for d in (keep, stale, other):  # the one in use is kept however old
        os.utime(d, (old, old))
    os.utime(fresh, (now - 60, now - 60))
    gone = native.prune_stale(str(tmp_path), str(keep), now=now)
    assert gone == [str(stale)]
    assert keep.exists() and fresh.exists() and other.exists() and not stale.exists()
    assert native.prune_stale(str(tmp_path / "missing"), str(keep), now=now) == []

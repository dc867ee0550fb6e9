"""The maps of a running dataplane from another process (pyxdp.cli.run_maps): the server
on ``@pyxdp-run-PID`` and ``pyxdp map VERB run PID ...``, here in one process (the
kernel test drives a real ``pyxdp run --iface`` from another)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyxdp.cli import run_maps
from pyxdp.cli.main import main
from pyxdp.collection import Collection

OBJ = Path(__file__).resolve().parents[1] / "samples" / "xdp1.o"


@pytest.fixture
def served() -> Iterator[Collection]:
    with Collection.load(OBJ, engine="interp") as coll, \
            run_maps.serving(coll, threading.Lock(), {"program": "xdp_prog1",
                                                       "ifaces": ["eth0"]}):
        yield coll


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def test_show_dump_lookup_update_delete(served: Collection,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    pid = str(os.getpid())
    assert os.getpid() in run_maps.runs()
    rc, out, _ = _run(capsys, "map", "show", "run", pid)
    assert rc == 0
    assert out.splitlines()[0] == f"pyxdp run {pid}: xdp_prog1 on eth0"
    assert "percpu_array  name rxcnt  flags 0x0  key 4B  value 8B  max_entries 256" in out
    # update writes every CPU's copy (bpftool's rule), lookup shows them
    assert _run(capsys, "map", "update", "run", pid, "rxcnt", "key", "17", "0", "0", "0",
                "value", "hex", "2a", "00", "00", "00", "00", "00", "00", "00")[0] == 0
    assert served.maps["rxcnt"][17] == [42] * served.maps["rxcnt"].nr_cpus
    rc, out, _ = _run(capsys, "map", "lookup", "run", pid, "rxcnt", "key", "17", "0", "0",
                      "0")
    assert out.startswith("key: 11 00 00 00\n\tvalue (CPU 00): 2a 00 00 00 00 00 00 00")
    rc, out, _ = _run(capsys, "--json", "map", "dump", "run", pid, "rxcnt")
    docs = json.loads(out)
    assert len(docs) == 256 and docs[17]["values"][0]["value"][0] == "0x2a"
    # an array's element cannot be deleted: the map's own error, one line
    rc, _, err = _run(capsys, "map", "delete", "run", pid, "rxcnt", "key", "1", "0", "0", "0")
    assert rc != 0 and err.count("\n") == 1 and "map delete run" in err


@pytest.mark.parametrize("args, says", [
    (["lookup", "run", "PID", "nosuch", "key", "1"], "no map 'nosuch' (maps: rxcnt)"),
    (["lookup", "run", "PID", "rxcnt", "key", "1", "0"],
     "the key has 2 bytes; the map's key has 4"),
    (["update", "run", "PID", "rxcnt", "key", "1", "0", "0", "0", "value", "1"],
     "the value has 1 bytes; the map's value has 8"),
    (["lookup", "run", "PID"], "which map? (map lookup run PID NAME)"),
    (["dump", "run", "x1", "rxcnt"], "not a pid: 'x1'"),
    (["dump", "run", "999999999", "rxcnt"], "no pyxdp run with pid 999999999"),
])
def test_bad_requests_get_one_line(served: Collection, capsys: pytest.CaptureFixture[str],
                                   args: list[str], says: str) -> None:
    args = [str(os.getpid()) if a == "PID" else a for a in args]
    rc, _, err = _run(capsys, "map", *args)
    assert rc != 0 and says in err and err.count("\n") == 1, err


def test_gone_with_the_server(capsys: pytest.CaptureFixture[str]) -> None:
    with Collection.load(OBJ, engine="interp") as coll:
        with run_maps.serving(coll, threading.Lock(), {}):
            assert os.getpid() in run_maps.runs()
        assert os.getpid() not in run_maps.runs()

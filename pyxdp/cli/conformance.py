"""``pyxdp conformance``: run bpf_conformance vectors, ending with the N passed line."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console

from pyxdp.testing.conformance import (
    KernelEngine,
    Outcome,
    default_vector_dir,
    find_vectors,
    run_interp,
    run_jit,
)


def run(paths: Sequence[str], *, engine: str, verbose: bool) -> int:
    from pyxdp.cli.options import STYLE, emit
    out = Console(highlight=False, soft_wrap=True, quiet=STYLE.json)
    vectors = list(find_vectors(paths or [default_vector_dir()]))
    outcomes: list[Outcome] = []
    kernel = KernelEngine() if engine == "kernel" else None
    try:
        for v in vectors:
            if kernel is not None:
                o = kernel.run(v)
            else:
                o = run_jit(v) if engine == "jit" else run_interp(v)
            outcomes.append(o)
            if o.status == "failed":
                out.print(f"[red]FAIL[/red] {v.name}: {o.detail}")
            elif o.status == "skipped" and verbose:
                out.print(f"[yellow]SKIP[/yellow] {v.name}: {o.detail}")
            elif verbose:
                got = f"{o.got:#x}" if o.got is not None else o.detail
                out.print(f"[green]PASS[/green] {v.name}: {got}")
    finally:
        if kernel is not None:
            kernel.close()
    passed = sum(o.status == "passed" for o in outcomes)
    failed = sum(o.status == "failed" for o in outcomes)
    skipped = sum(o.status == "skipped" for o in outcomes)
    if STYLE.json:
        emit({"engine": engine, "passed": passed, "failed": failed, "skipped": skipped,
              "vectors": [{"name": o.vector.name, "status": o.status, "detail": o.detail,
                           "got": o.got} for o in outcomes
                          if verbose or o.status == "failed"]})
    else:
        print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0

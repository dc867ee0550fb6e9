"""``--plot FILE.svg`` of the bench commands: rates over time, bars beside Linux's.

matplotlib is an optional extra (``pip install pyxdp[plot]``); without it the
command stops before measuring, with one line naming the extra. The Agg
backend draws without a display; the format follows the file's suffix (svg,
png, pdf).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

from pyxdp.errors import PyxdpError

__all__ = ["PlotUnavailable", "plot_bars", "plot_rates", "require_matplotlib"]


class PlotUnavailable(PyxdpError):
    """``--plot`` without matplotlib installed."""


def require_matplotlib() -> Any:
    """matplotlib's pyplot on the Agg backend, or a one-line error naming the extra."""
    # import_module: an optional extra that type checking must not require.
    try:
        matplotlib = importlib.import_module("matplotlib")
    except ImportError:
        raise PlotUnavailable("--plot needs matplotlib: pip install 'pyxdp[plot]'") from None
    matplotlib.use("Agg")
    return importlib.import_module("matplotlib.pyplot")


def _save(fig: Any, path: str) -> None:
    try:
        fig.savefig(path, bbox_inches="tight")
    except (OSError, ValueError) as e:
        raise PlotUnavailable(f"cannot write the plot {path}: {e}") from None
    finally:
        require_matplotlib().close(fig)


def plot_rates(path: str, title: str, times: Sequence[float],
               series: Mapping[str, Sequence[float]], *, unit: str = "Mpps",
               kernel_mpps: float | None = None) -> None:
    """Each series (rx, a verdict...) over ``times`` (seconds since the start); with
    ``kernel_mpps`` a second panel of bars: pyxdp's median rx beside Linux's."""
    plt = require_matplotlib()
    panels = 2 if kernel_mpps is not None else 1
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 3.5), squeeze=False)
    ax = axes[0][0]
    for name, values in series.items():
        ax.plot(list(times), list(values), marker="o", label=name)
    ax.set_xlabel("seconds")
    ax.set_ylabel(unit)
    ax.set_ylim(bottom=0)
    ax.set_title(title)
    ax.legend(loc="lower right")
    if kernel_mpps is not None:
        rx = sorted(series.get("rx", [0.0]))
        median = rx[len(rx) // 2] if rx else 0.0
        _bars(axes[0][1], ["rx"], {"pyxdp": [median], "Linux": [kernel_mpps]}, unit)
        axes[0][1].set_title("median beside Linux (live frames)")
    _save(fig, path)


def _bars(ax: Any, labels: Sequence[str], groups: Mapping[str, Sequence[float | None]],
          unit: str) -> None:
    width = 0.8 / max(len(groups), 1)
    for k, (name, values) in enumerate(groups.items()):
        xs = [i + k * width for i in range(len(labels))]
        ax.bar(xs, [v or 0.0 for v in values], width, label=name)
    ax.set_xticks([i + width * (len(groups) - 1) / 2 for i in range(len(labels))])
    ax.set_xticklabels(list(labels), rotation=20, ha="right")
    ax.set_ylabel(unit)
    ax.legend()


def plot_bars(path: str, title: str, labels: Sequence[str],
              groups: Mapping[str, Sequence[float | None]], *, unit: str = "Mpps") -> None:
    """Side-by-side bars per label, one colour per group (pyxdp, Linux)."""
    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(labels)), 3.5))
    _bars(ax, labels, groups, unit)
    ax.set_title(title)
    _save(fig, path)

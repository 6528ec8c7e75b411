"""Where make test's CPU goes: each test's CPU seconds, its processes' included.

With HYPER_ASSETS_CPU_PROFILE=DIR set, every pytest process of every suite (each xdist
worker: tests/conftest.py registers `CpuProfile`) appends a line per test to
DIR/<environment>-<worker>.jsonl (`venv-lowest-gw0.jsonl`): the test, its module, its
wall seconds, and the CPU seconds its process and all their descendants used during its
setup, call and teardown.
A descendant's CPU counts whether it still runs (psutil reads it) or has ended (its
parent reaped it: `os.times()` and psutil's children_* fields hold it). A server that a
module or session fixture starts charges its CPU to whichever test runs meanwhile, and
the fixture's start-up to the first test that needs it; processes that leave their
parent's tree (none of ours do) are not counted.

`python tests/cpu_profile.py DIR` prints the CPU seconds per suite and per module,
heaviest first (docs/performance.md, "make test's time").
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

VARIABLE = "HYPER_ASSETS_CPU_PROFILE"


def tree_cpu_seconds() -> float:
    """CPU seconds of this process, its ended descendants and its running ones."""
    mine = os.times()
    total = mine.user + mine.system + mine.children_user + mine.children_system
    for process in psutil.Process().children(recursive=True):
        try:
            times = process.cpu_times()
        except psutil.Error:  # ended since the listing: its parent's figures will have it
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


class CpuProfile:
    """The pytest plugin: one JSON line per test into `directory`."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self.out = directory / f"{Path(sys.prefix).name.lstrip('.')}-{worker}.jsonl"

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        cpu, wall = tree_cpu_seconds(), time.monotonic()
        yield
        line = {
            "test": item.nodeid,
            "module": item.path.name,
            "cpu": round(tree_cpu_seconds() - cpu, 2),
            "wall": round(time.monotonic() - wall, 2),
        }
        with self.out.open("a") as out:
            out.write(json.dumps(line) + "\n")


def report(directory: Path, top: int = 25) -> str:
    """CPU seconds per suite (environment), then per module across suites."""
    suites: dict[str, float] = defaultdict(float)
    modules: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for path in sorted(directory.glob("*.jsonl")):
        suite = path.stem.rsplit("-", 1)[0]
        for line in path.read_text().splitlines():
            test: dict[str, Any] = json.loads(line)
            suites[suite] += test["cpu"]
            figures = modules[suite, test["module"]]
            figures[0] += test["cpu"]
            figures[1] += test["wall"]
            figures[2] += 1
    lines = [f"{'suite':<16} {'CPU s':>8}"]
    lines += [f"{s:<16} {c:8.0f}" for s, c in sorted(suites.items(), key=lambda x: -x[1])]
    lines.append(f"{'all':<16} {sum(suites.values()):8.0f}\n")
    lines.append(f"{'suite':<16} {'module':<36} {'tests':>5} {'CPU s':>8} {'wall s':>8}")
    heaviest = sorted(modules.items(), key=lambda x: -x[1][0])[:top]
    for (suite, module), (cpu, wall, count) in heaviest:
        lines.append(f"{suite:<16} {module:<36} {count:>5.0f} {cpu:8.0f} {wall:8.0f}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(Path(sys.argv[1])))

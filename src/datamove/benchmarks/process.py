"""What a user meets before any loop is warm: fresh processes, whole scripts, the install.

Used by :mod:`datamove.benchmarks.suite` (``--process``, ``--install-size``):

* :func:`first_call`: in a new process, the first call of a case (with
  ``out=``) against the median of the calls after it;
* :func:`script`: a short script, ``import`` to exit, doing 10 calls, timed as
  a whole process against the same script written with NumPy's
  reshape/transpose/reshape idiom (medians of paired runs);
* :func:`cold_start`: ``import datamove`` plus 10 calls of 64 MiB into ``out=``,
  timed inside a new process from before the import;
* :func:`new_shapes`: in a warm process, the first call of each of many shapes not seen before (small
  arrays: what a variable-size workload meets on every call), against the NumPy idiom on the same shapes;
* :func:`install_size`: the bytes ``pip install .`` adds to a bare virtual environment.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, Optional

__all__ = ["first_call", "script", "cold_start", "new_shapes", "install_size"]


def _user_env() -> Dict[str, str]:
    """The environment of a user's process: Python's bytecode cache on, datamove's modules compiled.

    ``pip install`` compiles an installed package's modules; a shell with
    ``PYTHONDONTWRITEBYTECODE`` (as some CI and sandboxes set) would make every
    child compile datamove's sources again, about 3 ms of every first call and
    import that no installed user pays.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    global _COMPILED
    if not _COMPILED:
        import datamove

        folder = os.path.dirname(os.path.abspath(datamove.__file__))
        subprocess.run([sys.executable, "-m", "compileall", "-q", folder], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        _COMPILED = True
    return env


_COMPILED = False

_FIRST_CALL = """
import time, json, sys
import numpy as np
import datamove as dm
from datamove.benchmarks import suite as bench
from datamove.engines.native import engine as native_engine
case = bench.Case(*json.loads(sys.argv[1]))
data = bench._in_layout(np.ones(case.shape, case.dtype), case.layout)
shape = getattr(dm.shapes, case.op)(data.shape, *case.args)
out = bench._empty(shape, data.dtype, case.layout)
out.fill(0)  # the pages exist before either call, as for the steady calls
call = getattr(dm, case.op)
core, in_core = native_engine.core(), []

class Timed:  # the compiled core with its runs timed: a call's time less its run is Python's (validation, recipe)
    def __getattr__(self, name):
        return getattr(core, name)

    def run(self, *args):
        t = time.perf_counter(); core.run(*args); in_core.append(time.perf_counter() - t)

    def call(self, *args):  # a new shape's first call: planned, lowered and run by the core in one
        t = time.perf_counter(); done = core.call(*args); in_core.append(time.perf_counter() - t)
        return done

    def first(self, *args):  # the same, its program kept for the repeats
        t = time.perf_counter(); done = core.first(*args); in_core.append(time.perf_counter() - t)
        return done

def repeated(*args):  # a kept call's repeat, in one C call (datamove.ops asks it before any Python step)
    t = time.perf_counter(); done = core.repeated(*args); in_core.append(time.perf_counter() - t)
    return done

native_engine._native = Timed()
dm.ops._repeated = repeated
times, cores = [], []
for _ in range(6):
    before = len(in_core)
    t = time.perf_counter(); call(data, *case.args, out=out); times.append(time.perf_counter() - t)
    cores.append(sum(in_core[before:]))  # (a repeat's miss and the first() after it: the core's, both)
steady = sorted(range(1, 6), key=times.__getitem__)[2]
print(json.dumps([times[0], times[steady], cores[0], cores[steady]]))
"""


def first_call(case: Any) -> Dict[str, float]:
    """``{"first_s", "steady_s", "first_core_s", "steady_core_s"}`` of ``case`` in a fresh process (``out=``
    preallocated and touched): the first call and the median of the five after it, whole and their runs in
    the compiled core (what is left is Python's: validation, the plan and its lowering, cached after the
    first call)."""
    result = subprocess.run([sys.executable, "-c", _FIRST_CALL, json.dumps(list(case))],
                            capture_output=True, text=True, check=True, env=_user_env())
    first, steady, first_core, steady_core = json.loads(result.stdout)
    return {"first_s": first, "steady_s": steady, "first_core_s": first_core, "steady_core_s": steady_core}


_SCRIPT_DATAMOVE = """
import numpy as np, datamove as dm
x = np.ones((8, 16, 256, 256), np.float32)  # 32 MiB
for _ in range(10):
    y = dm.space_to_depth(x, "blocks_first", 2)
"""

_SCRIPT_IDIOM = """
import numpy as np
x = np.ones((8, 16, 256, 256), np.float32)  # 32 MiB
for _ in range(10):
    y = x.reshape(8, 16, 128, 2, 128, 2).transpose(0, 3, 5, 1, 2, 4).reshape(8, 64, 128, 128)
"""


def _wall(code: str) -> float:
    env = _user_env()
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    return time.perf_counter() - start


def script(repeats: int = 7) -> Dict[str, float]:
    """Whole-process wall time of 10 ``space_to_depth`` calls on 32 MiB float32, datamove and the idiom, paired."""
    ours, idiom = [], []
    for _ in range(repeats):
        ours.append(_wall(_SCRIPT_DATAMOVE))
        idiom.append(_wall(_SCRIPT_IDIOM))
    return {"datamove_s": statistics.median(ours), "idiom_s": statistics.median(idiom),
            "ratio": statistics.median(ours) / statistics.median(idiom)}


_COLD = """
import time
start = time.perf_counter()
import numpy as np
numpy_done = time.perf_counter()
import datamove as dm
x = np.ones((16, 16, 256, 256), np.float32)  # 64 MiB
out = np.ones((16, 64, 128, 128), np.float32)
made = time.perf_counter()
for _ in range(10):
    dm.space_to_depth(x, "blocks_first", 2, out=out)
end = time.perf_counter()
print(numpy_done - start, end - made, made - numpy_done)
"""


def cold_start(repeats: int = 5) -> Dict[str, float]:
    """``import datamove`` and 10 calls of 64 MiB into ``out=`` in a new process (arrays made in between, not counted)."""
    runs = []
    for _ in range(repeats):
        result = subprocess.run([sys.executable, "-c", _COLD], capture_output=True, text=True, check=True,
                                env=_user_env())
        runs.append([float(v) for v in result.stdout.split()])
    calls = statistics.median(r[1] for r in runs)
    made = statistics.median(r[2] for r in runs)
    imports = _import_cost(repeats)
    return {"import_datamove_s": imports, "ten_calls_s": calls, "import_plus_calls_s": imports + calls,
            "arrays_and_import_s": made}


def _import_cost(repeats: int) -> float:
    """Median time ``import datamove`` adds after ``import numpy`` (its cumulative ``-X importtime`` line)."""
    extra = []
    for _ in range(repeats):
        result = subprocess.run([sys.executable, "-X", "importtime", "-c", "import numpy, datamove"],
                                capture_output=True, text=True, check=True, env=_user_env())
        for line in result.stderr.splitlines():
            if line.rstrip().endswith("| datamove"):  # the top-level line: everything it imported
                extra.append(int(line.split("|")[1]) / 1e6)
    return statistics.median(extra)


_NEW_SHAPES = """
import json, statistics, sys, time
import numpy as np
import datamove as dm

def idiom(op, x):
    n, c, h, w = x.shape
    if op == "space_to_depth":
        return x.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 3, 5, 1, 2, 4).reshape(n, 4 * c, h // 2, w // 2)
    if op == "depth_to_space":  # blocks_first
        return x.reshape(n, 2, 2, c // 4, h, w).transpose(0, 3, 4, 1, 5, 2).reshape(n, c // 4, 2 * h, 2 * w)
    if op == "batch_to_space":  # block [1, 1, 2, 2], crops of 1 on each side of H and W
        y = x.reshape(2, 2, n // 4, c, h, w).transpose(2, 3, 4, 0, 5, 1).reshape(n // 4, c, 2 * h, 2 * w)
        return y[:, :, 1:-1, 1:-1].copy()
    y = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))  # space_to_batch, pads of 1
    n, c, h, w = y.shape
    return y.reshape(n, c, h // 2, 2, w // 2, 2).transpose(3, 5, 0, 1, 2, 4).reshape(4 * n, c, h // 2, w // 2)

calls = {
    "space_to_depth": (lambda k: np.ones((1, 4, 16, 2 * k), np.float32), ("blocks_first", 2)),
    "depth_to_space": (lambda k: np.ones((1, 16, 8, k), np.float32), ("blocks_first", 2)),
    "batch_to_space": (lambda k: np.ones((4, 4, 16, 2 * k), np.float32), ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1])),
    "space_to_batch": (lambda k: np.ones((1, 4, 16, 2 * k), np.float32), ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1])),
}
dm.space_to_depth(np.ones((1, 1, 2, 2), np.float32), "blocks_first", 1)  # the process warm, not these shapes
out = {}
for op, (make, args) in calls.items():
    ours, theirs = [], []
    for k in range(1, int(sys.argv[1]) + 1):
        x = make(k)
        t = time.perf_counter(); getattr(dm, op)(x, *args); ours.append(time.perf_counter() - t)
        t = time.perf_counter(); idiom(op, x); theirs.append(time.perf_counter() - t)
        y = make(k)
        assert np.array_equal(getattr(dm, op)(y, *args), idiom(op, y))
    out[op] = [statistics.median(ours), statistics.median(theirs)]
print(json.dumps(out))
"""


def new_shapes(count: int = 60) -> Dict[str, Dict[str, float]]:
    """Per op, in a new process: the median first call of ``count`` small shapes not seen before (4 KiB to
    32 KiB of float32; SpaceToDepth, DepthToSpace, BatchToSpace with crops, SpaceToBatch with pads), datamove's and the
    NumPy idiom's, and their ratio."""
    result = subprocess.run([sys.executable, "-c", _NEW_SHAPES, str(count)], capture_output=True, text=True,
                            check=True, env=_user_env())
    return {op: {"datamove_s": ours, "idiom_s": theirs, "ratio": ours / theirs}
            for op, (ours, theirs) in json.loads(result.stdout).items()}


def install_size(source: Optional[str] = None) -> Dict[str, Any]:
    """Bytes that ``pip install SOURCE`` adds to a new virtual environment, beside NumPy's own."""
    source = source or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with tempfile.TemporaryDirectory() as folder:
        env = os.path.join(folder, "venv")
        subprocess.run([sys.executable, "-m", "venv", env], check=True)
        python = os.path.join(env, "bin", "python")
        pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()
        before = _size(site)
        subprocess.run(pip + [source], check=True)
        after = _size(site)
        numpy = _size(os.path.join(site, "numpy")) + _size(os.path.join(site, "numpy.libs"))
        packages = sorted(p for p in os.listdir(site) if p.endswith(".dist-info"))
    shutil.rmtree(folder, ignore_errors=True)
    return {"added_bytes": after - before, "numpy_bytes": numpy, "packages": packages}


def _size(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total

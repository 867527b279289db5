"""What this install of datamove has: ``datamove info`` (and ``python -m datamove info``).

:func:`info` gathers the version, whether the compiled core loaded (and
why not), the instruction set it runs at, its threads, and the optional
libraries installed, without importing any of them (a bug report's first
lines; TensorFlow alone takes seconds to import). :func:`report` formats it.

>>> facts = info()
>>> facts["version"] == __version__ and facts["threads"] == get_num_threads()
True
>>> sorted(facts["libraries"]) == sorted(LIBRARIES)
True
>>> print(report(dict(facts, core="not loaded: no compiler", isa=None, libraries={"torch": "2.13.0", "jax": None})))
... # doctest: +ELLIPSIS +NORMALIZE_WHITESPACE
datamove       0.1.0
compiled core  not loaded: no compiler
...
torch          2.13.0
jax            -
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import platform
import sys
from typing import Any, Dict, Optional, Tuple

from .. import __version__
from ..engines.route import NATIVE_MIN_BYTES
from ..engines.native.threads import get_num_threads

__all__ = ["info", "report", "LIBRARIES"]

#: The optional libraries datamove works with, each with the distributions that provide it (the first one
#: installed gives the version).
LIBRARIES: Dict[str, Tuple[str, ...]] = {
    "torch": ("torch",),
    "jax": ("jax",),
    "tensorflow": ("tensorflow", "tensorflow-cpu", "tensorflow-macos", "tf-nightly"),
    "keras": ("keras",),
    "cupy": ("cupy", "cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x"),
    "dask": ("dask",),
    "openvino": ("openvino",),
    "onnx": ("onnx",),
    "onnxruntime": ("onnxruntime", "onnxruntime-gpu", "onnxruntime-openvino"),
    "triton": ("triton", "pytorch-triton"),
}


def _version(module: str, distributions: Tuple[str, ...]) -> Optional[str]:
    """The installed version of ``module`` (found, not imported), ``"installed"`` if no distribution
    names it, or None where it is not installed."""
    try:
        if importlib.util.find_spec(module) is None:
            return None
    except (ImportError, ValueError):  # a broken install, or a module without a spec
        return None
    for name in distributions:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "installed"


def _core() -> Tuple[str, Optional[str], Optional[str]]:
    """The core's state (``"loaded"`` or ``"not loaded: why"``), its instruction set and this CPU's."""
    from ..engines.native import engine as native_engine

    if not native_engine.available():
        return f"not loaded: {native_engine.missing}", None, None
    core = native_engine.core()
    where = getattr(core, "__file__", None)
    isa, cpu = getattr(core, "ISA", None), getattr(core, "CPU_ISA", None)
    return "loaded" + (f" ({where})" if where else ""), isa, cpu


def info() -> Dict[str, Any]:
    """This install's facts, as a dict (``report`` formats them; ``datamove info --json`` prints them)."""
    core, isa, cpu = _core()
    return {
        "version": __version__,
        "core": core,
        "isa": isa,
        "cpu_isa": cpu,
        "threads": get_num_threads(),
        "python": platform.python_version(),
        "platform": f"{sys.platform} {platform.machine()}",
        "numpy": _version("numpy", ("numpy",)),
        "libraries": {name: _version(name, dists) for name, dists in LIBRARIES.items()},
    }


def report(facts: Dict[str, Any]) -> str:
    """``facts`` (from :func:`info`) as aligned lines; a library not installed reads ``-``."""
    loaded = str(facts["core"]).startswith("loaded")
    if not loaded:
        isa = "-"
    elif facts.get("isa") is None:
        isa = "unknown"  # a core older than its ISA constant
    else:
        isa = str(facts["isa"])
        if facts.get("cpu_isa") not in (None, facts["isa"]):
            isa += f" (this CPU has {facts['cpu_isa']}; DATAMOVE_ISA lowered it)"
    rows = [
        ("datamove", facts["version"]),
        ("compiled core", facts["core"]),
        ("instruction set", isa),
        ("threads", facts["threads"]),
        ("engine='auto'", f"native from {NATIVE_MIN_BYTES >> 10} KiB, numpy below" if loaded else "numpy (no compiled core)"),
        ("python", f"{facts['python']} on {facts['platform']}"),
        ("numpy", facts["numpy"]),
    ] + [(name, version or "-") for name, version in facts["libraries"].items()]
    width = max(len(key) for key, _ in rows) + 2
    return "\n".join(f"{key:<{width}}{value}" for key, value in rows)

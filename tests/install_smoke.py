"""A few seconds' check of an installed datamove: a wheel, or an install without the compiled core.

Run by tests/test_install.py against the installs it builds, and by
cibuildwheel against each wheel (``[tool.cibuildwheel] test-command``)::

    python tests/install_smoke.py --core loaded            # the wheel's core must load
    python tests/install_smoke.py --core missing --under /tmp/target

It checks, in the Python that runs it: that ``datamove`` comes from
``--under`` (the install under test, not a checkout), the four operations,
small and large, several dtypes, and 200 layouts' repeats, against the
specs' formulas (tests/reference.py); that the core loads alone, every symbol
bound, in a process without NumPy; ``engine="native"`` (which needs the core: without it,
one ImportError naming the fix); that a missing core costs one warning per
process, not one per call; and ``python -m datamove info``. Prints ``ok``
and the count of checks, or fails with an AssertionError.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import warnings
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # reference.py, beside this file

import numpy as np  # noqa: E402

import reference  # noqa: E402

#: (op, a small shape, a large shape (over the core's threshold, 128 KiB), its parameters).
CASES = [
    ("space_to_depth", (1, 3, 8, 8), (2, 16, 64, 64), ("blocks_first", 2)),
    ("space_to_depth", (1, 2, 4, 6, 6), (1, 4, 16, 32, 32), ("depth_first", 2)),
    ("depth_to_space", (1, 12, 4, 4), (2, 64, 32, 32), ("depth_first", 2)),
    ("depth_to_space", (2, 18, 3, 3), (1, 72, 48, 48), ("blocks_first", 3)),
    ("batch_to_space", (8, 3, 5, 5), (16, 16, 32, 32), ([1, 1, 2, 4], [0, 0, 1, 0], [0, 0, 0, 2])),
    ("space_to_batch", (2, 3, 6, 6), (2, 16, 64, 62), ([1, 1, 2, 4], [0, 0, 1, 1], [0, 0, 1, 1])),
]
DTYPES = (np.float32, np.float64, np.int16, np.uint8, np.complex128)


def check_operations(dm, core: bool) -> int:
    rng = np.random.default_rng(0)
    engines = ["auto", "numpy"] + (["native"] if core else [])
    checks = 0
    for name, small, large, params in CASES:
        for shape in (small, large):
            for dtype in DTYPES:
                data = (rng.standard_normal(shape) * 100).astype(dtype)
                expected = getattr(reference, name)(data, *params)
                for engine in engines:
                    result = getattr(dm, name)(data, *params, engine=engine)
                    assert result.dtype == data.dtype and np.array_equal(result, expected), (name, shape, dtype, engine)
                    checks += 1
    return checks


def check_repeats(dm) -> int:
    """200 layouts, each called three times: the core keeps each (its table of repeated calls grows, and
    rehashes, many times over), and each repeat is the reference's."""
    checks = 0
    for n in range(1, 201):
        data = np.arange(n * 4 * 2 * 2, dtype=np.int32).reshape(n, 4, 2, 2)
        expected = reference.space_to_depth(data, "depth_first", 2)
        for _ in range(3):
            assert np.array_equal(dm.space_to_depth(data, "depth_first", 2), expected), n
            checks += 1
    return checks


def check_core_loads_alone(core: bool) -> int:
    """The core loads, every symbol bound at once (RTLD_NOW), into a process that loaded nothing else: no
    NumPy, which would bring a C++ library of its own that the core may lean on unseen (a wheel's core
    linked without libstdc++ did). Without the core: nothing to load."""
    if not core:
        return 0
    from datamove import _native

    load = ("import ctypes, os, sys; ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'datamove')))")
    done = subprocess.run([sys.executable, "-S", "-c", load, _native.__file__], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", (done.stdout, done.stderr[-2000:])
    return 1


def check_native_engine(dm, core: bool) -> int:
    data = np.zeros((1, 4, 8, 8), np.float32)
    if core:
        dm.space_to_depth(data, "blocks_first", 2, engine="native")
        return 1
    try:
        dm.space_to_depth(data, "blocks_first", 2, engine="native")
    except ImportError as exc:
        message = str(exc)
    else:
        raise AssertionError("engine='native' ran without the compiled core")
    for words in ("datamove._native", "C++17 compiler", "DATAMOVE_BUILD_CORE=required", "datamove info"):
        assert words in message, (words, message)
    return 1


def check_info(core: bool) -> int:
    import json

    import datamove

    def info(*options: str) -> str:
        done = subprocess.run([sys.executable, "-m", "datamove", "info", *options], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0 and not done.stderr, done.stderr
        return done.stdout

    facts = json.loads(info("--json"))
    assert facts["version"] == datamove.__version__ and facts["threads"] == datamove.get_num_threads(), facts
    assert set(facts["libraries"]) >= {"torch", "jax", "tensorflow", "openvino", "onnxruntime", "triton"}, facts
    text = info()
    if core:
        assert facts["core"].startswith("loaded"), facts
        assert "compiled core    loaded" in text and "instruction set  -" not in text, text
    else:
        assert facts["core"].startswith("not loaded: ") and facts["isa"] is None, facts
        assert "compiled core    not loaded: " in text and "numpy (no compiled core)" in text, text
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--core", choices=("loaded", "missing"), required=True, help="whether the core must load")
    parser.add_argument("--under", type=Path, help="the directory datamove must be imported from")
    args = parser.parse_args(argv)
    core = args.core == "loaded"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import datamove as dm
        from datamove.engines.native import engine as native_engine

        where = Path(dm.__file__).resolve()
        assert args.under is None or args.under.resolve() in where.parents, f"datamove imported from {where}"
        assert native_engine.available() == core, native_engine.missing
        checks = check_operations(dm, core)
    ours = [w for w in caught if "compiled core" in str(w.message)]
    # without the core: one warning, from the first large call, pointing at the caller's line (here)
    assert len(ours) == (0 if core else 1), [str(w.message) for w in caught]
    assert all(w.category is RuntimeWarning and w.filename == os.path.abspath(__file__) for w in ours), ours
    checks += check_repeats(dm) + check_core_loads_alone(core) + check_native_engine(dm, core) + check_info(core)
    print(f"ok: {checks} checks of datamove {dm.__version__} from {where.parent} "
          f"(compiled core {'loaded' if core else 'missing'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The compiled core's program format is read from the core, never copied: pattern ids and limits.

Python writes the programs the core parses (:mod:`datamove.engines.native.engine`,
:mod:`datamove.engines.native.units`), so every id and limit it needs comes from the
module's exports (``src/native/runtime/module.cpp``). Each limit is checked here against
what the core itself takes and refuses, so an export cannot drift from the parser
either. Without the core the package still imports and runs on NumPy.

(About 1 s in all, most of it two child processes.)
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import datamove
from datamove.engines.native import threads
from datamove.engines.native import engine as native_engine
import lowering

pytestmark = pytest.mark.skipif(not native_engine.available(), reason="needs the compiled core")


@pytest.fixture(scope="module")
def core():
    return native_engine.core()


def _program(*steps) -> bytes:
    return np.concatenate([np.array([len(steps)], np.int64)] + [np.asarray(s, np.int64) for s in steps]).tobytes()


def _units(core, entries, unit, parts=1, count=1, src_step=0, item=4):
    """One UNITS step (see units.lower_units): ``count`` rows of ``parts`` units of ``unit`` words."""
    head = [core.PATTERNS["units"], item, 0, 0, 0, 0, 0, 3, count, src_step, unit, parts, 0, unit * count, unit, 0, 1]
    return head + list(entries)


def _takes(core, program: bytes, src: np.ndarray, dst: np.ndarray) -> bool:
    try:
        core.run(program, src, dst, 1, 0)
    except ValueError:
        return False
    return True


def test_python_writes_the_pattern_ids_the_core_exports(core):
    assert lowering._PATTERNS == core.PATTERNS
    assert sorted(core.PATTERNS.values()) == list(range(len(core.PATTERNS)))
    # a program of SpaceToBatch with pads on small images: one UNITS step, under the core's id
    data = np.arange(2 * 3 * 2 * 2, dtype=np.float32).reshape(2, 3, 2, 2)
    from datamove.plans import views as plans
    from lowering.units import lower_units

    plan = plans.space_to_batch(data.shape, (8, 3, 2, 2), (1, 1, 2, 2), (0, 0, 1, 1), (0, 0, 1, 1))
    out = np.empty(plan.out_shape, np.float32)
    step, = lower_units(plan, data, out, (0, 0))
    assert step[0] == core.PATTERNS["units"] and core.ZERO_WORD in step[17:]
    # an id past the last pattern is no pattern
    fill = lowering._step("fill", 4, 0, 0, 0, 0, 0, [[1, 0, 1]])
    dst = np.ones(4, np.float32)
    assert _takes(core, _program(fill), dst, dst)
    assert not _takes(core, _program([len(core.PATTERNS)] + fill[1:]), dst, dst)


def test_a_units_table_writes_zeros_where_it_says_zero_word(core):
    src, dst = np.arange(8, dtype=np.float32) + 1, np.full(8, 9, np.float32)
    core.run(_program(_units(core, [3, core.ZERO_WORD, 1, 0], unit=4)), src, dst, 1, 0)
    assert dst.tolist() == [4, 0, 2, 1, 9, 9, 9, 9]


def test_the_units_limits_are_the_ones_the_core_enforces(core):
    zero = core.ZERO_WORD
    for unit, taken in ((core.UNIT_WORDS, True), (core.UNIT_WORDS + 1, False)):
        src, dst = np.zeros(unit, np.float32), np.ones(unit, np.float32)
        assert _takes(core, _program(_units(core, [zero] * unit, unit)), src, dst) == taken, unit
        assert not taken or not dst.any()
    for parts, taken in ((core.MAX_PARTS, True), (core.MAX_PARTS + 1, False)):
        src, dst = np.zeros(parts, np.float32), np.ones(parts, np.float32)
        assert _takes(core, _program(_units(core, [zero] * parts, 1, parts)), src, dst) == taken, parts
    unit = core.UNIT_ENTRIES // core.MAX_PARTS
    for words, taken in ((unit, True), (unit + 1, False)):  # the parts' entries together
        src, dst = np.zeros(1, np.float32), np.ones(core.MAX_PARTS * words, np.float32)
        assert _takes(core, _program(_units(core, [zero] * (core.MAX_PARTS * words), words, core.MAX_PARTS)),
                      src, dst) == taken, words
    # a table's offsets, and what the core reads on from them (here the step between units), stay in TABLE_REACH
    src, dst = np.zeros(8, np.float32), np.ones(8, np.float32)
    for src_step, taken in ((core.TABLE_REACH - 1, True), (core.TABLE_REACH, False),
                            (1 - core.TABLE_REACH, True), (-core.TABLE_REACH, False)):
        assert _takes(core, _program(_units(core, [zero] * 4, 4, src_step=src_step)), src, dst) == taken, src_step


def test_the_units_words_are_the_ones_the_core_takes(core):
    """A UNITS step moves words of UNIT_ITEMS bytes and no other (units.lower_units makes none of another)."""
    zero = core.ZERO_WORD
    for item in (1, 2, 4, 8, 16):
        src, dst = np.zeros(8, np.uint8), np.ones(4 * item, np.uint8)
        taken = _takes(core, _program(_units(core, [zero] * 4, 4, item=item)), src, dst)
        assert taken == (item in core.UNIT_ITEMS), item
        assert not taken or not dst.any()
    assert core.UNIT_ITEMS == (4, 8)


def test_a_steps_word_is_one_the_core_takes(core):
    """Words are powers of two up to MAX_WORD bytes; gather windows' pixels up to MAX_WINDOW_WORD."""
    dst = np.ones(4 * core.MAX_WINDOW_WORD, np.uint8)
    for word in range(1, 2 * core.MAX_WINDOW_WORD + 1):
        fill = lowering._step("fill", word, 0, 0, 0, 0, 0, [[1, 0, 1]])
        power = word & (word - 1) == 0
        assert _takes(core, _program(fill), dst, dst) == (power and word <= core.MAX_WORD), word
    assert not dst[:core.MAX_WORD].any() and dst[core.MAX_WORD:].all()  # what the words taken filled
    assert core.MAX_WORD < core.MAX_WINDOW_WORD


def test_every_constant_the_core_exports_is_read_where_python_uses_it(core):
    """core_format reads each of the core's exports under its own name, and the modules that need one read
    core_format's: the op and mode ids, the tile blocks, the thread bound (tests/test_planner.py holds the
    two lowerings together bit for bit, so a value read wrong shows there too)."""
    from datamove.engines.native import core_format
    from lowering import strided

    for name in core_format.__all__:
        assert getattr(core_format, name) == getattr(core, name), name
    assert native_engine._OPS == core.OPS and native_engine._MODES == core.MODES
    assert set(core.OPS) == {"batch_to_space", "space_to_batch", "space_to_depth", "depth_to_space"}
    assert strided.BLOCKS == core.TILE_BLOCKS and threads.MAX_THREADS == core.MAX_THREADS


def test_the_program_limits_are_the_ones_the_core_enforces(core):
    dst = np.ones(4, np.float32)
    fill = lowering._step("fill", 4, 0, 0, 0, 0, 0, [[1, 0, 1]])
    for loops, taken in ((core.MAX_LOOPS, True), (core.MAX_LOOPS + 1, False)):
        step = fill[:7] + [loops] + [1, 0, 0] * (loops - 1) + [1, 0, 1]
        assert _takes(core, _program(step), dst, dst) == taken, loops
    for count, taken in ((core.MAX_STEPS, True), (core.MAX_STEPS + 1, False)):
        assert _takes(core, np.concatenate([[count]] + [fill] * count).astype(np.int64).tobytes(), dst, dst) == taken
    assert dst.tolist() == [0, 1, 1, 1]  # what the steps taken filled: one word
    # the thread count datamove takes is the most the core runs (threads.py reads it at import, core or not)
    assert threads.MAX_THREADS == core.MAX_THREADS


def test_the_python_lowering_reads_the_planners_thresholds_from_the_core(core):
    """The Python side's twin of the core's planner (tests/test_planner.py holds them together bit for bit)
    decides with the core's own thresholds (src/native/plan.hpp), each read, never written twice."""
    from lowering import strided, units

    read = {"MIN_ROWS": lowering._MIN_ROWS, "CHUNK_WORDS": lowering._CHUNK_WORDS,
            "CHUNK_BYTES": lowering._CHUNK_BYTES, "SHARED_BYTES": lowering._SHARED_BYTES,
            "REREAD_BYTES": strided.REREAD_BYTES, "SMALL_UNIT_WORDS": units.SMALL_UNIT_WORDS,
            "TABLE_COST": units.TABLE_COST, "ROW_BYTES": units.ROW_BYTES}
    assert read == {name: getattr(core, name) for name in read}
    assert all(value > 0 for value in read.values())


def test_without_the_core_the_package_imports_and_runs_on_numpy():
    code = (
        "import sys, warnings\n"
        "sys.modules['datamove._native'] = None  # as an install without a C++ compiler has it\n"
        "import numpy as np, datamove as dm\n"
        "from datamove.engines.native import core_format, engine as native_engine\n"
        "assert not native_engine.available() and core_format.PATTERNS == {}\n"
        "assert core_format.TILE_BLOCKS == () and dm.engines.native.threads.MAX_THREADS == sys.maxsize\n"
        "x = np.arange(4 * 4 * 8 * 8, dtype=np.float32).reshape(4, 4, 8, 8)\n"
        "y = dm.space_to_batch(x, [1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1])\n"
        "back = dm.batch_to_space(y, [1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1])\n"
        "assert np.array_equal(back, x) and np.array_equal(dm.depth_to_space(dm.space_to_depth(x, 'blocks_first', 2), 'blocks_first', 2), x)\n"
        "print('ok')\n"
    )
    result = _child(code)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def _child(code: str) -> "subprocess.CompletedProcess[str]":
    """``code`` run in a fresh interpreter that imports the datamove this process imported."""
    source = os.path.dirname(os.path.dirname(datamove.__file__))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [source, os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_a_core_older_than_the_program_format_is_refused_and_the_package_runs_on_numpy():
    """A core built from older sources (no PATTERNS: a stale build beside newer Python) is not loaded: its
    programs would be written from no ids. ``import datamove`` still works; engine="native" says why."""
    code = (
        "import glob, importlib.util, sys, types, warnings\n"
        f"path = glob.glob({os.path.dirname(datamove.__file__)!r} + '/_native*')\n"
        "path = [p for p in path if not p.endswith('.pyi')][0]\n"
        "spec = importlib.util.spec_from_file_location('_native', path)\n"
        "real = importlib.util.module_from_spec(spec); spec.loader.exec_module(real)\n"
        "stale = types.ModuleType('datamove._native')\n"
        "for name in dir(real):\n"
        "    if name != 'PATTERNS' and not name.startswith('__'): setattr(stale, name, getattr(real, name))\n"
        "sys.modules['datamove._native'] = stale\n"
        "import numpy as np, datamove as dm\n"
        "from datamove.engines.native import engine as native_engine\n"
        "assert not native_engine.available()\n"
        "x = np.arange(4 * 4 * 64 * 64, dtype=np.float32).reshape(4, 4, 64, 64)\n"
        "warnings.simplefilter('ignore')\n"
        "y = [dm.space_to_depth(x, 'blocks_first', 2) for _ in range(3)][-1]\n"
        "assert np.array_equal(dm.depth_to_space(y, 'blocks_first', 2), x)\n"
        "try:\n"
        "    dm.space_to_depth(x, 'blocks_first', 2, engine='native')\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    result = _child(code)
    assert result.returncode == 0, result.stderr
    assert "predates this version's program format" in result.stdout and "pip install" in result.stdout

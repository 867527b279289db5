"""The compiled core's program format as the core itself exports it: the steps' pattern ids and the limits
its parser holds a program to (``src/native/runtime/module.cpp``, from ``src/native/common.hpp``).

Read here once, from the loaded core, and never copied: :mod:`~datamove.engines.native.engine` and
:mod:`~datamove.engines.native.threads` read them, and so does the tests' twin of the core's planner
(``tests/lowering``), which writes programs with them. A leaf module (it imports nothing of datamove but
the core). Without the
core (an install without a C++ compiler), or with one built from older sources, ``PATTERNS`` is empty and each
limit is -1: :func:`~datamove.engines.native.engine.core` refuses such a core, and no program is made.

>>> import datamove
>>> PATTERNS["contiguous"], ZERO_WORD == -(2**31)
(0, True)
"""

from __future__ import annotations

from types import ModuleType
from typing import Dict, Optional, Tuple

__all__ = ["PATTERNS", "ZERO_WORD", "MAX_PARTS", "UNIT_WORDS", "UNIT_ENTRIES", "TABLE_REACH", "LINE", "MIN_ROWS",
           "CHUNK_WORDS", "CHUNK_BYTES", "SHARED_BYTES", "REREAD_BYTES", "SMALL_UNIT_WORDS", "TABLE_COST", "ROW_BYTES",
           "MAX_THREADS", "MAX_WORD", "MAX_WINDOW_WORD", "UNIT_ITEMS", "TABLE_SLACK", "TILE_BLOCKS", "PIECE_WORDS",
           "FAN_OUT_BYTES", "OPS", "MODES"]

_core: Optional[ModuleType]
try:
    from ... import _native as _core
except ImportError:  # native_engine.core() says why, where the core is needed
    _core = None


def _limit(name: str) -> int:
    return int(getattr(_core, name, -1))


#: A step's pattern id by name: "contiguous", "gather", "scatter", "strided", "fill", "gather_window",
#: "scatter_window", "units".
PATTERNS: Dict[str, int] = dict(getattr(_core, "PATTERNS", {}))  # (empty too from a core of older sources)
#: A UNITS table's entry for a word of zeros.
ZERO_WORD = _limit("ZERO_WORD")
#: The most parts (block offsets) of a UNITS step.
MAX_PARTS = _limit("MAX_PARTS")
#: The most words of a given UNITS step's unit.
UNIT_WORDS = _limit("UNIT_WORDS")
#: The most table entries a UNITS step carries, its parts' together.
UNIT_ENTRIES = _limit("UNIT_ENTRIES")
#: The bound on a table's offsets and on what the core reads on from them.
TABLE_REACH = _limit("TABLE_REACH")
#: Bytes in a cache line, as the kernels count them (streamed stores go a line at a time).
LINE = _limit("LINE")
#: The most threads of one run.
MAX_THREADS = _limit("MAX_THREADS")
#: A step's widest word in bytes (steps move words of 1, 2, 4, ... up to it), but a gather window's.
MAX_WORD = _limit("MAX_WORD")
#: A gather window's widest word: a pixel of up to this many bytes.
MAX_WINDOW_WORD = _limit("MAX_WINDOW_WORD")
#: The item sizes a UNITS step moves (empty without the core: no UNITS step is made).
UNIT_ITEMS: Tuple[int, ...] = tuple(getattr(_core, "UNIT_ITEMS", ()))
#: The planner's operation ids by name ("batch_to_space", "space_to_batch", "space_to_depth",
#: "depth_to_space"), and its mode ids ("blocks_first", "depth_first"), as :func:`_native.call` takes them.
OPS: Dict[str, int] = dict(getattr(_core, "OPS", {}))
MODES: Dict[str, int] = dict(getattr(_core, "MODES", {}))

# The planner's thresholds (src/native/plan.hpp), for the tests' Python twin of it (tests/lowering: _split,
# strided.runs_together, units.lower_units), whose docstrings give the measurements behind them.
#: Rows under which a nest's tile is cut for the threads.
MIN_ROWS = _limit("MIN_ROWS")
#: The most words of a chunk so cut.
CHUNK_WORDS = _limit("CHUNK_WORDS")
#: The fewest bytes of a chunk so cut.
CHUNK_BYTES = _limit("CHUNK_BYTES")
#: Steps under this many bytes are left whole.
SHARED_BYTES = _limit("SHARED_BYTES")
#: The input the loops runs_together moves out may span, in bytes (-1 without the core: none are moved).
REREAD_BYTES = _limit("REREAD_BYTES")
#: Units up to this many words are tried first.
SMALL_UNIT_WORDS = _limit("SMALL_UNIT_WORDS")
#: The lowering's bytes per table word.
TABLE_COST = _limit("TABLE_COST")
#: Output rows from this many bytes keep the windows.
ROW_BYTES = _limit("ROW_BYTES")
#: The bytes a UNITS step's tables may take past the output's own.
TABLE_SLACK = _limit("TABLE_SLACK")
#: The rows of a gather or scatter tile (empty without the core: no tile is made).
TILE_BLOCKS: Tuple[int, ...] = tuple(getattr(_core, "TILE_BLOCKS", ()))
#: Block tiles writing pieces of this many words write as well as longer ones (the longest up to it wins);
#: contiguous runs shorter than it follow their block loop's side.
PIECE_WORDS = _limit("PIECE_WORDS")
#: Streamed scatter tiles whose input rows are this many bytes or more read a block row at a time.
FAN_OUT_BYTES = _limit("FAN_OUT_BYTES")

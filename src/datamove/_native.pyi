"""datamove's compiled CPU core (``src/datamove/_native.cpp``): its functions as type checkers see them."""

HAVE_STREAM: int  # 1 where the build has streaming stores (x86-64)
ISA: str  # the instruction-set level the core runs at: "portable", "sse2", "ssse3", "avx2", "avx512f" or "avx512"
CPU_ISA: str  # this CPU's level (DATAMOVE_ISA may lower ISA below it)
ISAS: tuple[str, ...]  # every level the core can run at on this CPU, lowest first
WHOLE_LINES: int  # 1 where streamed gathers of 4- and 8-byte words store whole lines from registers (AVX-512F)
WHOLE_NARROW_LINES: int  # 1 where those of 1- and 2-byte words do too (AVX-512BW and VBMI)
GATHER_LINES: int  # 1 where streamed gathers of 4- and 8-byte words store whole lines from registers (AVX-512F or AVX2)
GATHER_NARROW_LINES: int  # the same of 1- and 2-byte words outside windows (AVX-512BW and VBMI, or AVX2: AVX-512F too)
# The program format (common.hpp), read by the Python side that writes programs, never copied there
PATTERNS: dict[str, int]  # a step's pattern id by name: "contiguous", "gather", ..., "units"
KERNELS: tuple[str, ...]  # the kernels a step's runs go to ("tiles", "units", "rows_simd", ...), as kernels() names them
ZERO_WORD: int  # a UNITS table's entry for a word of zeros
MAX_PARTS: int  # a UNITS step's parts (block offsets)
UNIT_WORDS: int  # the words of a given UNITS step's unit
UNIT_ENTRIES: int  # its parts' table entries together
TABLE_REACH: int  # the bound on a table's offsets and what the core reads on from them
LINE: int  # bytes in a cache line, as the kernels count them
MAX_LOOPS: int  # loops of one step
MAX_STEPS: int  # steps of one program
MAX_THREADS: int  # threads of one run
MAX_WORD: int  # a step's widest word in bytes, but a gather window's
MAX_WINDOW_WORD: int  # a gather window's widest word (a pixel)
UNIT_ITEMS: tuple[int, ...]  # the item sizes a UNITS step moves
# The planner's ids and thresholds (plan.hpp), read by the Python side's twin of it
OPS: dict[str, int]  # the operations' ids by name
MODES: dict[str, int]  # the depth modes' ids by name
TILE_BLOCKS: tuple[int, ...]  # the rows of a gather or scatter tile
MIN_ROWS: int
CHUNK_WORDS: int
CHUNK_BYTES: int
SHARED_BYTES: int
REREAD_BYTES: int
SMALL_UNIT_WORDS: int
TABLE_COST: int
ROW_BYTES: int
TABLE_SLACK: int  # the bytes a UNITS step's tables may take past the output's
PIECE_WORDS: int  # block tiles' pieces this long write as well as longer ones
FAN_OUT_BYTES: int  # streamed scatter tiles' input rows from which they read a block row at a time

def run(program: bytes, src: object, dst: object, threads: int, stream: int, /) -> None: ...  # arrays: the buffer protocol
def cache_bytes() -> int: ...
def lowest(array: object, /) -> int: ...
def workers() -> int: ...
def copy(src: object, dst: object, threads: int, stream: int, /) -> None: ...  # the bench's copy floor
def streams(program: bytes, dst_address: int, registers: bool = False, /) -> bool: ...
def kernels(program: bytes, dst_address: int, stream: int = 0, /) -> list[tuple[str, str, str, int | None]]: ...
# Repeated calls (runtime/repeat.cpp): a call whose kept recipe ran on the core, run again in one C call
def repeated(op: str, data: object, a: object, b: object, c: object, out: object, engine: object, /) -> object: ...  # None: not kept
def remember(op: str, a: object, b: object, c: object, engine: str, data: object, out: object, program: bytes,
             stream: int, allocate: object, /) -> bool: ...
# A call's first call of a layout (validated by datamove.ops), allocated, planned and run in one C call, its
# program kept for repeated(); (a, b, c) as repeated() takes them
def first(op: str, data: object, a: object, b: object, c: object, out_shape: tuple[int, ...], allocate: object,
          engine: str, out: object = ..., /) -> object: ...  # None: not taken; False: kept already
def handle(op: str, data: object, a: object, b: object, c: object, engine: str, /) -> object: ...  # None: none kept
def at(handle: object, address: int, /) -> object: ...  # a new ndarray; None: not run
def forget() -> None: ...
def repeat_setup(ndarray: type, threads: dict[str, object], engine: dict[str, object], probes: tuple[object, ...],
                 empty: object, api: object, /) -> None: ...
def repeat_facts() -> tuple[bool, bool]: ...

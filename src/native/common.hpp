// datamove._native: the compiled CPU core. This file: what every other one uses (the program's steps,
// the CPU's features, the streaming stores).
//
// It plans a validated call (plan.hpp, planner.cpp) into loop nests and runs them
// over raw memory, with a thread pool of its own and the GIL released. Python keeps the validation (the
// rules, datamove.shapes) and a planner of its own for what this one refuses. Its files, each header
// including the one before it:
//
//   common.hpp      the program's steps, the CPU's features, streaming stores
//   plan.hpp        the planner: planner.cpp, one file of planner/views.cpp (the op's views), lower.cpp
//                   (views to steps), units.cpp (tables) and planner_py.cpp (its Python functions)
//   tile_simd.hpp   the block tiles' SIMD bodies (SSE2, SSSE3, AVX-512) and short runs of pixels
//   streamed.hpp    streamed gathers and scatters: chunks through L1, AVX-512's whole-line kernels
//   run_rows.hpp    the kernels by pattern and run_rows, which walks a step's rows
//   word*.cpp       run_rows for one word width each (1, 2, 4, 8, 16 bytes; wide.cpp: 32, 64, 128, windows
//                   only), compiled in parallel
//   runtime.cpp     one file of runtime/program.cpp (parse: a program into steps; streams: whether its stores
//                   go around the cache), runtime/pool.cpp (jobs and the fork-safe thread pool),
//                   runtime/module.cpp (the Python module) and runtime/repeat.cpp (calls in one C call);
//                   runtime.hpp: what they share
//   cpu.hpp      what the CPU has (GCC's and Clang's builtins, MSVC's cpuid); platform.hpp: threads,
//                locks, the fork handler and the cache's size on POSIX and on Windows (pool.cpp, module.cpp)
//
// Where it builds and runs: x86-64 Linux, macOS and Windows, with GCC, Clang or MSVC, at the instruction
// set levels below (the ssse3 and AVX-512 kernels are compiled only by GCC and Clang, which take their
// target attributes: MSVC's build runs sse2's kernels at every level). Every other CPU, aarch64 (Linux,
// macOS) included, gets the portable path, knowingly: plain C++ loops that the compiler vectorizes
// (NEON on aarch64) and plain stores, since the streaming stores (movntdq) are x86's; -DDM_PORTABLE builds
// the same on x86-64, so the tests run it here. No NEON path of its own: no ARM machine was there to
// measure one against it. tests/test_cross_compile.py compiles every file for x86_64-linux-gnu,
// aarch64-linux-gnu, x86_64-windows-gnu and aarch64-macos with zig's clang (and cpu.hpp in clang's MSVC
// mode); the tests run on x86-64 Linux only.
//
// A *program* is a flat int64 buffer: its number of steps, then per step
//
//     pattern, word, block, lo, hi, src_start, dst_start, nloops, (count, src_stride, dst_stride) * nloops
//
// with starts and strides in words from each array's lowest address. The last
// two loops are the tile (loop 1, loop 0); the loops before them are the rows,
// which the threads share. The core trusts no program: parse refuses any step
// whose words, as its kernels read and write them, reach outside either
// array (run takes the arrays themselves and reads their extents from the
// buffer protocol), any tile whose loops are not the shape its kernels assume,
// and any count, stride or cost that would overflow. The tiles (see
// datamove.engines.native.engine):
//
//   CONTIGUOUS   loop 0 contiguous on both sides: a memcpy per row
//   GATHER<B>    loop 1 = (B, 1, d1), loop 0 = (n, B, 1): B output rows from one input run
//   SCATTER<B>   loop 1 = (B, s1, 1), loop 0 = (n, 1, B): the mirror image
//                With lo > 0 the B rows come in groups of lo: row j lies at (j % lo) * d1 + (j / lo) * hi
//                (s1 for SCATTER): two block loops contiguous on one side only (channels-last depth_first).
//   STRIDED      anything else
//   FILL         zeros (src strides 0)
//   GATHER_WINDOW / SCATTER_WINDOW: the last axis in whole blocks keeping
//                positions lo <= t < hi (SpaceToBatch's padding written, BatchToSpace's crop skipped)
//
// B (2, 3, 4) and the word (1, 2, 4, 8, 16 bytes) are template constants, so the
// compiler turns the block tiles into wide loads, shuffles and wide stores.
// Short tiles (a pixel of a few channels innermost) run a whole run of the loop
// around them at once (contiguous_run, scatter_run): tile by tile, each tile's
// set-up cost more than its few moves.
// Outputs larger than the last-level cache are written with non-temporal stores
// where the CPU has them (x86-64: SSE2 movntdq), as memcpy does, so the output's
// lines are not read before they are written; elsewhere plain stores. Where the
// CPU has AVX-512F, streamed gathers of 4- and 8-byte words store whole lines
// straight from registers (gather_lines) instead of through an L1 buffer, and
// where it has AVX-512BW and VBMI too, those of 1- and 2-byte words; where it has
// AVX2 alone, those of 1- to 8-byte words half a line a store (gather_lines_avx2;
// 1 and 2 bytes outside padded windows), and chained ones (chained_lines_avx2).

#pragma once

#include <algorithm>
#include <cctype>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <numeric>
#include <type_traits>

#include "cpu.hpp"

#if (defined(__x86_64__) || defined(_M_X64)) && !defined(DM_PORTABLE)  // DM_PORTABLE: the scalar build other CPUs get (tests)
#include <emmintrin.h>
#define DM_HAVE_STREAM 1
#else
#define DM_HAVE_STREAM 0
#endif

// A function always put into its callers: a tile's body, called for every tile, where a call costs as much as
// the tile's moves (uint8 SpaceToBatch with a 4 x 4 block, 2 MiB: 0.11 ms inlined, 0.22 ms called, when a
// change elsewhere in run_rows tipped GCC's inliner).
#if defined(__GNUC__)
#define DM_INLINE inline __attribute__((always_inline))
#elif defined(_MSC_VER)
#define DM_INLINE __forceinline
#else
#define DM_INLINE inline
#endif

// A function kept out of its callers, where their other values would crowd its own out of the registers.
#if defined(__GNUC__)
#define DM_NOINLINE __attribute__((noinline))
#elif defined(_MSC_VER)
#define DM_NOINLINE __declspec(noinline)
#else
#define DM_NOINLINE
#endif

// SSSE3's byte shuffle, for blocks of 3 narrow words, in functions compiled for it and called only where
// the CPU has it (the module itself targets any x86-64 CPU); GCC and Clang only. DM_NO_SSSE3: what a CPU
// without it runs (tests).
#if DM_HAVE_STREAM && defined(__GNUC__) && !defined(DM_NO_SSSE3)
#include <tmmintrin.h>
#define DM_HAVE_SSSE3 1
#else
#define DM_HAVE_SSSE3 0
#endif

// AVX2's 32-byte lane permutes, byte shuffles, masked loads and streaming stores, for the streamed gathers
// below AVX-512 (gather_lines_avx2, chained_lines_avx2), in functions compiled for it and called only where
// the CPU (and the OS) has it; GCC and Clang only. DM_NO_AVX2: a build without them (DATAMOVE_ISA lowers
// the level at run time, as the tests do).
#if DM_HAVE_STREAM && defined(__GNUC__) && !defined(DM_NO_AVX2)
#include <immintrin.h>
#define DM_HAVE_AVX2 1
#define DM_AVX2 __attribute__((target("avx2")))
#else
#define DM_HAVE_AVX2 0
#endif

// AVX-512F's whole-line streaming stores and two-vector permutes, for the streamed gathers of 4- and 8-byte
// words, in functions compiled for it and called only where the CPU (and the OS) has it; GCC and Clang only.
// DM_NO_AVX512: what a CPU without it runs (tests).
#if DM_HAVE_STREAM && defined(__GNUC__) && !defined(DM_NO_AVX512)
#include <immintrin.h>
#define DM_HAVE_AVX512 1
#else
#define DM_HAVE_AVX512 0
#endif

namespace dm {

// ------------------------------------------------------------------ the instruction set
// The levels the core has kernels for, lowest first: portable (no SSE2: the build other CPUs get, and
// -DDM_PORTABLE), sse2 (any x86-64), ssse3 (blocks of 3 narrow words by byte shuffles), avx2 (for now
// the kernels of ssse3), avx512f (whole-line gathers, tables and transposes of 4- and 8-byte words) and
// avx512 (F, BW and VBMI: those of 1- and 2-byte words, byte permutes). The core runs at the CPU's level,
// read once as it loads, or at a lower one that DATAMOVE_ISA names (every level a machine has is tested
// on it; a user who meets a bug in a kernel can step around it). One selector, kIsa; every kernel asks it.
enum Isa { IsaPortable = 0, IsaSse2, IsaSsse3, IsaAvx2, IsaAvx512f, IsaAvx512, IsaCount };
inline const char* const kIsaNames[IsaCount] = {"portable", "sse2", "ssse3", "avx2", "avx512f", "avx512"};

// The lowest level this build runs at: sse2 on x86-64 (its bodies use SSE2 unconditionally), else portable.
constexpr int kLowestIsa = DM_HAVE_STREAM ? IsaSse2 : IsaPortable;

// The CPU's level among those this build has kernels for (cpu.hpp asks the CPU: GCC, Clang and MSVC).
inline int cpu_isa() {
#if DM_HAVE_STREAM
    const CpuFeatures has = cpu_features();
#if DM_HAVE_AVX512
    if (has.avx512f) return has.avx512bw && has.avx512vbmi ? IsaAvx512 : IsaAvx512f;
#endif
    if (has.avx2) return IsaAvx2;
#if DM_HAVE_SSSE3
    if (has.ssse3) return IsaSsse3;
#endif
#endif
    return kLowestIsa;
}

// DATAMOVE_ISA as a level (case and surrounding blanks ignored): -1 where it is unset, empty or "native",
// -2 where it names no level.
inline int asked_isa() {
    const char* value = std::getenv("DATAMOVE_ISA");
    char word[16] = {0};
    int n = 0;
    for (const char* c = value ? value : ""; *c; ++c) {
        if (*c == ' ' || *c == '\t' || *c == '\n') continue;
        if (n == 15) return -2;
        word[n++] = (char)std::tolower((unsigned char)*c);
    }
    if (n == 0 || std::strcmp(word, "native") == 0) return -1;
    for (int k = 0; k < IsaCount; ++k)
        if (std::strcmp(word, kIsaNames[k]) == 0) return k;
    return -2;
}

inline const int kCpuIsa = cpu_isa();
// The level the core runs at: the CPU's, or the lower one asked for (never under kLowestIsa; a level above
// the CPU's, or no level, leaves the CPU's: the module warns as it loads).
inline const int kIsa = asked_isa() >= 0 ? std::max(kLowestIsa, std::min(asked_isa(), kCpuIsa)) : kCpuIsa;


// UNITS: whole units of output words from a table of their input offsets (zeros where kZeroWord), one
// unit a row: made by merge_units from a program's steps, or given in a program with its table.
enum Pattern { CONTIGUOUS = 0, GATHER = 1, SCATTER = 2, STRIDED = 3, FILL = 4, GATHER_WINDOW = 5, SCATTER_WINDOW = 6,
               UNITS = 7 };
// A table's entry for a word of zeros (SpaceToBatch's pads), in a program and in a Table.
constexpr int32_t kZeroWord = INT32_MIN;
// How far a table's offsets (units, table_lines) and what they read on may reach, in words: their int32
// entries, and the sums of them that the kernels form, stay in range (parse holds tables to it).
constexpr int64_t kTableReach = int64_t(1) << 28;
// The most parts of a UNITS step (SpaceToBatch: its block offsets, up to 4 x 4 x 4), and the input bytes
// a chunk of its rows reads, for every part in turn (run_units: in the L2 cache from the first part on).
constexpr int64_t kMaxParts = 64;
// The most words of a given UNITS step's unit (an output image: channels-last BatchToSpace with crops of
// 7 x 7 images, 3 x 3 block, 16 channels: 5776 words), and of its parts' tables together (the program
// carries them: at most 2 MiB). Up to 4096 words a unit, images over that went to the windows or the
// pieces of their crops: channels-last BatchToSpace with crops of 4 x 4 to 14 x 14 input images, 16 and
// 64 channels, 1.42-1.58x the copy floor; as units, 0.61-0.73x (same process, in turns).
constexpr int64_t kUnitsWords = 16384;
constexpr int64_t kUnitsEntries = kMaxParts * 4096;
// A UNITS step's words: 4 or 8 bytes, what its tables' gathers move (the module exports UNIT_ITEMS).
constexpr int64_t kUnitItems[] = {4, 8};
inline bool unit_item(int64_t word) { return word == kUnitItems[0] || word == kUnitItems[1]; }
constexpr int64_t kUnitsChunkBytes = 256 * 1024;

// The words a step moves: powers of two up to kMaxWord bytes, and pixels up to kMaxWindowWord bytes in
// gather windows only (rows_for compiles those for them alone). The module exports both.
constexpr int64_t kMaxWord = 16;
constexpr int64_t kMaxWindowWord = 128;
inline bool step_word(int64_t word, int64_t pattern) {
    return word >= 1 && word <= kMaxWindowWord && !(word & (word - 1)) && (word <= kMaxWord || pattern == GATHER_WINDOW);
}

constexpr int kMaxLoops = 256;
constexpr int kMaxSteps = 1 << 16;
constexpr int kMaxThreads = 1024;
// Bytes of work below which a job is not worth another thread's wake-up.
constexpr int64_t kBytesPerPart = 256 * 1024;
// Words per chunk of a streamed tile: a chunk's rows stay in L1 before they are streamed out.
constexpr int64_t kChunkBytes = 2048;
// A streamed run of gather tiles (gather): bytes per chunk of a row, B rows (side.n * B side by side)
// buffered. Twice kChunkBytes: each output stream then goes to memory in 2-4 KiB runs, not 1-2 KiB
// (SpaceToDepth 512 MiB and 1 GiB into np.empty, 4 output streams: 1.30-1.43x -> 1.15-1.33x the copy
// floor, same process, in turns, three runs). Scatter tiles keep kChunkBytes (DepthToSpace with block 3
// went 0.82x -> 0.92x with the larger chunk).
constexpr int64_t kGatherChunkBytes = 2 * kChunkBytes;

struct alignas(16) W16 {
    uint64_t a, b;
};

// A pixel of 32 bytes (8 float32 channels innermost): the word of gather windows over channels-last data,
// aligned to 16 bytes like W16 (NumPy's large arrays start 16 bytes into a line).
struct alignas(16) W32 {
    W16 a, b;
};

// Pixels of 64 and 128 bytes (16 and 32 float32 channels), for gather windows too.
struct alignas(16) W64 {
    W32 a, b;
};
struct alignas(16) W128 {
    W64 a, b;
};

struct Loop {
    int64_t n, s, d;
};

struct Table;

struct Step;
// A pattern's rows [r0, r1) of a step, on one thread (run_rows<T, P, B, NT>, src and dst at their lowest
// addresses).
typedef void (*RowsFn)(const Step&, char*, char*, int64_t, int64_t);

// The kernels a step's runs of tiles go to in run_rows, chosen once for the step when its program is
// prepared (choose, program.cpp): run_rows executes the choice, it does not try one kernel after another
// at every run. The map in runtime.hpp says what each moves, and at which levels (the instruction set is
// kIsa's, read inside the kernel). A step's `kernel` takes its runs; a run it cannot take (a thread's range
// cuts the run short, or a run's output lies off the alignment the kernel stores at) goes to its `then`,
// and where that cannot either, tile by tile. A step's table of units (`rows_table`), where it has one,
// takes its whole units before either. kernels() in the module names them (_native.KERNELS).
enum Kernel : uint8_t {
    K_TILES = 0,        // tile by tile: tile() (the patterns' SIMD bodies, the compiler's loops)
    K_UNITS,            // UNITS steps: run_units -> table_run
    K_ROWS_SIMD,        // plain blocks of 2 or 4 rows of 4- or 8-byte words: gather_rows_run, scatter_rows_run
    K_SIDE_LINES,       // streamed gathers whose rows go on past a side loop (side_joined): gather
    K_JOINED_LINES,     // streamed gathers whose rows go on from tile to tile (rows_go_on): gather
    K_CHAINED_LINES,    // streamed gathers in chains of rows (chained_rows): gathers_chains
    K_STRIDED_LINES,    // strided tiles a line at a time (strided_fits): strided_run
    K_CONTIGUOUS_RUNS,  // copies of rows, a run of tiles at a time: contiguous_run
    K_PERMUTE_ROWS,     // plain scatters of 1- and 2-byte words, by byte permutes: interleaved_run
    K_SCATTER_RUNS,     // scatters of pixels and narrow words, a run at a time: scatter_run
    K_UNIT_ROWS,        // plain gathers of 1- and 2-byte words as units of output: gather_unit_rows
    K_TRANSPOSED_RUNS,  // plain strided tiles whose output rows go on through the run: transposed_run
    K_COUNT
};
constexpr const char* kKernelNames[K_COUNT] = {"tiles",          "units",           "rows_simd",   "side_lines",
                                               "joined_lines",   "chained_lines",   "strided_lines", "contiguous_runs",
                                               "permute_rows",   "scatter_runs",    "unit_rows",     "transposed_runs"};

struct Step {
    int pattern, word, block;
    int64_t lo, hi, src0, dst0;
    int nouter;
    const Loop* outer;
    Loop l1, l0;
    int64_t rows, row_cost;  // row_cost: bytes a row writes
    int64_t first, last;  // windows: the blocks wholly inside lo <= t < hi (set by parse: no division per tile)
    int64_t at[4];         // block tiles: the offsets of the B rows (set by parse: no division per tile)
    bool nt;               // in a streamed program: whether this step streams (set by streams)
    uint8_t kernel, then;  // its runs' kernel, and the kernel of the runs that one cannot take (set by choose)
    const Table* rows_table;  // the table its whole units go by (table_of; made by choose), or none
    RowsFn fn;             // the run_rows instance for its word, pattern, block and stores (set by choose)
    const Table* table;    // UNITS: the units' table (merge_units, or made from `given`), a row a unit
    const int64_t* given;  // UNITS given in a program: the tables' entries there (parts x the unit's words)
    int64_t parts, part_d; // UNITS: `parts` units a row, each from its own table (table[k]), part_d apart in dst
    bool reads_on;         // scatter windows of rows from 1 KiB: a tile's input rows go on where a later tile reads
    char* scratch;         // streamed: this thread's chunk buffer, kScratchBytes on a page (set by run_rows)
    struct Carry* carry;   // streamed: this thread's held partial line (set by run_rows)
    struct Permute* perm;  // plainly stored: this thread's byte permute for pixel_rows, permute_rows (set by run_rows)
};

// A byte permute's index and each row's bytes of it (pixel_rows, permute_rows), made on a step's first
// run in a thread (run_rows holds one) for the key (0: none yet), not for every run (a few vectors). (Held
// in the Step itself, its address passed to those calls, the compiler reloaded every field of run_rows'
// copy after each call: Float16 NCHW DepthToSpace of 12 x 12 images, which never takes them, 1.61x ->
// 2.19x the copy floor.)
struct Permute {
    int64_t key = 0;
    uint8_t at[64];
    uint64_t rows[4];
};

// ------------------------------------------------------------------ stores

constexpr int64_t kLine = 64;
// Streams a thread may write side by side, each a line at a time, and still join each one's partial lines.
constexpr int64_t kJoinedStreams = 8;
// Rows a streamed gather buffers side by side (side_joined): 4 x 4 blocks.
constexpr int64_t kSideRows = 16;

// The line at p asked for into the cache (a prefetch: never a fault, wherever p points).
inline void ask_line(const void* p) {
#if DM_HAVE_STREAM
    _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0);
#elif defined(__GNUC__)
    __builtin_prefetch(p);
#else
    (void)p;
#endif
}

// Four bytes at d (4-byte aligned) around the cache.
inline void stream4(char* d, const char* s) {
#if DM_HAVE_STREAM
    int v;
    std::memcpy(&v, s, 4);
    _mm_stream_si32(reinterpret_cast<int*>(d), v);
#endif
}

// The partial line a streamed scatter tile ends on, held back until the thread's next tile, whose output
// goes on from it, fills the rest: the line then goes out whole, in one streaming store per 16 bytes. A
// line streamed in two partial halves goes to memory as two partial writes where the CPU's
// write-combining lets the first half go before the second comes, and these cost far more than a whole
// line: BatchToSpace into np.empty (16 bytes past a line), 512 MiB, rows of 2 KiB, ran at 1.51x the copy
// floor against 1.07x into an array on a line (2-core Intel Xeon, same process, in turns). Taken by the
// tiles that stage rows in the L1 buffer (put_joined: DepthToSpace uint8, 512 MiB, 1.33x -> 1.20x) and
// by the windows that ask for their next rows between two rows (scatter_window: BatchToSpace with crops,
// 512 MiB, 1.52-1.55x -> 1.19-1.23x).
struct Carry {
    alignas(64) char buf[64];
    char* line = nullptr;  // the line held (on 64 bytes), or none
    int64_t to = 0;        // its bytes [0, to) are held
    // The held bytes stored plainly: the rest of their line comes from another row, at another time (a
    // step of its own, as a crop's edge pixels were before BatchToSpace's scatter windows took pixels),
    // and a partial line streamed costs a partial write to memory, stored plainly a read of the line.
    // Channels-last 5-D BatchToSpace with crops, then so, 64 MiB, its rows' ends so stored, and so the
    // line a row starts in where it does not go on from the held one (put_joined): 1.36x -> 1.26x the
    // copy floor (2-core Intel Xeon, same process, in turns); the suite's other programs that hold lines
    // within +-0.03.
    void flush() {
        if (!line) return;
        std::memcpy(line, buf, to);
        line = nullptr;
    }
    // Whether the bytes from d go on from the held ones.
    bool goes_on(const char* d) const { return line && line + to == d; }
    // The held line, its last `n` bytes now s: streamed whole.
    void finish(const char* s, int64_t n) {
        std::memcpy(buf + to, s, n);
        stream_whole();
    }
    // The buffer, the whole line now, streamed.
    void stream_whole();
    // The buffer, to hold the first n bytes of the line at d (what it held before flushed).
    char* start(char* d, int64_t n) {
        flush();
        line = d, to = n;
        return buf;
    }
    // Holds [d, d + n), the start of the line at d.
    void hold(char* d, const char* s, int64_t n) { std::memcpy(start(d, n), s, n); }
};

#if DM_HAVE_AVX2
// AVX2's whole-line gathers (gather_lines_avx2, chained_lines_avx2), where AVX-512F's do not run.
inline const bool kAvx2 = kIsa >= IsaAvx2;
#endif

#if DM_HAVE_AVX512
inline const bool kAvx512 = kIsa >= IsaAvx512f;
// AVX-512BW's masked byte loads and VBMI's byte permutes: gather_lines of 1- and 2-byte words.
inline const bool kAvx512Bytes = kIsa >= IsaAvx512;
#define DM_NARROW __attribute__((target("avx512f,avx512bw,avx512vbmi")))  // (the functions that use them)

// n bytes (a multiple of 64) from s to d (on a line) around the cache, a whole line a store. Where the CPU
// has AVX-512F, put_bytes and put_lines store their bodies of 256 bytes or more so: on the 2-core Intel
// Xeon, same process, in turns, SpaceToDepth NHWC 128 MiB 0.94x -> 0.63x the copy floor, DepthToSpace
// NHWC 1.13-1.27x -> 0.93-1.03x (512-byte pieces), SpaceToBatch NHWC with pads 4 channels 1.13x ->
// 1.04x; the other cases within +-0.05. (A function of its own: its vzeroupper keeps the vector
// registers' upper halves clean for the SSE code around it.)
__attribute__((target("avx512f"))) DM_NOINLINE inline void stream_lines(char* d, const char* s, int64_t n) {
    for (int64_t k = 0; k < n; k += kLine) _mm512_stream_si512(reinterpret_cast<__m512i*>(d + k), _mm512_loadu_si512(s + k));
}

// n bytes (a multiple of 64) of zeros at d (on a line), as stream_lines (zero_bytes' bodies).
__attribute__((target("avx512f"))) DM_NOINLINE inline void zero_lines(char* d, int64_t n) {
    for (int64_t k = 0; k < n; k += kLine) _mm512_stream_si512(reinterpret_cast<__m512i*>(d + k), _mm512_setzero_si512());
}
#endif

// Whether streamed gathers of W-byte words store whole lines from registers at this level (lines_fit):
// AVX-512F words of 4 to 16 bytes (gather_lines), with BW and VBMI words of 1 and 2 (gather_narrow_lines);
// AVX2 alone words of 4 and 8 bytes (gather_lines_avx2), and of 1 and 2 bytes outside padded windows. AVX-512F
// without BW and VBMI (Skylake-SP, Cascade Lake) takes AVX2's words of 1 and 2 bytes outside windows:
// uint8 SpaceToDepth b2 128 MiB on the 2-core Xeon at DATAMOVE_ISA=avx512f, stored plainly before, read
// 1.64x the copy floor against 0.83x at avx2.
inline bool whole_line_words(int64_t W, bool window = false) {
#if DM_HAVE_AVX512
    if (kAvx512 && (W >= 4 || kAvx512Bytes)) return true;
#endif
#if DM_HAVE_AVX2
    if (kAvx2) return W == 4 || W == 8 || (!window && (W == 1 || W == 2));
#endif
    (void)W, (void)window;
    return false;
}

// Where put_bytes, put_lines and zero_bytes store whole lines 64 bytes a store (see stream_lines).
constexpr int64_t kLineStoresFrom = 256;

// Copy n bytes to d, around the cache when NT (the body as aligned 16-byte streaming stores; the
// head and tail too, as 4-byte ones, where d and n are multiples of 4).
template <bool NT>
inline void put_bytes(char* d, const char* s, int64_t n) {
#if DM_HAVE_STREAM
    const bool words = (reinterpret_cast<uintptr_t>(d) & 3) == 0 && (n & 3) == 0;
    if (NT && (n >= 64 || words)) {  // (short pieces stream only as words: streams_whole checks they are)
        int64_t head = std::min<int64_t>(n, (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15);
        if (words) {  // the head and the tail streamed too, four bytes at a time: no plain store at all
            for (int64_t k = 0; k < head; k += 4) stream4(d + k, s + k);
        } else {
            std::memcpy(d, s, head);
        }
        d += head, s += head, n -= head;
        int64_t body = n & ~int64_t(63);
#if DM_HAVE_AVX512
        if (kAvx512 && body >= kLineStoresFrom) {  // 16 bytes a store to a line, then whole lines
            body = 0;
            for (; (reinterpret_cast<uintptr_t>(d + body) & (kLine - 1)) && body + 16 <= n; body += 16)
                _mm_stream_si128(reinterpret_cast<__m128i*>(d + body), _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + body)));
            const int64_t lines = (n - body) & ~(kLine - 1);
            stream_lines(d + body, s + body, lines);
            body += lines;
        } else
#endif
        {
            for (int64_t k = 0; k < body; k += 64) {
                __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + k));
                __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + k + 16));
                __m128i x2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + k + 32));
                __m128i x3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + k + 48));
                _mm_stream_si128(reinterpret_cast<__m128i*>(d + k), x0);
                _mm_stream_si128(reinterpret_cast<__m128i*>(d + k + 16), x1);
                _mm_stream_si128(reinterpret_cast<__m128i*>(d + k + 32), x2);
                _mm_stream_si128(reinterpret_cast<__m128i*>(d + k + 48), x3);
            }
        }
        for (; body + 16 <= n; body += 16)
            _mm_stream_si128(reinterpret_cast<__m128i*>(d + body), _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + body)));
        if (words) {
            for (; body < n; body += 4) stream4(d + body, s + body);
        } else {
            std::memcpy(d + body, s + body, n - body);
        }
        return;
    }
#endif
    std::memcpy(d, s, n);
}

inline void Carry::stream_whole() {
#if DM_HAVE_STREAM
    for (int k = 0; k < kLine; k += 16)
        _mm_stream_si128(reinterpret_cast<__m128i*>(line + k), _mm_load_si128(reinterpret_cast<const __m128i*>(buf + k)));
#else
    std::memcpy(line, buf, kLine);  // (no build without streaming stores streams: run's `stream` is 0 there)
#endif
    line = nullptr;
}

// put_bytes<true> for a piece of a streamed output that the thread's next piece may go on from: the line
// the piece starts in goes out whole where the carry holds the rest of it (else it is stored plainly),
// and the line it ends in is held (see Carry).
inline void put_joined(char* d, const char* s, int64_t n, Carry* carry) {
    char* const first = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(d) & ~uintptr_t(kLine - 1));
    char* const last = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(d + n) & ~uintptr_t(kLine - 1));
    if (!carry || first == last) return put_bytes<true>(d, s, n);
    if (d != first) {
        const int64_t h = first + kLine - d;
        if (carry->goes_on(d)) {
            carry->finish(s, h);
        } else {  // (plainly, as Carry::flush stores a line no row went on to)
            put_bytes<false>(d, s, h);
        }
        d += h, s += h, n -= h;
    }
    const int64_t tail = d + n - last;
    put_bytes<true>(d, s, n - tail);
    if (tail) carry->hold(last, s + n - tail, tail);
}

// Copy n bytes to d: the whole lines streamed, the partial lines at either end stored plainly. For rows
// whose ends share a line with rows written much later (another run of the same step): both halves of
// such a line are plain, so it is read once and stays in cache, not flushed half-full twice.
inline void put_lines(char* d, const char* s, int64_t n) {
#if DM_HAVE_STREAM
    const int64_t head = std::min<int64_t>(n, (kLine - (int64_t)(reinterpret_cast<uintptr_t>(d) & (kLine - 1))) & (kLine - 1));
    std::memcpy(d, s, head);
    d += head, s += head, n -= head;
    const int64_t body = n & ~(kLine - 1);
#if DM_HAVE_AVX512
    if (kAvx512 && body >= kLineStoresFrom) {
        stream_lines(d, s, body);
    } else
#endif
    {
        for (int64_t k = 0; k < body; k += 16)
            _mm_stream_si128(reinterpret_cast<__m128i*>(d + k), _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + k)));
    }
    std::memcpy(d + body, s + body, n - body);
#else
    std::memcpy(d, s, n);
#endif
}

template <bool NT>
inline void zero_bytes(char* d, int64_t n) {
#if DM_HAVE_STREAM
    const bool words = (reinterpret_cast<uintptr_t>(d) & 3) == 0 && (n & 3) == 0;
    if (NT && (n >= 64 || words)) {
        int64_t head = std::min<int64_t>(n, (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15);
        if (words) {
            for (int64_t k = 0; k < head; k += 4) _mm_stream_si32(reinterpret_cast<int*>(d + k), 0);
        } else {
            std::memset(d, 0, head);
        }
        d += head, n -= head;
        int64_t body = n & ~int64_t(15);
        const __m128i z = _mm_setzero_si128();
        int64_t k = 0;
#if DM_HAVE_AVX512
        if (kAvx512 && body >= kLineStoresFrom) {  // 16 bytes a store to a line, then whole lines
            for (; (reinterpret_cast<uintptr_t>(d + k) & (kLine - 1)) && k < body; k += 16)
                _mm_stream_si128(reinterpret_cast<__m128i*>(d + k), z);
            const int64_t lines = (body - k) & ~(kLine - 1);
            zero_lines(d + k, lines);
            k += lines;
        }
#endif
        for (; k < body; k += 16) _mm_stream_si128(reinterpret_cast<__m128i*>(d + k), z);
        if (words) {
            for (int64_t k = body; k < n; k += 4) _mm_stream_si32(reinterpret_cast<int*>(d + k), 0);
        } else {
            std::memset(d + body, 0, n - body);
        }
        return;
    }
#endif
    std::memset(d, 0, n);
}

inline void fence() {
#if DM_HAVE_STREAM
    _mm_sfence();
#endif
}

// Lines to be read soon, asked for ahead of their loads a few at a time (hints: they never fault). All
// at once, a chunk's input (8 KiB) filled the load queue and held up the stores between.
struct Ahead {
    static constexpr int kRanges = 16;  // more ranges than this are left to the hardware prefetcher
    const char* at[kRanges];
    const char* end[kRanges];
    int n = 0, i = 0;
    int64_t lines = 0;
    void add(const void* p, int64_t bytes) {
        if (n == kRanges || bytes <= 0) return;
        at[n] = static_cast<const char*>(p);
        end[n] = at[n] + bytes;
        lines += (bytes + kLine - 1) / kLine;
        ++n;
    }
    void ask(int64_t count) {
        for (; count > 0 && i < n; --count) {
            ask_line(at[i]);
            at[i] += kLine;
            if (at[i] >= end[i]) ++i;
        }
    }
};

}  // namespace dm

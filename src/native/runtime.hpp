// What the core's own files share: a program parsed into steps, whether it streams, and the jobs the
// thread pool runs.
//
// The map of the kernels: a step's pattern -> the kernel that moves its words (file) -> the levels that
// have it (portable, sse2, ssse3, avx2, avx512f, avx512; "sse2+": sse2 and every level above). Chosen once
// per step, when its program is run or kept (choose, program.cpp): kernels_of names the step's run kernel
// (common.hpp's Kernel: the first below, within its pattern, that its layout lets take its runs) and the
// one after it, pick its run_rows instance (rows_for in word*.cpp -> pick_word), table_of its table of
// units; run_rows (run_rows.hpp) executes that choice. The level is kIsa (common.hpp), read through kSsse3,
// kAvx512 and kAvx512Bytes: no function table per level. _native.kernels() names a program's choice. What justifies each kernel (the measured cases), the
// conditions in full and the gather/scatter bodies written twice: docs/design.rst, "The core's kernels".
//
//   any (table_of)     dense units of output  table_run -> table_lines (streamed.hpp)      avx512f
//                                                       -> table_words (streamed.hpp)      portable+ (below avx512f)
//   UNITS              run_units (program.cpp) -> table_run, a chunk for every part     as table_run
//   CONTIGUOUS         stream_chunks<R>, stream_small_chunks<C,N> (run_rows.hpp; streamed)  avx512f
//                      pixel_rows, permute_rows [DM_NARROW] (plain)                  avx512
//                      short_rows_run, copy_small (run_rows.hpp)                            portable+ (streamed: sse2+)
//                      put_bytes (common.hpp; 64-byte stores: stream_lines)             portable+ (avx512f)
//   FILL               zero_bytes (common.hpp; 64-byte stores: zero_lines)              portable+ (avx512f)
//   GATHER             gather_unit_rows -> gather_units (plain, 1-2 byte words)         avx512
//                      gather_rows_run -> deinterleave_rows/16 (plain, B 2|4, 4|8 B)    sse2+
//                      gathers_chains -> chained_lines (streamed)                       avx512f
//                                        chained_lines_avx2 (streamed, 4-8 byte words)  avx2
//                      gather (streamed.hpp, streamed) -> gathers_lines:
//                          gather_lines (4-16 byte words)                               avx512f
//                          gather_lines_avx2 (4-8 byte words; 1-2 but in padded windows) avx2
//                          gather_narrow_lines (1-2 byte words)                         avx512
//                          else the L1 buffer (put_lines)                               sse2+
//                      gather_rows -> gather_simd: gather3_words, gather4_bytes,        sse2+
//                          gather_unpack; gather3_narrow; the compiler's loops          ssse3+; portable+
//   GATHER_WINDOW      gather_rows_run (plain), gather (streamed runs) as GATHER, and
//                          gather_pixel_lines (32-128 byte pixels)                      avx512f
//                          gather_pixels (16-128 byte pixels)                           sse2, ssse3, avx2
//                      gather_window -> gather_window_part -> gather_rows               portable+
//   SCATTER            interleaved_run -> permute_rows [DM_NARROW] (plain, 1-2 B)    avx512
//                      scatter_rows_run -> interleave_rows<W, B> (run_rows.hpp; plain)      sse2+
//                      scatter_run: scatter_run_lines (streamed, pixels, 1 stream)      avx512f
//                                   scatter_run_of (4-byte pixels: small_scatter)       sse2+
//                                   narrow_scatter_run (plain, 1-2 byte words)          sse2+
//                      scatter (streamed.hpp): transpose4; scatter_direct -> scatter_span  sse2+
//                          (blocks of two 4-byte words 4 bytes past 8: scatter_odd_span)  sse2+
//                          -> interleave16 (streamed, 4|8 B, B 2|4) / scatter2_lines    sse2+ / avx512f
//                          else the L1 buffer (put_joined, Carry)                       sse2+
//                      scatter_rows -> scatter_simd: scatter3_words, scatter_unpack;    sse2+
//                          scatter3_narrow; the compiler's loops                        ssse3+; portable+
//   SCATTER_WINDOW     scatter_rows_run (plain) as SCATTER; scatter_window (run_rows.hpp):
//                          scatter_direct (streamed, 4|8 B, B 2|4), else L1 buffer      sse2+
//                          scatter_window_part -> scatter_rows                          portable+
//   STRIDED            strided_run -> strided_lines (whole lines)                       avx512f
//                      transpose_words4 (tile; 4-byte words, 4 x 4 blocks in registers) sse2+
//                      transposed_run (plain; output rows going on through a run)      portable+
//                      the loops in tile (run_rows.hpp; transposes row by row of output) portable+

#pragma once

#include "common.hpp"

namespace dm {

// The steps of a program (see common.hpp), their output bytes in `total`; false where it is malformed or
// where a step would read outside src's first `src_bytes` or write outside dst's first `dst_bytes` (from
// each array's lowest address).
bool parse(const int64_t* p, int64_t n, Step* steps, int nsteps, int64_t* total, int64_t src_bytes, int64_t dst_bytes);
// Whether a program streams (its steps' nt set): `registers`, only if every step streams from registers.
bool streams(Step* steps, int nsteps, const char* dst, bool registers = false);
// Steps that together fill dense units of output of up to kMergedWords words, a unit under each index of
// their first loop, which they share (BatchToSpace of small images with crops: its windows' rows): made
// one UNITS step, table_run (table_lines or table_words) from a table of the units' offsets. True where it did: steps[0] that step,
// *nsteps 1, *table for free_table once the program has run.
struct Table;
bool merge_units(Step* steps, int* nsteps, Table** table);
void free_table(Table* table);
// A copy of a table at its own size (its words and the slack after them; merge_units' holds kMergedWords,
// 16 KiB), for a program kept (repeat.cpp); null where memory is short. free_compact_table frees it.
Table* compact_table(const Table* table);
void free_compact_table(Table* table);
// The tables of the UNITS steps a program gives (their entries after their loops): false where memory is
// short (then free_given_tables, and no run). free_given_tables frees them once the program has run.
bool given_tables(Step* steps, int nsteps);
void free_given_tables(Step* steps, int nsteps);
// Each step's kernels (kernel, then), its run_rows instance (fn) and its table of units (rows_table), once
// for the program, after parse and streams: `stream` whether the job streams (streams()'s answer), `dst`
// its output's lowest address. `keep`: the program is kept (repeat.cpp), its tables copied for it, which
// free_chosen frees; else they are the calling thread's, good until its next program.
void choose(Step* steps, int nsteps, bool stream, const char* dst, bool keep = false);
void free_chosen(Step* steps, int nsteps);
// The outer mode (Table) of a step's table of units, -1 where it has none.
int table_mode(const Step& st);

struct Job {
    uint64_t generation;  // set by run_job: which job of the pool this is
    const Step* steps;
    int nsteps;
    int64_t total;  // the cost of all steps
    char* src;
    char* dst;
    bool stream;
    int parts;
    int pieces = 1;  // pieces a part is cut into (set by run_job): what an idle thread takes of another's part
};


// Runs a job on up to `threads` threads (the caller's and the pool's), each step's rows shared out.
void run_job(Job& job, int threads);
// Registers the pool's fork handler: once, when the module loads, before any job can hold the pool's
// lock (false where it cannot be registered: then every job runs on the caller's thread alone).
bool init_pool();
// The pool's started worker threads in this process (0 in a new fork).
int pool_workers();

}  // namespace dm

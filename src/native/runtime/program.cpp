// A program read into steps (parse), and whether its stores stream (streams, from the kernels' own
// tests of what they can store whole).

#include "runtime.hpp"
#include "run_rows.hpp"

namespace dm {


// How many output streams a step writes before its pieces go on where they stopped: a loop that
// continues the pieces (its dst stride is a piece) and the loops inside it, the tile's rows included.
// 0 when no loop continues them (each piece's partial lines wait for another step, or never join).
inline int64_t streams_until_joined(const Step& st, int64_t* run = nullptr) {
    int64_t piece, ways = 1;
    if (run) *run = 0;
    switch (st.pattern) {
        case CONTIGUOUS:
        case FILL:
        case GATHER:
        case GATHER_WINDOW: {
            // rows next to each other (in groups of lo for two-level block tiles) write one piece
            const int64_t group = st.pattern == GATHER && st.lo ? st.lo : st.l1.n;
            const bool adjacent = st.l1.n == 1 || st.l1.d == st.l0.n;
            piece = adjacent ? st.l0.n * group : st.l0.n;
            ways = adjacent ? st.l1.n / group : st.l1.n;
            if (st.pattern == CONTIGUOUS && adjacent) {
                if (run) *run = piece;
                return 1;
            }
            break;
        }
        case SCATTER: piece = st.l0.n * st.block; break;
        case SCATTER_WINDOW: piece = st.hi - st.lo; break;  // the positions kept: the output row
        default: return 0;
    }
    for (int k = st.nouter - 1; k >= 0; --k) {
        if (st.outer[k].d == piece) {
            if (run) *run = piece * st.outer[k].n;
            return ways;
        }
        ways *= st.outer[k].n;
    }
    return 0;
}

// The pieces a step writes into dst: `piece` words from word `start`, then every outer loop's and (for
// `rows`) the tile's rows' dst strides apart. False for steps whose stores are scattered (never streamed).
struct Pieces {
    int64_t piece, start;
    bool rows;  // the tile's rows lie l1.d apart (two block loops: hi apart too)
};

inline bool pieces_of(const Step& st, Pieces* out) {
    Pieces p{st.l0.n, st.dst0, true};
    switch (st.pattern) {
        case CONTIGUOUS: case GATHER: break;
        case FILL: if (st.l0.d != 1) return false; break;
        case SCATTER: p.piece = st.l0.n * st.block, p.rows = false; break;
        case GATHER_WINDOW: if (!st.block || st.l0.d != 1) return false; break;
        case SCATTER_WINDOW:
            if (!st.block || st.l0.s != 1) return false;
            p.piece = st.hi - st.lo, p.start += st.lo, p.rows = false;
            break;
        default: return false;
    }
    *out = p;
    return true;
}

// Whether every dst stride between a step's pieces is a multiple of `bytes`: then every piece starts at
// the same place in a `bytes`-long unit as the first.
inline bool strides_divide(const Step& st, const Pieces& p, int64_t bytes) {
    const int64_t w = st.word;
    bool ok = !p.rows || st.l1.n == 1 || st.l1.d * w % bytes == 0;
    for (int k = 0; k < st.nouter; ++k) ok = ok && (st.outer[k].n == 1 || st.outer[k].d * w % bytes == 0);
    if (st.pattern == GATHER && st.lo) ok = ok && st.hi * w % bytes == 0;
    return ok;
}

// Whether every piece a step writes streams whole: starts 4-byte aligned and 4-byte multiples, which
// put_bytes streams without a plain store (its head and tail as 4-byte streaming stores), and at
// least a line long, or rows copied whole that the same thread soon goes on from. Scattered stores
// never stream.
inline bool streams_whole(const Step& st, const char* dst) {
    const int64_t w = st.word;
    // least in bytes: from a line, streaming pays (uint8 S2D with 128-byte rows: 6.4 ms plain, 4.9 ms
    // streamed for 128 MiB), below it a tile's pieces are a pixel's few channels
    const int64_t least = 64;
    const bool tabled = table_of(st, nullptr);  // (table_lines, strided_lines: a run's output is one piece)
    if (st.pattern == STRIDED || tabled) return (tabled || strided_fits(st)) && reinterpret_cast<uintptr_t>(dst + st.dst0 * w) % 4 == 0;
    Pieces p;
    if (!pieces_of(st, &p)) return false;
    if (p.piece * w < least) {  // short rows stream when the same thread soon writes on where they stop
        // (rows copied whole, and 4-byte pixels that scatter_run transposes in registers and streams 16
        // bytes at a time, on 16 bytes; other block tiles' short pieces cost more in the L1 buffer than
        // streaming saves: D2S depth_first NHWC with 16 channels, 32-byte pieces through it, 1.4x plain,
        // 3.0x streamed; in registers, 0.7x streamed)
        const bool on16 = reinterpret_cast<uintptr_t>(dst + p.start * w) % 16 == 0 && strides_divide(st, p, 16);
        if (st.pattern != CONTIGUOUS && !(small_scatter(st) && on16)) return false;
        int64_t run = 0;
        const int64_t ways = streams_until_joined(st, &run);
        if (ways < 1 || ways > kJoinedStreams || run * w < least) return false;
    }
    // A gather tile's rows that do not start on a line leave a partial line at both ends of every piece,
    // completed only after the tile's other rows are written: streamed, SpaceToDepth into NumPy's own
    // out= (16 bytes into a line) took 1.1-1.6x the copy floor, stored plainly 0.87-0.93x (on a line,
    // streamed, 0.70x). Runs of tiles whose rows go on from each other stream as one (see gather).
    if (st.pattern == GATHER && !gathers_runs(st) && !(chained_rows(st) && reinterpret_cast<uintptr_t>(dst + p.start * w) % 4 == 0) &&
        (reinterpret_cast<uintptr_t>(dst + p.start * w) % kLine != 0 || !strides_divide(st, p, kLine)))
        return false;
    if (st.pattern == GATHER) return true;  // put_lines: the partial lines at a piece's ends are stored plainly
    // Scatter rows of 4- or 8-byte words in blocks of 2 or 4, under 256 bytes and not all on 16 bytes,
    // are stored plainly, a run of rows at a time (scatter_rows_run): streamed, each took a few 4-byte
    // streaming stores at its ends and the tile-by-tile set-up. (Pixels of a few channels stream as
    // above: scatter_run either way.) BatchToSpace with crops of 1 on small images, float32, 56-66 MiB
    // into out=, streamed -> plain: 16 x 16 (120-byte rows) 1.63x -> 0.91x the copy floor, 24 x 24 (184
    // bytes) 1.24x -> 0.93x, 32 x 32 (248 bytes) 0.96x -> 0.86x; 64 x 64 (504 bytes) stays streamed
    // (0.73x; plain 0.90x), as do rows all on 16 bytes (float64 16 x 16, 240 bytes: 0.80x; plain 1.10x).
    const bool run_loop = runs_plainly(st);  // (what the plain run loops take, and so store without the set-up)
    if (run_loop && (st.pattern == SCATTER_WINDOW || st.pattern == SCATTER) && p.piece * w < 256 &&
        (reinterpret_cast<uintptr_t>(dst + p.start * w) % 16 != 0 || !strides_divide(st, p, 16)))
        return false;
    // So are gather windows' rows under 256 bytes (gather_rows_run): SpaceToBatch with pads of 1 on 30 x 46
    // images (96-byte rows in 4 planes a block row), 96 MiB, 2.00x and 2.44x streamed, 0.98x and 1.00x
    // plain; 62 x 126 (256 bytes) streams, 0.93x (plain 0.87x). (Byte windows, as SpaceToBatch uint8 with
    // a 4 x 4 block, stream as before: on a line, 0.87x streamed against 1.2x plain.)
    if (run_loop && st.pattern == GATHER_WINDOW && p.piece * w < 256) return false;
    return p.piece * w % 4 == 0 && reinterpret_cast<uintptr_t>(dst + p.start * w) % 4 == 0 && strides_divide(st, p, 4);
}

// The partial lines at the ends of a step's pieces that are not joined soon (by the same thread within
// a few other streams): a streamed partial line whose rest comes much later leaves the write-combining
// buffer half full and costs a partial write to memory. Exact when every piece starts at the same place
// in a line; else two a piece.
inline double lone_partial_lines(const Step& st, const char* dst) {
    if (table_of(st, nullptr)) return 0;  // (table_lines: a run's output is one piece)
    const int64_t joined = streams_until_joined(st);
    Pieces p;
    if ((joined >= 1 && joined <= kJoinedStreams) || !pieces_of(st, &p)) return 0;
    if (gathers_runs(st)) return 0;  // (see gather)
    int per_piece = 2;
    if (strides_divide(st, p, kLine)) {
        const uintptr_t at = reinterpret_cast<uintptr_t>(dst + p.start * st.word);
        per_piece = (at % kLine != 0) + ((at + p.piece * st.word) % kLine != 0);
    }
    return (double)st.rows * (p.rows ? st.l1.n : 1) * per_piece;
}

// A program streams when every step's pieces stream whole and few of the lines it writes are partial
// lines left alone. Many streams of short pieces off the line (SpaceToBatch uint8 with a 4 x 4 block
// writes 16 streams of 64 bytes; 5-D SpaceToDepth depth_first with block 3, 9 streams of 64 bytes),
// at NumPy's usual 16-byte offset into a line, were 2.3-2.5x the copy floor streamed, 1.1-1.2x plain;
// their lines whole (the output on a line) 0.74-0.87x streamed.
//
// Steps whose pieces cannot stream whole (a pixel's few channels at the edges of pads, scattered
// stores) are written with plain stores, and allowed when they are at most 1/32 of the lines: then
// the lines written both ways are few. (Steps like that making up the bulk of a program cost more
// streamed than plain: D2S depth_first with 16 channels, 16 MiB: 0.71 ms plain, 2.54 ms streamed;
// TensorFlow's NHWC space_to_batch_nd with pads, 4 channels, 64 MiB: 2.9 ms plain, 5.4 streamed.)
// Whether a step streams straight from registers, no L1 buffer in between: copies and fills, scatters of
// 4- and 8-byte words in blocks of 2 or 4 (scatter_direct), gathers that gather_lines or
// gather_narrow_lines take. Scatters of 16-byte words (pixels of 4 float32 channels) in blocks of 2 or 4
// stream as well, from registers in blocks of 2 where the CPU has AVX2 (scatter_pixel_span), else through
// the L1 buffer (channels-last BatchToSpace, 64 MiB, same process, in turns, all through the buffer:
// 1.05-1.12x plain -> 0.75-1.00x streamed).
inline bool from_registers(const Step& st) {
    if (st.pattern == CONTIGUOUS || st.pattern == FILL || table_of(st, nullptr)) return true;  // (table_lines)
    if (kIsa < IsaAvx512f && runs_of_windows(st) && st.word >= 16) return true;  // (gather_pixels)
    if (st.pattern == SCATTER || st.pattern == SCATTER_WINDOW) return (st.word == 4 || st.word == 8 || st.word == 16) && (st.block == 2 || st.block == 4);
    if (st.pattern == GATHER && chained_rows(st)) return true;  // (chained_lines, chained_lines_avx2)
#if DM_HAVE_AVX512
    if (st.pattern == STRIDED) return strided_fits(st);  // (strided_lines)
#endif
#if DM_HAVE_STREAM
    // (gather windows go through gather too, their padding as zeros in the loads; gather_lines, or
    // gather_lines_avx2 below AVX-512)
    if (st.pattern == GATHER || runs_of_windows(st))
        return lines_fit(st.word, st.block, st.pattern == GATHER ? st.at : Rows<4>(st.l1.d).at, st.l0.n,
                         side_joined(st) ? st.outer[st.nouter - 1] : Loop{1, 0, 0},
                         st.pattern != GATHER && padded_window(st.lo, st.hi, st.l0.n, st.block));
#endif
    return false;
}

// With `registers` (outputs under the last-level cache's size), the steps that do not stream from
// registers (a crop's edge pixels, as strided steps) may hold at most 1 / kStagedShare of the lines; before,
// one such step kept a whole program plain. Channels-last BatchToSpace with crops, 64 MiB, same process,
// in turns (with the 16-byte scatters above): 4 float32 channels 1.06x -> 0.75x, 5-D 1.11-1.18x ->
// 0.94-1.00x, 2 channels 1.39x -> 1.17x, uint8 16 channels 1.00x -> 0.82x; the suite's and survey's other
// programs keep their choice.
constexpr double kStagedShare = 8;

// Staged steps that stream as well as register ones: scatters whose output rows are at least
// kStagedRowBytes (a row is whole in the L1 buffer before it streams), and gather windows of pixels of
// 32 bytes and more with rows of kStagedWindowBytes. 100 random programs of 32-128 MiB kept plain by the
// share, uint8 to float64, same process, in turns, plain -> streamed: scatters with rows of 240-3048
// bytes 0.95-1.50x -> 0.59-1.38x the copy floor (32 of 35 faster by more than 0.05, none slower), 192
// bytes and under 1.01-2.27x -> 1.13-3.64x (24 of 26 slower); such windows with rows of 4-11 KiB
// 0.98-1.32x -> 0.96-1.15x (5 of 7 faster, 1 slower), under 4 KiB mixed; narrow gathers and windows
// 0.99-1.56x -> 0.93-2.00x (15 of 21 slower), and stay staged. 30 more random programs with such
// scatters and windows, plain -> streamed: 27 faster by more than 0.05, 1 slower (1.32x -> 1.43x). The
// suite's NCHW DepthToSpace depth_first with block 3, 128 MiB: 1.04-1.11x -> 0.66-0.80x.
constexpr int64_t kStagedRowBytes = 240, kStagedWindowBytes = 4096;

inline bool stages_whole_rows(const Step& st) {
    Pieces p;
    if (!pieces_of(st, &p)) return false;
    const int64_t bytes = p.piece * st.word;
    if (st.pattern == SCATTER || st.pattern == SCATTER_WINDOW) return bytes >= kStagedRowBytes;
    return st.pattern == GATHER_WINDOW && st.word >= 32 && bytes >= kStagedWindowBytes;
}

bool streams(Step* steps, int nsteps, const char* dst, bool registers) {
    double lone = 0, rough = 0, lines = 0, staged = 0;
    for (int s = 0; s < nsteps; ++s) steps[s].nt = false;
    for (int s = 0; s < nsteps; ++s) {
        Step& st = steps[s];
        if (!st.rows || !st.l1.n || !st.l0.n) continue;
        const double step_lines = (double)st.rows * st.row_cost / kLine;
        lines += step_lines;
        if (registers && !from_registers(st) && !stages_whole_rows(st)) staged += step_lines;
        st.nt = streams_whole(st, dst);
        if (st.nt) {
            lone += lone_partial_lines(st, dst);
        } else {
            rough += step_lines;
        }
    }
    return lines > 0 && rough * 32 <= lines && lone * 2 <= lines && staged * kStagedShare <= lines;
}

// ------------------------------------------------------------------ steps merged into units

bool merge_units(Step* steps, int* nsteps, Table** table) {
    *table = nullptr;
    const int count = *nsteps;
    if (count < 2) return false;
    for (int s = 0; s < count; ++s)
        if (steps[s].pattern == UNITS) return false;  // (given with their tables)
    const Step& first = steps[0];
    const int64_t W = first.word;
    if ((W != 4 && W != 8) || first.nouter < 1) return false;
    const Loop on = first.outer[0];
    const int64_t unit = on.d, L = kLine / W;
    if (unit < 1 || unit > kMergedWords || on.n < 2) return false;
    int64_t positions = 0;  // the words the steps' tiles visit under one index of the loop (windows: kept or not)
    for (int s = 0; s < count; ++s) {
        const Step& st = steps[s];
        // (rows of 256 bytes and more keep their own kernels)
        if (st.word != W || st.nouter < 1 || st.outer[0].n != on.n || st.outer[0].s != on.s || st.outer[0].d != on.d ||
            st.l0.n * st.word * (st.pattern == SCATTER_WINDOW ? st.l1.n : 1) >= 256)
            return false;
        const int64_t rows = st.rows / on.n, per_row = st.l1.n * st.l0.n;
        if (rows > 4 * unit || per_row > 4 * unit || (positions += rows * per_row) > 4 * unit)
            return false;  // (not a unit's words: no need to visit them)
    }
    const int64_t units = (L + unit - 1) / unit + 1;  // (the units a table's words reach into)
    OwnTable* t = new (std::nothrow) OwnTable;
    if (t == nullptr) return false;
    int64_t lowest = INT64_MAX, filled = 0;
    for (int s = 0; s < count; ++s)
        each_word(steps[s], 1, [&](int64_t out, int64_t) { lowest = std::min(lowest, steps[s].dst0 + out); return true; });
    std::fill(t->at, t->at + unit, INT32_MIN);
    const int64_t in_base = first.src0;
    bool dense = true;
    for (int s = 0; s < count && dense; ++s)
        dense = each_word(steps[s], 1, [&](int64_t out, int64_t in) {
            out += steps[s].dst0 - lowest, in += steps[s].src0 - in_base;
            if (out < 0 || out >= unit || t->at[out] != INT32_MIN || std::abs(in) + (units - 1) * std::abs(on.s) >= kTableReach) return false;
            t->at[out] = (int32_t)in;
            ++filled;
            return true;
        });
    if (!dense || filled != unit) {
        delete t;
        return false;
    }
    extend_table(t, unit, on.s, L);
    t->outer = 4, t->around = 0, t->per = 1;
    Step merged = first;
    merged.pattern = UNITS, merged.block = 0, merged.lo = merged.hi = 0;
    merged.src0 = in_base, merged.dst0 = lowest;
    merged.nouter = 1, merged.l1 = merged.l0 = Loop{1, 0, 0};
    merged.rows = on.n, merged.row_cost = unit * W, merged.table = t;
    steps[0] = merged;
    *nsteps = 1;
    *table = t;
    return true;
}

void free_table(Table* table) { delete static_cast<OwnTable*>(table); }  // (merge_units': an OwnTable)

Table* compact_table(const Table* table) {
    Table* t = new (std::nothrow) Table(*table);
    int32_t* words = t ? new (std::nothrow) int32_t[table->words + kTableSlack] : nullptr;
    if (words == nullptr) return delete t, nullptr;
    std::copy(table->at, table->at + table->words + kTableSlack, words);
    t->at = words;
    return t;
}

void free_compact_table(Table* table) {
    delete[] table->at;
    delete table;
}

bool given_tables(Step* steps, int nsteps) {
    bool ok = true;
    for (int s = 0; s < nsteps; ++s) {
        Step& st = steps[s];
        if (!st.given) continue;
        const int64_t unit = st.outer[0].d;
        const int64_t L = kLine / st.word, span = unit + L + kTableSlack;  // (a part's words and what it reads on)
        Table* t = ok ? new (std::nothrow) Table[st.parts]() : nullptr;
        int32_t* words = t ? new (std::nothrow) int32_t[st.parts * span] : nullptr;
        if (t && !words) delete[] t, t = nullptr;
        ok = t != nullptr;
        if (!ok) continue;
        for (int64_t part = 0; part < st.parts; ++part) {
            Table& tp = t[part];
            tp.at = words + part * span;
            for (int64_t k = 0; k < unit; ++k) tp.at[k] = (int32_t)st.given[part * unit + k];
            extend_table(&tp, unit, st.outer[0].s, L);
            tp.outer = 4, tp.around = 0, tp.per = 1;
            int64_t lines = 0, runs = 0;  // (the lines from the unit's start: a unit's lines, where it has whole ones)
            for (int64_t r = 0; r + L <= std::max(unit, L); r += L, ++lines) {
                bool run = tp.at[r] != kZeroWord;
                for (int64_t k = 1; k < L && run; ++k) run = tp.at[r + k] == tp.at[r] + k;
                runs += run;
            }
            tp.runs = 2 * runs > lines;
        }
        st.table = t;
    }
    return ok;
}

void free_given_tables(Step* steps, int nsteps) {
    for (int s = 0; s < nsteps; ++s)
        if (steps[s].given && steps[s].table) {  // its parts' words in one buffer, the first part's at its start
            delete[] steps[s].table[0].at;
            delete[] steps[s].table, steps[s].table = nullptr;
        }
}

// Rows [r0, r1) of a UNITS step: as many units of each part's table, a chunk of rows at a time for all the
// parts, so that every part after the first reads the chunk's input from the cache (SpaceToBatch: a few
// images, then each block offset's units of them). A chunk reads about kUnitsChunkBytes, and writes a
// whole number of lines a part where its units allow (its end, in the part's stream, a line's end where
// the part starts on one). SpaceToBatch of 6 x 6 to 26 x 26 images with pads, 47 MiB, a part at a time
// over all the rows: 0.69-1.55x the copy floor; in chunks reading 256 KiB, 0.65-0.83x (same process,
// in turns; by the windows before, 1.4-3.3x).
template <typename T, bool NT>
void run_units(const Step& st, char* src, char* dst, int64_t r0, int64_t r1) {
    const Loop& on = st.outer[0];
    const T* from = reinterpret_cast<const T*>(src);
    T* to = reinterpret_cast<T*>(dst);
    if (st.parts == 1) return table_run<T, NT>(from, to, st.src0 + r0 * on.s, st.dst0 + r0 * on.d, *st.table, r1 - r0);
    const int64_t bytes = on.d * (int64_t)sizeof(T), lines = kLine / std::gcd(bytes, kLine);  // (rows making whole lines)
    const int64_t reads = std::max<int64_t>(1, std::abs(on.s) * (int64_t)sizeof(T));  // (a row's input, about)
    const int64_t chunk = (std::max<int64_t>(1, kUnitsChunkBytes / reads) + lines - 1) / lines * lines;
    for (int64_t r = r0; r < r1; r += chunk) {
        const int64_t count = std::min(chunk, r1 - r);
        for (int64_t part = 0; part < st.parts; ++part)
            table_run<T, NT>(from, to, st.src0 + r * on.s, st.dst0 + part * st.part_d + r * on.d, st.table[part], count);
    }
}

// A step's kernels (Kernel, common.hpp), plain or streamed (`nt`): the first of run_rows' kernels, in the
// order below, that the step's layout lets take its runs, and the one its runs go to where that cannot.
// Each kernel's own tests of a run (its length, its output's alignment) stay with it.
inline void kernels_of(const Step& st, bool nt, uint8_t* kernel, uint8_t* then) {
    *then = K_TILES;
    const int P = st.pattern;
    const bool gathers = P == GATHER || runs_of_windows(st);  // (what gather() takes a run of)
    if (P == UNITS) {
        *kernel = K_UNITS;
    } else if (nt && gathers && side_joined(st)) {
        *kernel = K_SIDE_LINES;  // (whole runs of the side loops; a thread's part of one as below)
        if (P == GATHER && chained_rows(st)) *then = K_CHAINED_LINES;
    } else if (!nt && runs_plainly(st)) {
        *kernel = K_ROWS_SIMD;
    } else if (P == STRIDED && strided_fits(st)) {
        *kernel = K_STRIDED_LINES;
    } else if (!nt && transposes_runs(st) && !transposes_words4(st)) {  // (those: tile by tile, in registers)
        *kernel = K_TRANSPOSED_RUNS;
    } else if (nt && P == GATHER && chained_rows(st)) {
        *kernel = K_CHAINED_LINES;
    } else if (nt && gathers && rows_go_on(st)) {
        *kernel = K_JOINED_LINES;
    } else if (P == CONTIGUOUS) {
        *kernel = K_CONTIGUOUS_RUNS;
    } else {
        *kernel = K_TILES;
#if DM_HAVE_AVX512
        // GATHER tiles of narrow words that make units of output with the side rows around them
        Units units;
        if (!nt && units_of(st, &units)) *kernel = K_UNIT_ROWS;
#endif
    }
    if (P != SCATTER || *kernel != K_TILES) return;
    // scatter_run's steps: pixels of 4-byte words (small_scatter), or narrow words stored plainly
    const bool runs = DM_HAVE_STREAM && st.l0.s == 1 && st.l0.d == st.block &&
                      (st.block == 3 ? st.word <= 2 && st.l0.n <= 8 && !nt : st.word <= 2 ? !nt : st.word == 4 && small_scatter(st));
#if DM_HAVE_AVX512
    // SCATTER tiles of narrow words, at most 32 bytes a tile, going on in dst: permute_rows (run_rows' I)
    if (st.word <= 2 && !nt && st.l0.s == 1 && st.l0.d == st.block && st.nouter >= 1 &&
        st.outer[st.nouter - 1].d == st.l0.n * st.block && st.l0.n * st.block * st.word <= 32 && kAvx512Bytes) {
        *kernel = K_PERMUTE_ROWS;
        *then = runs ? K_SCATTER_RUNS : K_TILES;
        return;
    }
#endif
    if (runs) *kernel = K_SCATTER_RUNS;
}

// The run_rows instance of a step's word, pattern and block, plain or streamed, and its kernel's (the
// permutes': instances of their own).
RowsFn pick(const Step& st, bool stream) {
    if (st.pattern == UNITS)
        return st.word == 4 ? (stream ? run_units<uint32_t, true> : run_units<uint32_t, false>)
                            : (stream ? run_units<uint64_t, true> : run_units<uint64_t, false>);
    const bool interleaved = st.kernel == K_PERMUTE_ROWS || st.kernel == K_UNIT_ROWS;
    switch (st.word) {
        case 1: return rows_for<uint8_t>(st.pattern, st.block, stream, interleaved);
        case 2: return rows_for<uint16_t>(st.pattern, st.block, stream, interleaved);
        case 4: return rows_for<uint32_t>(st.pattern, st.block, stream, false);
        case 8: return rows_for<uint64_t>(st.pattern, st.block, stream, false);
        case 16: return rows_for<W16>(st.pattern, st.block, stream, false);
        case 32: return rows_for<W32>(st.pattern, st.block, stream, false);  // gather windows only (parse)
        case 64: return rows_for<W64>(st.pattern, st.block, stream, false);
        default: return rows_for<W128>(st.pattern, st.block, stream, false);
    }
}

void choose(Step* steps, int nsteps, bool stream, const char* dst, bool keep) {
    for (int s = 0; s < nsteps; ++s) {
        Step& st = steps[s];
        const bool nt = stream && st.nt;
        st.rows_table = nullptr;
        if (st.pattern != UNITS && (!st.rows || !st.l1.n || !st.l0.n)) {  // it moves nothing: no kernel to choose
            st.kernel = st.then = K_TILES;  // (and a loop of none would divide by zero in table_of, as in streams)
            st.fn = pick(st, nt);
            continue;
        }
        kernels_of(st, nt, &st.kernel, &st.then);
        st.fn = pick(st, nt);
        const int P = st.pattern;
        // (streamed, table_lines stores on 4 bytes; below avx512f, where a table goes word by word, tiles that
        // transpose 4-byte words go by blocks in registers)
        if ((P == STRIDED || P == GATHER || P == SCATTER || P == CONTIGUOUS) && (!nt || reinterpret_cast<uintptr_t>(dst) % 4 == 0) &&
            !(kIsa < IsaAvx512f && transposes_words4(st))) {
            // (kept: a copy at its own size, freed with the program; else the thread's own for the step)
            Table* t = thread_table(keep ? 0 : 1 + s);
            if (t && table_of(st, t, nt)) st.rows_table = keep ? compact_table(t) : t;  // (null: no memory, no table)
        }
    }
}

int table_mode(const Step& st) { return st.rows_table ? st.rows_table->outer : -1; }

void free_chosen(Step* steps, int nsteps) {
    for (int s = 0; s < nsteps; ++s) {
        Table* t = const_cast<Table*>(steps[s].rows_table);
        if (t != nullptr) free_compact_table(t);
        steps[s].rows_table = nullptr;
    }
}

// ------------------------------------------------------------------ parse, and the bounds of a step

// Checked arithmetic (MSVC has no __builtin_*_overflow): false where the result would leave int64.
inline bool checked_add(int64_t a, int64_t b, int64_t* r) {
    if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b)) return false;
    *r = a + b;
    return true;
}

inline bool checked_mul(int64_t a, int64_t b, int64_t* r) {
    if (a == 0 || b == 0) return *r = 0, true;
    if (a == INT64_MIN || b == INT64_MIN || (a < 0 ? -a : a) > INT64_MAX / (b < 0 ? -b : b)) return false;
    *r = a * b;
    return true;
}

// The words a step reaches on one side of the copy, lo to hi inclusive, from the array's lowest address.
struct Span {
    int64_t lo, hi;
    bool ok = true;
    explicit Span(int64_t start) : lo(start), hi(start) {}
    // offsets a..b (a <= b) added to every word reached so far
    void add(int64_t a, int64_t b) { ok = ok && checked_add(lo, a, &lo) && checked_add(hi, b, &hi); }
    // every index 0 <= i < n (n >= 1) of a loop of this stride
    void loop(int64_t n, int64_t stride) {
        int64_t far = 0;
        ok = ok && checked_mul(n - 1, stride, &far);
        if (ok) add(std::min<int64_t>(far, 0), std::max<int64_t>(far, 0));
    }
    // inside an array of `bytes` bytes, in words of `word` bytes: 0 <= lo, (hi + 1) * word <= bytes
    bool inside(int64_t bytes, int64_t word) const { return ok && lo >= 0 && hi < bytes / word; }
};

// Whether every word a parsed step reads lies inside src's `src_bytes` and every one it writes inside
// dst's `dst_bytes` (from each array's lowest address), by what its kernels read and write, which parse
// has made the same as its loops say (a block tile's rows, a window's kept positions, a unit's table).
bool step_inside(const Step& st, int64_t src_bytes, int64_t dst_bytes) {
    if (st.rows == 0 || st.l1.n == 0 || st.l0.n == 0) return true;  // it moves nothing
    Span in(st.src0), out(st.dst0);
    bool reads = st.pattern != FILL, writes = true;
    if (st.pattern == UNITS) {  // rows of `parts` units of `unit` words, each word from its table or zero
        const Loop on = st.outer[0];
        const int64_t unit = on.d;
        in.loop(st.rows, on.s), out.loop(st.rows, on.d), out.loop(st.parts, st.part_d), out.add(0, unit - 1);
        int64_t least = INT64_MAX, most = INT64_MIN;
        for (int64_t k = 0; k < st.parts * unit; ++k)
            if (st.given[k] != kZeroWord) least = std::min(least, st.given[k]), most = std::max(most, st.given[k]);
        reads = least <= most;
        if (reads) in.add(least, most);
        return (!reads || in.inside(src_bytes, st.word)) && out.inside(dst_bytes, st.word);
    }
    for (int k = 0; k < st.nouter; ++k) in.loop(st.outer[k].n, st.outer[k].s), out.loop(st.outer[k].n, st.outer[k].d);
    const int64_t B = st.block;
    switch (st.pattern) {
        case GATHER:   // B output rows (at st.at) from one input run of l0.n * B words
        case SCATTER:  // the mirror image
        {
            Span& rows = st.pattern == GATHER ? out : in;
            Span& run = st.pattern == GATHER ? in : out;
            const int64_t least = *std::min_element(st.at, st.at + B), most = *std::max_element(st.at, st.at + B);
            rows.add(least, most), rows.loop(st.l0.n, 1);
            run.loop(st.l0.n * B, 1);
            break;
        }
        case GATHER_WINDOW:   // positions t = i * size + j: src + t for lo <= t < hi, dst at j * l1.d + i * l0.d
        case SCATTER_WINDOW:  // dst + t for lo <= t < hi, src at j * l1.s + i * l0.s
        {
            const int64_t size = st.l1.n;
            int64_t positions = 0;
            if (!checked_mul(st.l0.n, size, &positions)) return false;
            const int64_t t0 = std::max<int64_t>(st.lo, 0), t1 = std::min(st.hi, positions);
            Span& space = st.pattern == GATHER_WINDOW ? in : out;
            Span& other = st.pattern == GATHER_WINDOW ? out : in;
            const Loop l1 = st.l1, l0 = st.l0;
            const int64_t s1 = st.pattern == GATHER_WINDOW ? l1.d : l1.s, s0 = st.pattern == GATHER_WINDOW ? l0.d : l0.s;
            if (t0 >= t1) {  // no position kept: a gather window writes zeros only, a scatter one nothing
                if (st.pattern == SCATTER_WINDOW) return true;
                reads = false;
                other.loop(size, s1), other.loop(l0.n, s0);
                break;
            }
            space.add(t0, t1 - 1);
            if (st.pattern == GATHER_WINDOW) {  // every position written, zeros where not kept
                other.loop(size, s1), other.loop(l0.n, s0);
            } else {  // the blocks that hold kept positions, and in one block only its kept offsets
                const int64_t i0 = t0 / size, i1 = (t1 - 1) / size;
                const int64_t j0 = i0 == i1 ? t0 % size : 0, j1 = i0 == i1 ? (t1 - 1) % size : size - 1;
                int64_t a = 0, b = 0;
                other.ok = other.ok && checked_mul(i0, s0, &a) && checked_mul(j0, s1, &b) && checked_add(a, b, &a);
                other.add(a, a), other.loop(i1 - i0 + 1, s0), other.loop(j1 - j0 + 1, s1);
            }
            break;
        }
        default:  // CONTIGUOUS, STRIDED, FILL: the loops as they are
            in.loop(st.l1.n, st.l1.s), in.loop(st.l0.n, st.l0.s);
            out.loop(st.l1.n, st.l1.d), out.loop(st.l0.n, st.l0.d);
    }
    return (!reads || in.inside(src_bytes, st.word)) && (!writes || out.inside(dst_bytes, st.word));
}

// The shapes of loops 1 and 0 that a pattern's kernels assume (they read the block's and the words'
// strides from the pattern, not from the loops), so that what step_inside checks is what they do.
inline bool tile_as_its_kernels_take_it(const Step& st) {
    const Loop l1 = st.l1, l0 = st.l0;
    const int64_t B = st.block;
    // a loop's strides, where it has more than one index (a loop of one index may have any)
    const auto src_stride = [](const Loop& l, int64_t s) { return l.n <= 1 || l.s == s; };
    const auto dst_stride = [](const Loop& l, int64_t d) { return l.n <= 1 || l.d == d; };
    switch (st.pattern) {
        case CONTIGUOUS: return src_stride(l0, 1) && dst_stride(l0, 1);
        case GATHER: return l1.n == B && src_stride(l1, 1) && src_stride(l0, B) && dst_stride(l0, 1);
        case SCATTER: return l1.n == B && dst_stride(l1, 1) && src_stride(l0, 1) && dst_stride(l0, B);
        case GATHER_WINDOW:
        case SCATTER_WINDOW:
            // (block 0: any size, l1.n; 2, 3 and 4: their own kernels)
            if (B != 0 && (B < 2 || l1.n != B)) return false;
            return st.pattern == GATHER_WINDOW ? src_stride(l1, 1) && src_stride(l0, l1.n) : dst_stride(l1, 1) && dst_stride(l0, l1.n);
        default: return true;
    }
}

// Starts, strides, counts and window bounds beyond this many words are refused: no array is that large,
// and the products parse and the kernels form from them stay well inside int64.
constexpr int64_t kFarWords = int64_t(1) << 60;

inline bool near(int64_t v) { return v > -kFarWords && v < kFarWords; }

bool parse(const int64_t* p, int64_t n, Step* steps, int nsteps, int64_t* total, int64_t src_bytes, int64_t dst_bytes) {
    int64_t at = 1;
    int64_t cost = 0;
    for (int s = 0; s < nsteps; ++s) {
        if (at + 8 > n) return false;
        Step& st = steps[s];
        const int64_t pattern = p[at], word = p[at + 1], block = p[at + 2];
        if (pattern < 0 || pattern > UNITS || block < 0 || block > 4) return false;
        if (!step_word(word, pattern)) return false;
        st.pattern = (int)pattern;
        st.word = (int)word;
        st.block = (int)block;
        st.lo = p[at + 3];
        st.hi = p[at + 4];
        st.src0 = p[at + 5];
        st.dst0 = p[at + 6];
        const int64_t nloops = p[at + 7];
        at += 8;
        if (nloops < 2 || nloops > kMaxLoops || at + 3 * nloops > n) return false;
        if (!near(st.lo) || !near(st.hi) || !near(st.src0) || !near(st.dst0)) return false;
        if ((st.pattern == GATHER || st.pattern == SCATTER) &&
            (st.block < 2 || st.lo < 0 || (st.lo && st.block % st.lo))) return false;
        const Loop* loops = reinterpret_cast<const Loop*>(p + at);
        at += 3 * nloops;
        for (int64_t k = 0; k < nloops; ++k)
            if (loops[k].n < 0 || loops[k].n >= kFarWords || !near(loops[k].s) || !near(loops[k].d)) return false;
        st.nouter = (int)nloops - 2;
        st.outer = loops;
        st.l1 = loops[nloops - 2];
        st.l0 = loops[nloops - 1];
        st.rows = 1;
        for (int k = 0; k < st.nouter; ++k)
            if (!checked_mul(st.rows, loops[k].n, &st.rows)) return false;
        int64_t words = 0;
        if (!checked_mul(st.l1.n, st.l0.n, &words) || !checked_mul(words, st.word, &st.row_cost)) return false;
        st.row_cost = std::max<int64_t>(1, st.row_cost);
        st.first = st.last = 0;
        st.nt = false;
        st.table = nullptr;
        st.rows_table = nullptr;
        st.kernel = st.then = K_TILES;
        st.fn = nullptr;
        st.given = nullptr;
        st.reads_on = false;
        st.scratch = nullptr;
        st.carry = nullptr;
        st.perm = nullptr;
        st.parts = 1, st.part_d = 0;
        int64_t step_cost = 0;
        if (st.pattern == UNITS) {  // [count, s, unit] [parts, 0, part_d] [unit, 0, 1], then each part's table
            const Loop on = loops[0], parts = loops[1];
            const int64_t unit = st.l0.n;
            constexpr int64_t kFar = kTableReach;
            if (!unit_item(st.word) || nloops != 3 || unit < 1 || unit > kUnitsWords || st.l0.s != 0 || st.l0.d != 1 ||
                on.d != unit || on.n < 0 || on.s <= -kFar || on.s >= kFar || parts.n < 1 || parts.n > kMaxParts || parts.s != 0 ||
                parts.n * unit > kUnitsEntries || at + parts.n * unit > n)
                return false;
            const int64_t reach = (kLine / st.word + unit - 1) / unit * std::abs(on.s);  // (extend_table's)
            for (int64_t k = 0; k < parts.n * unit; ++k) {
                const int64_t v = p[at + k];
                if (v != kZeroWord && (v <= -kFar || v >= kFar || std::abs(v) + reach >= kFar)) return false;
            }
            st.given = p + at;
            at += parts.n * unit;
            st.nouter = 1, st.rows = on.n, st.row_cost = parts.n * unit * st.word;
            st.parts = parts.n, st.part_d = parts.d;
            st.l1 = st.l0 = Loop{1, 0, 0};
            if (!step_inside(st, src_bytes, dst_bytes) || !checked_mul(st.rows, st.row_cost, &step_cost) ||
                !checked_add(cost, step_cost, &cost))
                return false;
            continue;
        }
        if (!tile_as_its_kernels_take_it(st)) return false;
        for (int k = 0; k < st.nouter && st.pattern == SCATTER_WINDOW && st.l0.s == 1 && st.l0.n * st.word >= 1024; ++k)
            st.reads_on |= loops[k].s == st.l0.n;
        const bool tile = st.pattern == GATHER || st.pattern == SCATTER;  // the block tiles' row offsets
        const Rows<4> rows(tile ? (st.pattern == GATHER ? st.l1.d : st.l1.s) : 0, tile ? st.lo : 0, st.hi);
        std::copy(rows.at, rows.at + 4, st.at);
        if (st.pattern == GATHER_WINDOW || st.pattern == SCATTER_WINDOW) {
            const int64_t size = st.block ? st.block : st.l1.n;
            if (size < 1) return false;
            inside_blocks(size, st.l0.n, st.lo, st.hi, &st.first, &st.last);
        }
        if (!step_inside(st, src_bytes, dst_bytes) || !checked_mul(st.rows, st.row_cost, &step_cost) ||
            !checked_add(cost, step_cost, &cost))
            return false;
    }
    *total = cost;
    return at == n;
}

}  // namespace dm

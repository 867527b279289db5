// Streamed gathers and scatters: chunks through the L1 buffer, AVX-512's whole-line kernels (gather_lines,
// chained_lines, strided_lines, table_lines, scatter2_lines) and AVX2's (gather_lines_avx2).

#pragma once

#include "tile_simd.hpp"

namespace dm {

// The first chunk of a streamed row, in positions of `per` words (of `word` bytes) from `start`: cut
// so that the chunks after it start on a line, and no line is split between two chunks' stores.
inline int64_t first_chunk(const void* start, int64_t word, int64_t per, int64_t chunk, int64_t n) {
    if (n <= chunk) return chunk;
    const int64_t line = kLine / word;  // words per line
    const int64_t lead = (int64_t)(reinterpret_cast<uintptr_t>(start) & (kLine - 1)) / word;
    for (int64_t k = chunk; k > 0 && k > chunk - line; --k)
        if ((lead + k * per) % line == 0) return k;
    return chunk;
}

// A streamed tile's L1 chunk buffer starts on a page. Anywhere else (as on the stack, where it was
// once), its stores could match the tile's own spilled locals in the low 12 bits (a load then waits for
// the store: 4K aliasing): BatchToSpace with crops ran 0.9x or 2.5x the copy floor from one build to the
// next, whatever the arrays' own offsets; on a page, 0.9x in both.
constexpr size_t kPage = 4096;

// The streamed tiles' chunk buffers: the largest is B = 4 rows of kGatherChunkBytes.
constexpr size_t kScratchBytes = 4 * kGatherChunkBytes;

// Each thread's chunk buffer, on the heap, made on its first streamed call and freed when the thread
// ends. On the stack (up to 20 KiB a frame), a call from a Python thread with the 32 KiB stack that
// threading.stack_size allows overflowed it. Null when memory is short (the caller then stores plainly).
struct Scratch {
    void* raw = nullptr;
    char* page = nullptr;
    ~Scratch() { std::free(raw); }
};

inline char* scratch() {
    static thread_local Scratch mine;
    if (!mine.page && (mine.raw = std::malloc(kScratchBytes + kPage)) != nullptr)
        mine.page = static_cast<char*>(mine.raw) + (kPage - reinterpret_cast<uintptr_t>(mine.raw) % kPage) % kPage;
    return mine.page;
}

// Whether the loop just outside a step's tile continues its rows in dst (its dst stride is the row):
// a streamed gather then takes a run of that loop's tiles at once (see gather).
inline bool rows_go_on(const Step& st) {
    return st.nouter && st.outer[st.nouter - 1].d == st.l0.n;
}

// Whether a step's tiles are gather windows that a streamed run may take together (see gather): blocks of
// 2, 3 or 4 written on in dst.
inline bool runs_of_windows(const Step& st) {
    return st.pattern == GATHER_WINDOW && st.block >= 2 && st.block <= 4 && st.l0.d == 1;
}

// Whether the rows go on one loop further out, past a `side` loop whose tiles' rows a streamed gather
// buffers side by side (at most kJoinedStreams rows in all, or kSideRows where each row's run is a chunk
// or more): SpaceToDepth NCHW, whose block row offset lies between the tile and the loop over rows.
// Tile by tile, each output row's partial end line waited for the other rows' stores (NumPy's own out=,
// 16 bytes into a line: so that program stored plainly). 4 x 4 blocks (16 rows), 128 MiB into such an
// out=, same process, in turns, plain -> streamed this way: SpaceToDepth depth_first float32 0.79-1.00x
// -> 0.62-0.81x the copy floor, SpaceToBatch uint8 1.27-1.42x -> 1.13-1.21x (four runs of five; 1.49x
// -> 1.47x in the fifth). Short runs stay plain: 5-D SpaceToDepth with block 3 (9 rows of 1 KiB runs,
// one chunk a call, none prefetched) went 0.95-0.99x -> 1.29-1.41x.
// The tiles the rows of a side-joined gather go on through: those of the loop outside the side loop, times
// those of the loop outside that where it goes on with them too (tests/lowering/strided.py's runs_together:
// 5-D SpaceToDepth, the output's height and depth).
inline int64_t side_runs(const Step& st) {
    const int last = st.nouter - 1;
    const Loop& next = st.outer[last - 1];
    return last >= 2 && st.outer[last - 2].d == next.n * st.l0.n ? next.n * st.outer[last - 2].n : next.n;
}

inline bool side_joined(const Step& st) {
    const int last = st.nouter - 1;
    if (last < 1 || !(st.pattern == GATHER || runs_of_windows(st)) || rows_go_on(st) || st.outer[last - 1].d != st.l0.n)
        return false;
    const int64_t rows = st.outer[last].n * st.block;
    return rows <= kJoinedStreams || (rows <= kSideRows && side_runs(st) * st.l0.n * st.word >= kGatherChunkBytes);
}

// Whether a streamed step's gather tiles are taken a run at a time through the L1 buffer (rows that go on
// right outside the tile or past a side loop): their partial lines lie only at a run's two ends.
inline bool gathers_runs(const Step& st) {
    return (st.pattern == GATHER || runs_of_windows(st)) && (rows_go_on(st) || side_joined(st));
}

// Blocks [i0, i1) of a gather window into rows dst + b + j * d1, positions i * d0.
template <typename T, int B>
inline void gather_window_part(const T* src, T* dst, int64_t a, int64_t b, int64_t d1, int64_t d0, int64_t size,
                               int64_t i0, int64_t i1, int64_t first, int64_t last, int64_t lo, int64_t hi) {
    for (int edge = 0; edge < 2; ++edge) {
        for (int64_t i = edge ? std::max(i0, last) : i0; i < (edge ? i1 : std::min(i1, first)); ++i)
            for (int64_t j = 0; j < size; ++j) {
                int64_t t = i * size + j;
                dst[b + j * d1 + i * d0] = (lo <= t && t < hi) ? src[a + t] : T();
            }
    }
    const int64_t f = std::max(i0, first), l = std::min(i1, last);
    if (f >= l) return;
    if (B && d0 == 1) return gather_rows<T, (B ? B : 2)>(src, dst, a + f * size, b + f, Rows<(B ? B : 2)>(d1), l - f);
    for (int64_t i = f; i < l; ++i)
        for (int64_t j = 0; j < size; ++j) dst[b + j * d1 + i * d0] = src[a + i * size + j];
}

// Where a run's tiles start in src: tile k at k * step or, for a run through two loops (side_runs), `per`
// tiles of the inner loop to each step of the outer, `outer` words apart.
struct Steps {
    int64_t step, per, outer;
    Steps(int64_t step_ = 0, int64_t per_ = 0, int64_t outer_ = 0) : step(step_), per(per_), outer(outer_) {}
    int64_t of(int64_t k) const { return per ? k / per * outer + k % per * step : k * step; }
};

// A tile of a run walked in order (run_lines): its start in src and its place under Steps' outer loop.
struct TileAt {
    int64_t off = 0, into = 0;
    TileAt() = default;
    TileAt(const Steps& s, int64_t k) : off(s.of(k)), into(s.per ? k % s.per : 0) {}
    void next(const Steps& s) {
        if (s.per && ++into == s.per) {
            into = 0, off += s.outer - (s.per - 1) * s.step;
        } else {
            off += s.step;
        }
    }
};

#if DM_HAVE_STREAM

// How far ahead of its loads gather_lines asks for each input line: 4 KiB. It once read the side rows a
// line of each in turn, and 1 KiB was best for that (SpaceToDepth blocks_first, 1 GiB into NumPy's out=,
// 2-core Intel Xeon: 1.24-1.30x the copy floor; 4 KiB 1.43-1.45x, none 1.58x). It now reads them a tile's
// row of each in turn (the input in its own order, each output stream in bursts of a row). Same process,
// in turns: that and 4 KiB, 256 MiB 1.16-1.22x -> 1.04-1.10x, 1 GiB 1.22-1.26x -> 1.08-1.12x, 128 MiB
// 0.73-0.78x -> 0.68-0.70x; 4 KiB alone gained about half of that, the rows alone (1 KiB) nothing.
// Every line of the B read, not the first alone: 1.28x -> 1.14x (128 MiB, streamed: 0.80x -> 0.71x).
constexpr int64_t kLinesAhead = 4096;

// A thread's streamed gather goes on in two places of its run at once (gather_lines): the groups (a tile's
// rows, or kInterleaveLines lines of each row) of its first half and of its second in turns, so that its
// loads are in flight in two input streams pages apart, as glibc's memcpy of large sizes copies four
// pages at once. (The hardware prefetcher stops at a page's end.) Same process, in turns, 2-core Intel
// Xeon: SpaceToDepth blocks_first NCHW, 256 MiB to 1 GiB, 1.10-1.13x -> 1.03-1.08x the copy floor, 128 MiB
// 0.68x -> 0.64x; TensorFlow's NHWC SpaceToBatch with pads 1.16-1.25x -> 1.11-1.16x; the survey's 168
// small-image cases as before (ratios summed 164.4 -> 163.8; the five that read slower by 0.04-0.22 in one
// pass were within 0.02 when run again). (A plain copy in C, 512 MiB, two threads, four runs: memcpy 1.00,
// one stream 0.97-1.09, two or four pages at once 0.85-0.95.)
constexpr int64_t kInterleave = 2;
constexpr int64_t kInterleaveLines = 32;
// Lines of each output row that a group of side rows writes at least (run_lines): tiles of one line take
// two tiles a group, each output row then streaming two lines on end. 5-D SpaceToDepth depth_first with
// block 3 (16 x 16 output images, 9 output streams), 64 MiB into NumPy's own out=, 2-core Intel Xeon, same
// process, in turns: 1.24-1.28x the copy floor a tile a group, 1.10-1.13x two, 1.16-1.30x three to eight
// (through the library, builds swapped between processes: 1.26x -> 1.11-1.15x); NCHW SpaceToDepth of
// 48-wide images with block 3 and 64-wide with block 4, 72 and 128 MiB: 1.06x -> 0.95x, 1.10x -> 1.02x.
constexpr int64_t kSideBurstLines = 2;

#if DM_HAVE_STREAM
// The whole lines [first, last) of a run of gather tiles of n positions (gather_lines, gather_narrow_lines):
// line(m, i, a, b, t) for line i (position i of the run: position t of the tile at src word a, the next
// tile at b; Steps) of each of the `sides` side rows m, a group at a time (a tile's row of each side row in turn,
// kSideBurstLines at least; one side row: kInterleaveLines lines), the groups of the run's first half and of
// its second in turns (kInterleave).
template <int L, typename Line>
__attribute__((always_inline)) inline void run_lines(int64_t first, int64_t last, int64_t n, int64_t sides, const Steps& steps, Line&& line) {
    const int64_t group = sides > 1 ? std::max(kSideBurstLines, (n + L - 1) / L) * L : kInterleaveLines * L;  // (kLinesAhead)
    const int64_t groups = (last - first + group - 1) / group;
    const int64_t K = groups >= 2 * kInterleave ? kInterleave : 1;
    struct Cursor { int64_t g, end, t0; TileAt tile0; } cur[kInterleave];
    for (int64_t q = 0; q < K; ++q) {
        const int64_t g = first + groups * q / K * group;
        cur[q] = Cursor{g, q + 1 < K ? first + groups * (q + 1) / K * group : last, g % n, TileAt(steps, g / n)};
    }
    for (bool more = true; more;) {
        more = false;
        for (int64_t q = 0; q < K; ++q) {
            Cursor& c = cur[q];
            if (c.g >= c.end) continue;
            more = true;
            TileAt tile = c.tile0;
            int64_t t = c.t0;
            for (int64_t m = 0; m < sides; ++m, tile = c.tile0, t = c.t0) {
                for (int64_t i = c.g; i < std::min(c.end, c.g + group); i += L) {
                    TileAt after = tile;  // the next tile, where a line's last positions are
                    after.next(steps);
                    line(m, i, tile.off, after.off, t);
                    t += L;
                    if (t >= n) t -= n, tile = after;
                }
                if (m + 1 == sides) c.tile0 = tile, c.t0 = t;  // the group's end: the next group's first line
            }
            c.g += group;
        }
    }
}
#endif

// Whether a streamed gather of B rows of W-byte words may go straight from registers to memory a whole line
// a store (gather_lines): every row and side row on the same offset within a line, and tiles of a line or
// more (a line's positions then span at most two tiles). Words of 1-16 bytes: a 16-byte word (a pixel of
// 4 float32 channels, SpaceToBatch NHWC) always starts on 16 bytes, so its lines are whole words, while
// 32-byte pixels lie 16 bytes into a line in NumPy's arrays (gather_pixel_lines shifts them).
inline bool lines_fit(int64_t W, int B, const int64_t* at, int64_t n, const Loop& side, bool window = false) {
    if (!whole_line_words(W, window) || (W & (W - 1)) || W > 16 || B < 2 || B > 4 || n < kLine / W ||
        (side.n > 1 && side.d * W % kLine))
        return false;
    for (int j = 1; j < B; ++j)
        if ((at[j] - at[0]) * W % kLine) return false;
#if DM_HAVE_AVX512
    if (kAvx512 && (W >= 4 || kAvx512Bytes)) return true;
#endif
    // gather_lines_avx2 (at AVX-512F without BW and VBMI too, for words of 1 and 2 bytes), tiles of a line
    // and more. Tiles of one line once stayed plain (5-D SpaceToDepth depth_first with block 3, 64 MiB: 1.68x
    // the copy floor streamed, 1.50x plain); with side groups of two tiles (kSideBurstLines), at AVX2 on the
    // 2-core Intel Xeon, separate processes in turns, plain -> streamed: that case 1.41-1.44x -> 1.12-1.17x,
    // NCHW SpaceToDepth of one-line output rows (48-wide images with block 3, 64-wide with block 4, float64
    // 16-wide, uint8 128-wide, uint16 64-wide, uint8 256-wide with block 4; 64-128 MiB) 1.28-1.84x ->
    // 0.73-0.96x, 32-wide depth_first with block 2 1.31-1.34x -> 1.20-1.22x. Words of 1 and 2 bytes in
    // blocks of 2 and 4 only (take_apart's byte shuffles).
    return W >= 4 || B != 3;
}

// Whether a gather window of tiles of n positions in blocks of B pads anything: words lo <= w < hi of a
// tile's row are read, the others zeros. SpaceToBatch without pads makes windows that pad nothing, which
// go as plain gathers go (gather_lines_avx2 takes no padded window of 1- or 2-byte words, but takes these:
// [4,32,256,1024] uint8 with a 4 x 4 block, 32 MiB, at AVX2, went through the L1 buffer, stored plainly,
// at 1.11-1.44x the copy floor; 0.85-0.87x this way, in turns).
inline bool padded_window(int64_t lo, int64_t hi, int64_t n, int64_t B) { return lo > 0 || hi < n * B; }

// The words lo <= w < hi of each tile's row that a run of gather tiles reads; the others are zeros
// (SpaceToBatch's padding, in gather windows). A gather reads them all.
struct Bounds {
    int64_t lo, hi;
};

// The permutes that build output row j's line from a line's B input vectors of V lanes, H lanes a word:
// lane k takes lane (k / H * B + j) * H + k % H of the vectors, in turn. B = 2: one permute of vectors 0-1
// (idx). B = 4: the first half of the line from vectors 0-1 and the second from 2-3, by the same idx.
// B = 3: the lanes in vectors 0-1 by idx, then those in vector 2 by rest (the others stay).
// Constants, loaded from the binary: built on the stack at each call and loaded whole, a load cannot
// take the lanes from the queued stores and waited for the queue to drain, streaming stores and all.
template <typename Lane, int V, int H, int B>
struct LinePermutes {
    alignas(64) Lane idx[B][V];
    alignas(64) Lane rest[B][V];
    constexpr LinePermutes() : idx(), rest() {
        for (int j = 0; j < B; ++j)
            for (int k = 0; k < V; ++k) {
                const int lane = ((((B == 4 ? k % (V / 2) : k) / H) * B + j) * H + k % H);
                idx[j][k] = (Lane)(lane & (2 * V - 1));
                rest[j][k] = (Lane)(lane < 2 * V ? k : V + (lane - 2 * V));
            }
    }
};
template <typename Lane, int V, int H, int B>
constexpr LinePermutes<Lane, V, H, B> kLinePermutes{};

#if DM_HAVE_AVX512
// The permutes of LinePermutes<int32_t, 16, H, B> in registers: pick (idx), then (rest).
template <int H, int B>
__attribute__((target("avx512f"), always_inline)) inline void load_line_permutes(__m512i* pick, __m512i* then) {
    for (int j = 0; j < B; ++j) {
        pick[j] = _mm512_load_si512(kLinePermutes<int32_t, 16, H, B>.idx[j]);
        then[j] = _mm512_load_si512(kLinePermutes<int32_t, 16, H, B>.rest[j]);
    }
}

// Output row j's line from a line's B input vectors z of 32-bit lanes (LinePermutes).
template <int B>
__attribute__((target("avx512f"), always_inline)) inline __m512i line_of(const __m512i* z, const __m512i* pick,
                                                                        const __m512i* then, int j) {
    if (B == 2) return _mm512_permutex2var_epi32(z[0], pick[j], z[1]);
    if (B == 3) return _mm512_permutex2var_epi32(_mm512_permutex2var_epi32(z[0], pick[j], z[1]), then[j], z[2]);
    const __m512i lo = _mm512_permutex2var_epi32(z[0], pick[j], z[1]);
    const __m512i hi = _mm512_permutex2var_epi32(z[B - 2], pick[j], z[B - 1]);
    return _mm512_shuffle_i64x2(lo, hi, 0x44);
}

#endif

// Of a run of `total` positions of W bytes from d: the first that starts a line, and the end of the last
// whole line.
inline void whole_lines(const char* d, int64_t W, int64_t total, int64_t* first, int64_t* last) {
    const int64_t line = kLine / W, lead = (int64_t)(reinterpret_cast<uintptr_t>(d) & (kLine - 1)) / W;
    *first = std::min<int64_t>(total, (line - lead) % line);
    *last = *first + (total - *first) / line * line;
}

// Positions [i0, i1) of every row of a run of gather tiles (see gather_lines), stored plainly.
template <int W, int B>
inline void gather_positions(const char* src, char* dst, const int64_t* at, int64_t n, const Steps& step, const Loop& side,
                             Bounds w, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
        const int64_t tile = i / n, t = i - tile * n;
        for (int64_t m = 0; m < side.n; ++m)
            for (int j = 0; j < B; ++j) {
                char* o = dst + (m * side.d + at[j] + i) * W;
                const int64_t word = t * B + j;
                if (w.lo <= word && word < w.hi) {
                    std::memcpy(o, src + (step.of(tile) + m * side.s + word) * W, W);
                } else {
                    std::memset(o, 0, W);
                }
            }
    }
}

// Which lanes of input vector v (`per` lanes a vector, `h` a word) of a line whose positions start at t in
// their tile are loaded: `own`, those of this tile (its first `cut` lanes), `next`, those of the next tile
// (the rest), each only inside the window's words (the others are zeros; `padded`: the window has any).
__attribute__((always_inline)) inline void line_lanes(int64_t v, int64_t per, int64_t h, int64_t cut, int64_t t, int64_t B, Bounds w, bool padded,
                       uint64_t* own, uint64_t* next) {
    const uint64_t all = per == 64 ? ~0ull : (1ull << per) - 1;
    if (!padded) {  // (the common case, kept short: the first `cut` lanes from this tile, the others from the next)
        const int64_t mine = std::max<int64_t>(0, std::min(per, cut - v * per));
        *own = mine == 64 ? ~0ull : (1ull << mine) - 1;
        *next = all & ~*own;
        return;
    }
    auto bits = [per, v](int64_t a, int64_t b) -> uint64_t {  // the line's lanes [a, b) that fall in vector v
        a = std::max(a, v * per) - v * per, b = std::min(b, (v + 1) * per) - v * per;
        return a >= b ? 0 : (b - a >= 64 ? ~0ull : (1ull << (b - a)) - 1) << a;
    };
    *own = bits(std::max<int64_t>(0, (w.lo - t * B) * h), std::min(cut, (w.hi - t * B) * h));
    *next = bits(std::max(cut, cut + w.lo * h), cut + w.hi * h);
}

#if DM_HAVE_AVX2
// Blocks of 3 in gather_lines_avx2: half a line of output row j (8 lanes) from the 3 32-byte input vectors
// of that half of the line, lane k from lane g = ((k / H) * 3 + j) * H + k % H of them in turn (as
// LinePermutes). The 8 lanes g % 8 of a row are all different (3 and 8 share no factor), so one vector
// blended from the three (mask: lane g % 8 from vector g / 8) holds them all, and one permute (idx) puts
// them in order.
template <int H, int B>
struct HalfLinePermutes {
    alignas(32) int32_t idx[B][8];
    alignas(32) int32_t mask[B][B][8];
    constexpr HalfLinePermutes() : idx(), mask() {
        for (int j = 0; j < B; ++j)
            for (int k = 0; k < 8; ++k) {
                const int lane = ((k / H) * B + j) * H + k % H;
                idx[j][k] = lane % 8;
                for (int u = 0; u < B; ++u) mask[j][u][lane % 8] = lane / 8 == u ? -1 : 0;
            }
    }
};
template <int H, int B>
constexpr HalfLinePermutes<H, B> kHalfLinePermutes{};

// The 8 lanes whose bits are set in `bits`, as a mask of whole lanes (AVX2's masked loads).
DM_AVX2 __attribute__((always_inline)) inline __m256i lanes_of(uint64_t bits) {
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)(bits & 255)), bit), bit);
}

// Half a line of each of the B output rows (out[j]) from that half's B input vectors (in): blocks of 2
// and 4 by unpacks, shuffles and one cross-lane permute a row (a 4 x 4 transpose in each 16-byte lane for
// 4-byte words in blocks of 4); blocks of 3 by HalfLinePermutes (two blends and a permute a row). (A
// permute of each vector a row, blended, for every block: the 4 x 4 NCHW SpaceToDepth, float32, 128 MiB,
// 2.1x the copy floor against 1.06x.)
// Words of 1 and 2 bytes in blocks of 2 and 4 (take_apart): each 16-byte lane's bytes grouped by row (a byte
// shuffle), so that the lane holds B units of 16 / B bytes, row j's unit j: as the lane of 16 / B-byte
// words in blocks of B, which take_apart then takes apart.
template <int W, int B>
struct RowBytes {
    alignas(32) int8_t order[32];
    constexpr RowBytes() : order() {
        constexpr int P = 16 / (W * B);  // positions a lane
        for (int half = 0; half < 2; ++half)
            for (int j = 0; j < B; ++j)
                for (int i = 0; i < P; ++i)
                    for (int b = 0; b < W; ++b) order[16 * half + (j * P + i) * W + b] = (int8_t)((i * B + j) * W + b);
    }
};
template <int W, int B>
constexpr RowBytes<W, B> kRowBytes{};

template <int W, int B>
DM_AVX2 __attribute__((always_inline)) inline void take_apart(const __m256i* in, __m256i* out, const __m256i* idx,
                                                               const __m256i (*keep)[B]) {
    if constexpr (W < 4) {
        static_assert(B == 2 || B == 4, "blocks of 2 and 4 (lines_fit)");
        const __m256i order = _mm256_load_si256(reinterpret_cast<const __m256i*>(kRowBytes<W, B>.order));
        __m256i grouped[B];
        for (int v = 0; v < B; ++v) grouped[v] = _mm256_shuffle_epi8(in[v], order);
        take_apart<16 / B, B>(grouped, out, idx, keep);
    } else if constexpr (W == 4 && B == 2) {
        const __m256 a = _mm256_castsi256_ps(in[0]), b = _mm256_castsi256_ps(in[1]);
        out[0] = _mm256_permute4x64_epi64(_mm256_castps_si256(_mm256_shuffle_ps(a, b, 0x88)), 0xD8);
        out[1] = _mm256_permute4x64_epi64(_mm256_castps_si256(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8);
    } else if constexpr (W == 8 && B == 2) {
        out[0] = _mm256_permute4x64_epi64(_mm256_unpacklo_epi64(in[0], in[1]), 0xD8);
        out[1] = _mm256_permute4x64_epi64(_mm256_unpackhi_epi64(in[0], in[1]), 0xD8);
    } else if constexpr (W == 4 && B == 4) {  // lane l of vector k: position 2k + l, its 4 rows
        const __m256 z0 = _mm256_castsi256_ps(in[0]), z1 = _mm256_castsi256_ps(in[1]);
        const __m256 z2 = _mm256_castsi256_ps(in[2]), z3 = _mm256_castsi256_ps(in[3]);
        const __m256 t0 = _mm256_unpacklo_ps(z0, z1), t1 = _mm256_unpackhi_ps(z0, z1);
        const __m256 t2 = _mm256_unpacklo_ps(z2, z3), t3 = _mm256_unpackhi_ps(z2, z3);
        const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);  // positions 0 2 4 6 | 1 3 5 7 in turn
        out[0] = _mm256_permutevar8x32_epi32(_mm256_castps_si256(_mm256_shuffle_ps(t0, t2, 0x44)), order);
        out[1] = _mm256_permutevar8x32_epi32(_mm256_castps_si256(_mm256_shuffle_ps(t0, t2, 0xEE)), order);
        out[2] = _mm256_permutevar8x32_epi32(_mm256_castps_si256(_mm256_shuffle_ps(t1, t3, 0x44)), order);
        out[3] = _mm256_permutevar8x32_epi32(_mm256_castps_si256(_mm256_shuffle_ps(t1, t3, 0xEE)), order);
    } else if constexpr (W == 8 && B == 4) {  // vector k: position k, its 4 rows
        const __m256i t0 = _mm256_unpacklo_epi64(in[0], in[1]), t1 = _mm256_unpackhi_epi64(in[0], in[1]);
        const __m256i t2 = _mm256_unpacklo_epi64(in[2], in[3]), t3 = _mm256_unpackhi_epi64(in[2], in[3]);
        out[0] = _mm256_permute2x128_si256(t0, t2, 0x20);
        out[1] = _mm256_permute2x128_si256(t1, t3, 0x20);
        out[2] = _mm256_permute2x128_si256(t0, t2, 0x31);
        out[3] = _mm256_permute2x128_si256(t1, t3, 0x31);
    } else {
        static_assert(B == 3, "blocks of 2 and 4 above");
        for (int j = 0; j < B; ++j) {
            __m256i all = in[0];
            for (int u = 1; u < B; ++u) all = _mm256_blendv_epi8(all, in[u], keep[j][u]);
            out[j] = _mm256_permutevar8x32_epi32(all, idx[j]);
        }
    }
}

// take_apart for a call's lines (gather_lines_avx2, chained_lines_avx2): the permutes of blocks of 3 in
// registers, loaded once (blocks of 2 and 4 need none).
template <int W, int B>
struct Apart {
    __m256i idx[B], keep[B][B];
    DM_AVX2 __attribute__((always_inline)) Apart() {
        if constexpr (B == 3) {
            constexpr int H = (W >= 4 ? W : 16 / B) / 4;
            for (int j = 0; j < B; ++j) {
                idx[j] = _mm256_load_si256(reinterpret_cast<const __m256i*>(kHalfLinePermutes<H, B>.idx[j]));
                for (int u = 0; u < B; ++u)
                    keep[j][u] = _mm256_load_si256(reinterpret_cast<const __m256i*>(kHalfLinePermutes<H, B>.mask[j][u]));
            }
        }
    }
    // Both halves of a line: out[h][j], half h of row j's 64 bytes, from the line's 2 * B input vectors z.
    DM_AVX2 __attribute__((always_inline)) void line(const __m256i* z, __m256i (*out)[B]) const {
        take_apart<W, B>(z, out[0], idx, keep);
        take_apart<W, B>(z + B, out[1], idx, keep);
    }
};

// gather_lines without AVX-512: each whole output line is 2 * B 32-byte vectors of input (a window's words
// outside its bounds, and the lanes of the next tile, by masked loads where a vector holds both) taken
// apart in registers (take_apart), and stored as two 32-byte streaming stores a row, one after the other,
// so the line leaves the write-combining buffer whole; the partial lines at the run's two ends are stored
// plainly. Positions, tiles, side rows and the order of the lines as in gather_lines (run_lines). On the
// 2-core AMD EPYC (AVX2), NCHW into NumPy's own out= (16 bytes into a line), 128 MiB, two threads, same
// process, in turns against a streaming copy, stored plainly (as before: the L1 buffer did not pay here,
// STAGED_STREAMS) -> this way: SpaceToDepth blocks_first b2 1.57x -> 1.00x, depth_first b4 1.49x -> 1.06x,
// blocks_first b3 1.51x -> 1.14x, float64 b2 1.39x -> 0.97x; SpaceToBatch with pads 1.50x -> 1.10x,
// float64 3 x 3 with pads (64 MiB) 1.71x -> 1.12x. Words of 1 and 2 bytes in blocks of 2 and 4, outside
// windows (whose padding would need byte masks), after a byte shuffle (take_apart): SpaceToDepth uint8 b2
// 1.56x -> 0.99x, uint16 1.51x -> 1.03x.
// (flatten: the line's body inlined in run_lines, which the compiler left a call a line for blocks of 3)
template <int W, int B>
DM_AVX2 DM_NOINLINE __attribute__((flatten)) void gather_lines_avx2(const char* src, char* dst, const int64_t* at, int64_t n, int64_t runs, Steps step,
                                           Loop side, Bounds w) {
    constexpr int L = kLine / W;              // positions a line
    constexpr int H = W >= 4 ? W / 4 : 1;     // 32-bit lanes a word (words of 1 and 2 bytes: see below)
    const int64_t total = n * runs;
    const Apart<W, B> apart;
    int64_t first, last;
    whole_lines(dst + at[0] * W, W, total, &first, &last);
    gather_positions<W, B>(src, dst, at, n, step, side, w, 0, first);
    const bool padded = w.lo > 0 || w.hi < n * B;
    run_lines<L>(first, last, n, side.n, step, [&](int64_t m, int64_t i, int64_t here, int64_t there, int64_t t) DM_AVX2 {
        const int32_t* pa = reinterpret_cast<const int32_t*>(src + (here + m * side.s + t * B) * W);
        __m256i z[2 * B];
        if constexpr (W < 4) {  // (no windows: lines_fit) the vector across two tiles from a copy of its two parts
            const int64_t cut = std::min<int64_t>(n - t, L) * B * W;  // bytes from this tile; the rest from the next
            const char* from = reinterpret_cast<const char*>(pa);
            const char* next = src + (there + m * side.s) * W - cut;
            for (int v = 0; v < B; ++v) _mm_prefetch(from + 64 * v + kLinesAhead, _MM_HINT_T0);
            for (int v = 0; v < 2 * B; ++v) {
                const int64_t c = cut - 32 * v;
                if (c >= 32 || c <= 0) {
                    z[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>((c > 0 ? from : next) + 32 * v));
                } else {
                    alignas(32) char both[32];
                    std::memcpy(both, from + 32 * v, c);
                    std::memcpy(both + c, next + cut, 32 - c);
                    z[v] = _mm256_load_si256(reinterpret_cast<const __m256i*>(both));
                }
            }
        } else {
            const int64_t cut = std::min<int64_t>(n - t, L) * B * H;  // lanes from this tile; the rest from the next
            const bool inside = cut == B * 16 && w.lo <= t * B && (t + L) * B <= w.hi;
            const int32_t* pb = reinterpret_cast<const int32_t*>(src + (there + m * side.s) * W) - cut;
            for (int v = 0; v < B; ++v) _mm_prefetch(reinterpret_cast<const char*>(pa + 16 * v) + kLinesAhead, _MM_HINT_T0);
            for (int v = 0; v < 2 * B; ++v) {
                if (inside) {
                    z[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pa + 8 * v));
                    continue;
                }
                uint64_t own, next;
                line_lanes(v, 8, H, cut, t, B, w, padded, &own, &next);
                if (own == 255) {  // (whole vectors of one tile: plain loads; only the vector across the cut is masked.
                    // Two whole loads inside the two tiles, blended and turned, took longer: SpaceToDepth NCHW b2
                    // 1.00-1.04x the copy floor -> 1.11-1.19x, SpaceToBatch with pads 1.07-1.14x -> 1.36-1.43x)
                    z[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pa + 8 * v));
                } else if (next == 255) {
                    z[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + 8 * v));
                } else {
                    z[v] = _mm256_or_si256(_mm256_maskload_epi32(reinterpret_cast<const int*>(pa + 8 * v), lanes_of(own)),
                                           _mm256_maskload_epi32(reinterpret_cast<const int*>(pb + 8 * v), lanes_of(next)));
                }
            }
        }
        __m256i out[2][B];
        apart.line(z, out);
        for (int j = 0; j < B; ++j) {
            char* o = dst + (m * side.d + at[j] + i) * W;
            _mm256_stream_si256(reinterpret_cast<__m256i*>(o), out[0][j]);
            _mm256_stream_si256(reinterpret_cast<__m256i*>(o + 32), out[1][j]);
        }
    });
    gather_positions<W, B>(src, dst, at, n, step, side, w, last, total);
}
#endif

#if DM_HAVE_AVX512
// A streamed GATHER of B = 2, 3 or 4 rows of W = 4, 8 or 16 bytes straight from registers: each whole output line
// is B vectors of input deinterleaved by permutes and stored at once around the cache (one 64-byte
// streaming store: no partial line waits in a write-combining buffer, and no L1 buffer in between); the
// partial lines at the run's two ends are stored plainly. Positions and tiles as in gather (runs of tiles,
// a side loop); the side rows are taken a group of lines at a time, a tile's row of each in turn, so the
// input is read in its own order and each output row streams in bursts of a tile's row; a window's words outside its bounds load as zeros. On the 2-core Intel Xeon (AVX-512), SpaceToDepth
// [64,64,256,256] float32 blocks_first into NumPy's out=, same process, in turns with the copy floor, 1 GiB:
// 1.58-1.97x through the L1 buffer, 1.14-1.18x this way (README). 16-byte words: SpaceToBatch NHWC with 4
// float32 channels and pads, 64 MiB, 0.89-1.11x (plain stores) -> 0.66-0.67x.
template <int W, int B>
__attribute__((target("avx512f"))) DM_NOINLINE void gather_lines(const char* src, char* dst, const int64_t* at, int64_t n,
                                                                 int64_t runs, Steps step, Loop side, Bounds w) {
    constexpr int L = kLine / W;      // positions a line
    constexpr int H = W / 4;          // 32-bit lanes a word
    const int64_t total = n * runs;
    __m512i pick[B], then[B];
    load_line_permutes<H, B>(pick, then);
    int64_t first, last;
    whole_lines(dst + at[0] * W, W, total, &first, &last);
    gather_positions<W, B>(src, dst, at, n, step, side, w, 0, first);
    const bool padded = w.lo > 0 || w.hi < n * B;
    run_lines<L>(first, last, n, side.n, step, [&](int64_t m, int64_t i, int64_t here, int64_t there, int64_t t) __attribute__((target("avx512f"))) {
        const int64_t cut = std::min<int64_t>(n - t, L) * B * H;  // lanes from this tile; the rest from the next
        const bool inside = cut == B * 16 && w.lo <= t * B && (t + L) * B <= w.hi;
        const int32_t* pa = reinterpret_cast<const int32_t*>(src + (here + m * side.s + t * B) * W);
        const int32_t* pb = reinterpret_cast<const int32_t*>(src + (there + m * side.s) * W) - cut;
        for (int v = 0; v < B; ++v) _mm_prefetch(reinterpret_cast<const char*>(pa + 16 * v) + kLinesAhead, _MM_HINT_T0);
        __m512i z[B];
        for (int v = 0; v < B; ++v) {
            if (inside) {
                z[v] = _mm512_loadu_si512(pa + 16 * v);
            } else {
                uint64_t own, next;
                line_lanes(v, 16, H, cut, t, B, w, padded, &own, &next);
                z[v] = _mm512_mask_loadu_epi32(_mm512_maskz_loadu_epi32((__mmask16)own, pa + 16 * v), (__mmask16)next, pb + 16 * v);
            }
        }
        for (int j = 0; j < B; ++j)
            _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + (m * side.d + at[j] + i) * W), line_of<B>(z, pick, then, j));
    });
    gather_positions<W, B>(src, dst, at, n, step, side, w, last, total);
}
#endif
#endif

#if DM_HAVE_AVX512
template <int W>
DM_NARROW __attribute__((always_inline)) inline __m512i narrow_permute(__m512i a, __m512i idx, __m512i b) {
    if constexpr (W == 1) return _mm512_permutex2var_epi8(a, idx, b);
    else return _mm512_permutex2var_epi16(a, idx, b);
}

// The lanes of `mine` from here, those of `theirs` from there, the others zeros.
template <int W, typename Mask>
DM_NARROW __attribute__((always_inline)) inline __m512i narrow_load(Mask mine, Mask theirs, const char* here, const char* there) {
    if constexpr (W == 1) return _mm512_mask_loadu_epi8(_mm512_maskz_loadu_epi8(mine, here), theirs, there);
    else return _mm512_mask_loadu_epi16(_mm512_maskz_loadu_epi16(mine, here), theirs, there);
}

// gather_lines for B = 2, 3 or 4 rows of W = 1 or 2 bytes: lanes of one word, VBMI's byte permutes or
// AVX-512BW's word permutes, BW's masked loads (where the CPU has all three: kAvx512Bytes).
template <int W, int B>
DM_NARROW DM_NOINLINE void gather_narrow_lines(
    const char* src, char* dst, const int64_t* at, int64_t n, int64_t runs, Steps step, Loop side, Bounds w) {
    constexpr int L = kLine / W;  // positions (lanes) a line
    using Lane = std::conditional_t<W == 1, int8_t, int16_t>;
    using Mask = std::conditional_t<W == 1, __mmask64, __mmask32>;
    const int64_t total = n * runs;
    __m512i pick[B], then[B];  // (LinePermutes, in lanes of one word)
    for (int j = 0; j < B; ++j) {
        pick[j] = _mm512_load_si512(kLinePermutes<Lane, L, 1, B>.idx[j]);
        then[j] = _mm512_load_si512(kLinePermutes<Lane, L, 1, B>.rest[j]);
    }
    int64_t first, last;
    whole_lines(dst + at[0] * W, W, total, &first, &last);
    gather_positions<W, B>(src, dst, at, n, step, side, w, 0, first);
    const bool padded = w.lo > 0 || w.hi < n * B;
    run_lines<L>(first, last, n, side.n, step, [&](int64_t m, int64_t i, int64_t here, int64_t there, int64_t t) DM_NARROW {
        const int64_t cut = std::min<int64_t>(n - t, L) * B;  // lanes from this tile; the rest from the next
        const bool inside = cut == B * L && w.lo <= t * B && (t + L) * B <= w.hi;
        const char* pa = src + (here + m * side.s + t * B) * W;
        const char* pb = src + (there + m * side.s - cut) * W;
        __m512i z[B];
        for (int v = 0; v < B; ++v) {
            _mm_prefetch(pa + 64 * v + kLinesAhead, _MM_HINT_T0);
            if (inside) {
                z[v] = _mm512_loadu_si512(pa + 64 * v);
            } else {
                uint64_t own, next;
                line_lanes(v, L, 1, cut, t, B, w, padded, &own, &next);
                z[v] = narrow_load<W>((Mask)own, (Mask)next, pa + 64 * v, pb + 64 * v);
            }
        }
        for (int j = 0; j < B; ++j) {
            __m512i line;
            if (B == 2) {
                line = narrow_permute<W>(z[0], pick[j], z[1]);
            } else if (B == 3) {
                line = narrow_permute<W>(narrow_permute<W>(z[0], pick[j], z[1]), then[j], z[B - 1]);
            } else {
                line = _mm512_shuffle_i64x2(narrow_permute<W>(z[0], pick[j], z[1]), narrow_permute<W>(z[B - 2], pick[j], z[B - 1]), 0x44);
            }
            _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + (m * side.d + at[j] + i) * W), line);
        }
    });
    gather_positions<W, B>(src, dst, at, n, step, side, w, last, total);
}

// Whether a streamed gather of B rows of W = 32-, 64- or 128-byte pixels (SpaceToBatch's windows of
// channels-last data) can go straight from registers (gather_pixel_lines): every row and side row at the
// same 4-byte offset into a line.
inline bool pixel_lines_fit(const char* row, int64_t W, int B, const int64_t* at, const Loop& side) {
    if (!kAvx512 || (W != 32 && W != 64 && W != 128) || B < 2 || B > 4 || reinterpret_cast<uintptr_t>(row) % 4 ||
        side.n * B > kSideRows || (side.n > 1 && side.d * W % kLine))
        return false;
    for (int j = 1; j < B; ++j)
        if ((at[j] - at[0]) * W % kLine) return false;
    return true;
}

// Two 32-byte pixels side by side, each zeros where its address is null (outside a window).
__attribute__((target("avx512f"), always_inline)) inline __m512i pixel_pair(const char* a, const char* b) {
    const __m256i lo = a ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a)) : _mm256_setzero_si256();
    const __m256i hi = b ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)) : _mm256_setzero_si256();
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// Vector `vec` of a row of gather_pixel_lines (`row`: the line its first vector starts in), shifted to
// dst's lines: after `prev`, the row's vector before it, which it then becomes.
__attribute__((target("avx512f"), always_inline)) inline void put_pixel_vector(char* row, int64_t vec, const Shifted& sh,
                                                                              __m512i& prev, __m512i v) {
    char* o = row + vec * kLine;
    if (vec) {
        shifted_line(o, sh, prev, v);
    } else {
        shifted_first(o, sh, v);
    }
    prev = v;
}

// The 64-byte vectors a chunk of gather_pixel_lines makes of each row before the next row's.
constexpr int64_t kPixelChunkVectors = 32;

// A streamed run of gather tiles of W = 32-, 64- or 128-byte words (pixels: SpaceToBatch's windows of
// channels-last data with 8, 16 or 32 float32 channels) straight from registers, at any 4-byte offset
// into a line: each output row is a stream of 64-byte vectors (two 32-byte pixels, or a part of one),
// zeros outside the window, shifted to dst's lines (Shifted) and streamed a whole line at a time; a
// row's first and last partial lines, and an odd last 32-byte pixel, are stored plainly. The rows take
// turns a chunk (kPixelChunkVectors) at a time, so that they read the same input lines while those are
// in L1. Positions and tiles as in gather_lines (runs of tiles, Steps, a side loop). Through the L1
// buffer, a word at a time, they took (64-128 MiB into NumPy's out=, same process, in turns) 1.02-1.04x
// the copy floor with 32 float32 channels, 1.02-1.03x with TensorFlow's 8; this way 0.77-0.81x, 0.89-0.98x.
// Every row asks for its own lines ahead (but a 2 x 2 block's second row of 32-byte pixels, whose lines
// the first row's are): a block's rows read different pixels (row j the pixels t * B + j), whose lines no
// other row reads. Row 0's alone before: [16,32,254,254] with pads, 128 MiB, 2-core Intel Xeon, same
// process, in turns, 1.16x -> 1.03x the copy floor; 16 float64 channels 1.18x -> 1.03x, 32 float32 with a
// 3 x 3 block 1.21x -> 1.09x, 16 float32 1.19x -> 1.15x; 8 float32 channels (32-byte pixels), 64 MiB,
// a 3 x 3 block 1.46-1.50x -> 1.35x, 4 x 4 1.42-1.43x -> 1.41x.
template <int W, int B>
__attribute__((target("avx512f"))) DM_NOINLINE void gather_pixel_lines(const char* src, char* dst, const int64_t* at, int64_t n,
                                                                       int64_t runs, Steps step, Loop side, Bounds w) {
    constexpr int64_t P = W >= kLine ? 1 : kLine / W;  // positions a vector
    constexpr int64_t V = W >= kLine ? W / kLine : 1;  // vectors a position
    const int64_t total = n * runs, whole = total / P * P, chunk = kPixelChunkVectors * P / V;
    const int64_t rows = side.n * B;
    const Shifted sh = shifted(dst + at[0] * W);
    __m512i prev[kSideRows];
    auto pixel = [&](const char* from, int64_t word) -> const char* { return w.lo <= word && word < w.hi ? from + word * W : nullptr; };
    // (row r's vector `vec`, shifted to dst's lines: a macro, as a lambda here is not compiled for AVX-512)
#define DM_PUT_PIXELS(r, vec, v) put_pixel_vector(dst + ((r) / B * side.d + at[(r) % B]) * W - sh.p, (vec), sh, prev[r], (v))
    if constexpr (W == 32 && B == 2) {
        // Two rows of 32-byte pixels from one input row (TensorFlow's SpaceToBatch with 8 float32 channels:
        // row j takes the pixels 2t + j), both at once: two 64-byte loads hold each row's two pixels of a
        // vector, which one shuffle each picks out (a pair of positions never spans two tiles: n even).
        // Each of the two lines read is asked for 4 KiB ahead. Read pixel by pixel (two loads and an insert
        // for each row's vector, the first line alone asked for), the suite's [33,254,254,8] (64 MiB, 2
        // threads, from memory) ran 1.22-1.33x the copy floor; this way 0.96-1.06x (in turns, 2-core Xeon).
        if (n % 2 == 0) {
            for (int64_t i0 = 0; i0 < whole; i0 += chunk) {
                const int64_t i1 = std::min(whole, i0 + chunk);
                const TileAt first(step, i0 / n);
                for (int64_t m = 0; m < side.n; ++m) {
                    TileAt tile = first;
                    int64_t t = i0 % n;
                    for (int64_t i = i0; i < i1; i += 2) {
                        const char* in = src + (tile.off + m * side.s) * W;
                        const int64_t word = 2 * t;  // row 0: words 2t and 2t + 2; row 1: 2t + 1 and 2t + 3
                        __m512i v0, v1;
                        if (w.lo <= word && word + 4 <= w.hi) {
                            const char* a = in + word * W;
                            _mm_prefetch(a + kLinesAhead, _MM_HINT_T0);
                            _mm_prefetch(a + kLinesAhead + kLine, _MM_HINT_T0);
                            const __m512i x = _mm512_loadu_si512(a), y = _mm512_loadu_si512(a + kLine);
                            v0 = _mm512_shuffle_i64x2(x, y, 0x44);
                            v1 = _mm512_shuffle_i64x2(x, y, 0xEE);
                        } else {  // at the window's edges: each pixel, or zeros
                            v0 = pixel_pair(pixel(in, word), pixel(in, word + 2));
                            v1 = pixel_pair(pixel(in, word + 1), pixel(in, word + 3));
                        }
                        if ((t += 2) == n) t = 0, tile.next(step);
                        DM_PUT_PIXELS(2 * m, i / 2, v0);
                        DM_PUT_PIXELS(2 * m + 1, i / 2, v1);
                    }
                }
            }
            goto ends;
        }
    }
    for (int64_t i0 = 0; i0 < whole; i0 += chunk) {
        const int64_t i1 = std::min(whole, i0 + chunk);
        const TileAt first(step, i0 / n);
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t m = r / B, j = r % B;
            TileAt tile = first;
            int64_t t = i0 % n;
            auto next = [&]() -> const char* {  // the source of position (tile, t), then on to the next
                const char* p = pixel(src + (tile.off + m * side.s) * W, t * B + j);
                if (++t == n) t = 0, tile.next(step);
                return p;
            };
            for (int64_t i = i0; i < i1; i += P) {
                __m512i v[V];
                if constexpr (W == 32) {
                    const char* a = next();
                    const char* b = next();
                    if ((j == 0 || B > 2) && a) _mm_prefetch(a + kLinesAhead, _MM_HINT_T0);  // (B 2: row 0's lines are row 1's)
                    v[0] = pixel_pair(a, b);
                } else {
                    const char* a = next();
                    for (int64_t k = 0; k < V; ++k) {
                        if (a) _mm_prefetch(a + 64 * k + kLinesAhead, _MM_HINT_T0);
                        v[k] = a ? _mm512_loadu_si512(a + 64 * k) : _mm512_setzero_si512();
                    }
                }
                for (int64_t k = 0; k < V; ++k) DM_PUT_PIXELS(r, i / P * V + k, v[k]);  // (its place in its row)
            }
        }
    }
#undef DM_PUT_PIXELS
ends:
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t m = r / B, j = r % B;
        char* row = dst + (m * side.d + at[j]) * W;
        if (whole) shifted_last(row - sh.p + whole / P * V * kLine, sh, prev[r]);
        if (whole < total) {  // an odd last 32-byte pixel
            const int64_t tile = whole / n, t = whole % n, word = t * B + j;
            const char* from = src + (step.of(tile) + m * side.s) * W;
            const __m256i v = w.lo <= word && word < w.hi ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + word * W))
                                                          : _mm256_setzero_si256();
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + whole * W), v);
        }
    }
}
#endif

// Rows a chain for chained_lines: a GATHER tile's rows that are whole lines (n * W a multiple of 64
// bytes, read from one contiguous tile) and follow each other in dst in chains of c (DepthToSpace
// depth_first NHWC: an output row's pixels j = 0, 1 of a block, then the next tile's); the next tile (the
// loop just outside) going on where each chain stopped. 0 where not.
inline int64_t chained_rows(const Step& st) {
#if DM_HAVE_AVX512 || DM_HAVE_AVX2
    const int64_t W = st.word, B = st.block, n = st.l0.n;
    // (the levels of gather_lines' words: chained_lines at AVX-512F, chained_lines_avx2 at AVX2)
    if (!whole_line_words(W) || st.pattern != GATHER || !st.nouter || (W != 4 && W != 8 && W != 16) || B < 2 || B > 4 ||
        n * W % kLine || n < 1 || st.l0.s != B || st.l0.d != 1)
        return 0;
    int64_t c = 1;
    while (c < B && st.at[c] == st.at[c - 1] + n) ++c;
    if (c < 2 || B % c || st.outer[st.nouter - 1].d != c * n) return 0;
    for (int j = 1; j < B; ++j)
        if (j % c ? st.at[j] != st.at[j - 1] + n : (st.at[j] - st.at[0]) * W % kLine) return 0;
    return c;
#else
    (void)st;
    return 0;
#endif
}

#if DM_HAVE_AVX512
// A streamed run of GATHER tiles whose rows come in chains (chained_rows: c rows a chain, each row k
// whole lines of positions) straight from registers, at any offset within a line: each tile's lines are
// made as in gather_lines, and each line of dst is the end of the vector before it in its row or chain
// and the start of its own (one permute), stored a whole line at a time around the cache. Only the two
// partial lines at each chain's ends are stored plainly (masked). `run` tiles, src `s_step` and dst
// `d_step` words apart. Before, into NumPy's out= (16 bytes into a line), each tile's row left two
// partial lines, and such programs were stored plainly: DepthToSpace depth_first NHWC float32, 2 x 2
// blocks, in turns, 16 output channels (64 MiB) 1.12x the copy floor -> 0.67x.
template <int W, int B>
__attribute__((target("avx512f"))) DM_NOINLINE void chained_lines(const char* src, char* dst, const int64_t* at, int64_t c,
                                                                  int64_t k, int64_t run, int64_t s_step, int64_t d_step) {
    constexpr int H = W / 4;  // 32-bit lanes a word
    __m512i pick[B], then[B];
    load_line_permutes<H, B>(pick, then);
    const Shifted sh = shifted(dst + at[0] * W);  // (every chain at the same offset into a line)
    __m512i prev[B], first[B];  // each row's last vector so far; its first (stored once the row before ends)
    for (int64_t m = 0; m < run; ++m) {
        for (int64_t l = 0; l < k; ++l) {
            const char* in = src + m * s_step * W + l * B * kLine;
            __m512i z[B];
            for (int v = 0; v < B; ++v) {
                _mm_prefetch(in + 64 * v + kLinesAhead, _MM_HINT_T0);
                z[v] = _mm512_loadu_si512(in + 64 * v);
            }
            for (int j = 0; j < B; ++j) {
                const __m512i line = line_of<B>(z, pick, then, j);
                char* o = dst + (m * d_step + at[j]) * W + l * kLine - sh.p;  // the line this vector starts in
                if (l) {
                    shifted_line(o, sh, prev[j], line);
                } else if (j % c) {
                    first[j] = line;  // (the row before in its chain is not yet made)
                } else if (m) {
                    shifted_line(o, sh, prev[j + c - 1], line);
                } else {
                    shifted_first(o, sh, line);
                }
                prev[j] = line;
            }
        }
        for (int j = 1; j < B; ++j)
            if (j % c) shifted_line(dst + (m * d_step + at[j]) * W - sh.p, sh, prev[j - 1], first[j]);
    }
    if (run > 0)  // each chain's last line
        for (int j = c - 1; j < B; j += c) shifted_last(dst + ((run - 1) * d_step + at[j] + k * (kLine / W)) * W - sh.p, sh, prev[j]);
}
#endif

#if DM_HAVE_AVX2
// chained_lines without AVX-512: each tile's lines made as in gather_lines_avx2 (two 32-byte vectors a row),
// each 32 bytes of dst the end of the vector before it in its row or chain and the start of its own (a
// blend and a permute), streamed 32 bytes a store; the two partial vectors at each
// chain's ends stored plainly (masked). On the 2-core AMD EPYC (AVX2), DepthToSpace depth_first NHWC
// float32 with 2 x 2 blocks, 128 MiB into NumPy's out=, two threads, same process, in turns against a
// streaming copy, stored plainly (as before) -> this way: 64 output channels 1.73x -> 1.03x, 16 channels
// 1.47x -> 1.05x.
template <int W, int B>
DM_AVX2 DM_NOINLINE __attribute__((flatten)) void chained_lines_avx2(const char* src, char* dst, const int64_t* at, int64_t c,
                                                                     int64_t k, int64_t run, int64_t s_step, int64_t d_step) {
    const Apart<W, B> apart;
    // every row starts p lanes past 32 bytes; the 32 bytes at a vector's start - p lanes: the end of the
    // vector before it (lanes 8 - p..) then its own start
    const int p = (int)((reinterpret_cast<uintptr_t>(dst + at[0] * W) & 31) / 4);
    const int64_t back = 4 * p;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i from_prev = _mm256_cmpgt_epi32(lane, _mm256_set1_epi32(7 - p));
    const __m256i turn = _mm256_and_si256(_mm256_add_epi32(lane, _mm256_set1_epi32(8 - p)), _mm256_set1_epi32(7));
    const __m256i head = _mm256_cmpgt_epi32(lane, _mm256_set1_epi32(p - 1)), tail = _mm256_cmpgt_epi32(_mm256_set1_epi32(p), lane);
    auto joined = [&](__m256i prev, __m256i v) DM_AVX2 { return _mm256_permutevar8x32_epi32(_mm256_blendv_epi8(v, prev, from_prev), turn); };
    auto put = [&](char* o, __m256i prev, __m256i v) DM_AVX2 { _mm256_stream_si256(reinterpret_cast<__m256i*>(o), joined(prev, v)); };
    __m256i prev[B], first[B];  // each row's last vector so far; its first (stored once the row before ends)
    for (int64_t m = 0; m < run; ++m) {
        for (int64_t l = 0; l < k; ++l) {
            const char* in = src + m * s_step * W + l * B * kLine;
            __m256i z[2 * B];
            for (int v = 0; v < B; ++v) _mm_prefetch(in + 64 * v + kLinesAhead, _MM_HINT_T0);
            for (int v = 0; v < 2 * B; ++v) z[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 32 * v));
            __m256i out[2][B];
            apart.line(z, out);
            for (int j = 0; j < B; ++j) {
                char* o = dst + (m * d_step + at[j]) * W + l * kLine - back;  // the 32 bytes its first vector starts in
                if (l) {
                    put(o, prev[j], out[0][j]);
                } else if (j % c) {
                    first[j] = out[0][j];  // (the row before in its chain is not yet made)
                } else if (m) {
                    put(o, prev[j + c - 1], out[0][j]);
                } else {
                    _mm256_maskstore_epi32(reinterpret_cast<int*>(o), head, joined(out[0][j], out[0][j]));
                }
                put(o + 32, out[0][j], out[1][j]);
                prev[j] = out[1][j];
            }
        }
        for (int j = 1; j < B; ++j)
            if (j % c) put(dst + (m * d_step + at[j]) * W - back, prev[j - 1], first[j]);
    }
    if (run > 0 && p)  // each chain's last 32 bytes: the end of its last vector
        for (int j = c - 1; j < B; j += c)
            _mm256_maskstore_epi32(reinterpret_cast<int*>(dst + ((run - 1) * d_step + at[j] + k * (kLine / W)) * W - back), tail,
                                   joined(prev[j], prev[j]));
}
#endif

// Whether a STRIDED step's tiles can be gathered a line at a time by the CPU's gather instruction
// (strided_lines): 4- or 8-byte words, positions next to each other in dst and read at a stride, a
// tile's rows next to each other and the next tile's after them (DepthToSpace depth_first NHWC with
// blocks of 3 or more: a block row's pixels, each a pixel's channels read b * b words apart), rows of a
// line or more by whole lines or a line of whole rows, a tile of whole lines.
inline bool strided_fits(const Step& st) {
#if DM_HAVE_AVX512
    const int64_t W = st.word, n = st.l0.n, L = W ? kLine / W : 0;
    if (!kAvx512 || st.pattern != STRIDED || !st.nouter || (W != 4 && W != 8) || st.l0.d != 1 || n < 1 ||
        (n % L && L % n) || st.l1.d != n || st.l1.n * n % L || st.outer[st.nouter - 1].d != st.l1.n * n)
        return false;
    // a vector's lane offsets fit the instruction's 32-bit indices, in bytes for words of up to 8
    constexpr int64_t kIndexWords = (int64_t(1) << 31) / 8;
    return (L - 1) * (std::abs(st.l1.s) + std::abs(st.l0.s)) < kIndexWords;
#else
    (void)st;
    return false;
#endif
}

#if DM_HAVE_AVX512
// A run of STRIDED tiles (strided_fits) a line at a time: each line of the output gathered by one
// gather instruction (lane k: row k / n, position k % n from the line's first word), stored plainly or,
// streamed, shifted to dst's lines as in chained_lines (the run's output is one piece). Word by word, the
// compiler's loop for DepthToSpace depth_first NHWC with 4 x 4 blocks took 2.2-3.0x the copy floor.
template <int W, bool NT>
__attribute__((target("avx512f"))) DM_NOINLINE void strided_lines(const char* src, char* dst, int64_t rows, int64_t s1, int64_t n,
                                                                  int64_t s0, int64_t run, int64_t s_step) {
    constexpr int L = kLine / W;  // words a line
    const int64_t per = rows * n / L;  // lines a tile
    const __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    __m512i idx;  // lane k's offset in words from the line's first word
    if (n >= L) {
        idx = _mm512_mullo_epi32(iota, _mm512_set1_epi32((int32_t)s0));
    } else {  // n divides L: a power of two
        const __m512i row = _mm512_srl_epi32(iota, _mm_cvtsi32_si128(__builtin_ctzll(n)));
        const __m512i pos = _mm512_and_si512(iota, _mm512_set1_epi32((int32_t)(n - 1)));
        idx = _mm512_add_epi32(_mm512_mullo_epi32(row, _mm512_set1_epi32((int32_t)s1)),
                               _mm512_mullo_epi32(pos, _mm512_set1_epi32((int32_t)s0)));
    }
    const Shifted sh = shifted(NT ? dst : nullptr);  // (plainly: on a line, unshifted)
    __m512i prev = _mm512_setzero_si512();
    char* o = dst - sh.p;
    for (int64_t m = 0; m < run; ++m) {
        const char* tile = src + m * s_step * W;
        for (int64_t v = 0, j = 0, c = 0; v < per; ++v, o += kLine) {
            const char* at = tile + (j * s1 + c * s0) * W;
            __m512i vec;
            if constexpr (W == 4) vec = _mm512_i32gather_epi32(idx, at, 4);
            else vec = _mm512_i32gather_epi64(_mm512_castsi512_si256(idx), at, 8);
            if (n >= L) {
                if ((c += L) == n) c = 0, ++j;
            } else {
                j += L / n;
            }
            put_shifted<NT>(o, sh, prev, vec, !m && !v);
            prev = vec;
        }
    }
    if (NT && run > 0) shifted_last(o, sh, prev);
}
#endif

// The input offsets of a dense block of output words (table_run: table_lines, or table_words where the
// CPU has no AVX-512F): a step whose tile (with one or two loops outside it, or a tile's row alone:
// `outer`) fills `unit` output words, every one once, with the loop outside that going on where the unit
// stopped. STRIDED tiles (SpaceToDepth depth_first NHWC: a
// pixel's channels, block rows and columns; DepthToSpace depth_first NHWC, blocks of 3 with a few
// channels); block tiles under 64 bytes a row of 3 rows, or of 3, 5, 6 or 7 positions (pixels of 3
// channels, a 3 x 3 block's 3 pixels: the SIMD block bodies take 2 or 4 rows of powers of two), and
// streamed gathers of such short rows of any size; copies of pixels of 1-3 channels. `at[r]` is word r's
// input offset, and the `words` after the unit's `unit` those of the next one (extend_table).
constexpr int kTableWords = 1024;
// A table of units around the tile (outer 4) or of a merged program (merge_units): small images, up to
// 64 x 64 float32 pixels.
constexpr int kMergedWords = 4096;
struct Table {
    int64_t words, unit, units, step;  // step: the input offset from one unit to the next
    bool zeros;   // some words are zeros (at[r] == kZeroWord: SpaceToBatch's pads)
    bool runs;    // most of its lines are runs of the input (given_tables: channels-last pixels of 64 bytes or more)
    int outer;  // 0: a tile a unit, the loop outside going on; 1: the loop outside too, the next one going
                // on; 2: the second loop outside too, the first going on (the input read row by row);
                // 3: a tile's row a unit, each row of a run of tiles a piece of its own (rows far apart);
                // 4: the `around` loops outside too (1 or more), the next one going on (many small images)
    int around;   // outer 4: the loops outside the tile in a unit
    int64_t per;  // outer 4: the step's rows in a unit (the around loops' counts multiplied)
    int32_t* at;  // the words (`words` of them, and kTableSlack after): an OwnTable's own, or given_tables'
};
// Words a table holds past its last (a line's lanes read from any word of it stay inside).
constexpr int kTableSlack = 16;
// A table with words of its own, up to kMergedWords: a thread's (table_of) and merge_units'.
struct OwnTable : Table {
    int32_t own[kMergedWords + kTableSlack];
    OwnTable() : Table() { at = own; }
    OwnTable(const OwnTable&) = delete;
    OwnTable& operator=(const OwnTable&) = delete;
};

// A table's last words: at[unit + k] = at[k] + step for k < L, so a line's lanes read straight on into the
// next unit (table_lines); a table then needs its unit's words and a line's more, not a line's worth of
// units (a unit of 441 words, a 21 x 21 image: 16 units, 7056 words).
inline void extend_table(Table* t, int64_t unit, int64_t step, int64_t L) {
    bool zeros = false;
    for (int64_t k = 0; k < unit; ++k) zeros |= t->at[k] == kZeroWord;
    for (int64_t k = 0; k < L; ++k) t->at[unit + k] = t->at[k] == kZeroWord ? kZeroWord : (int32_t)(t->at[k] + step);
    t->words = unit + L, t->unit = unit, t->units = 1, t->step = step, t->zeros = zeros, t->runs = false;
}

// A thread's tables, on the heap (16 KiB: on the stack, with the tiles' frames, it overflowed the 32 KiB
// that threading.stack_size allows): slot 0 the one the checks before a job fill (table_of without a
// table), slot 1 + s step s's of a program the thread runs once (choose), kept for its next program. Null
// when memory is short (no table then).
struct TableSlots {
    OwnTable** t = nullptr;
    int n = 0;
    ~TableSlots() {
        for (int k = 0; k < n; ++k) delete t[k];
        delete[] t;
    }
};

inline Table* thread_table(int slot = 0) {
    static thread_local TableSlots mine;
    if (slot < 0 || slot > kMaxSteps) return nullptr;
    if (slot >= mine.n) {  // (grown to the program's steps, a few as a rule)
        const int n = std::max(slot + 1, 2 * mine.n);
        OwnTable** t = new (std::nothrow) OwnTable*[n]();
        if (t == nullptr) return nullptr;
        std::copy(mine.t, mine.t + mine.n, t);
        delete[] mine.t;
        mine.t = t, mine.n = n;
    }
    if (!mine.t[slot]) mine.t[slot] = new (std::nothrow) OwnTable;
    return mine.t[slot];
}

// Each word of a step's tiles under its loops from `from` on (those before it at their first index): its
// output and input offsets from the step's first word, to `f`; false (stopping) where the step is no copy
// of words (zeros: no table) or `f` says so.
template <typename F>
inline bool each_word(const Step& st, int from, F f) {
    if (st.pattern == FILL || st.pattern == GATHER_WINDOW) return false;
    const int64_t R = st.l1.n, n = st.l0.n, size = st.block ? st.block : st.l1.n;
    int64_t index[kMaxLoops] = {0}, in0 = 0, out0 = 0, rows = 1;
    for (int k = from; k < st.nouter; ++k) rows *= st.outer[k].n;
    for (int64_t row = 0; row < rows; ++row) {
        for (int64_t j = 0; j < R; ++j)
            for (int64_t i = 0; i < n; ++i) {
                int64_t out, in;
                if (st.pattern == SCATTER_WINDOW) {  // position t of the window row, kept in [lo, hi)
                    const int64_t t = i * size + j;
                    if (t < st.lo || t >= st.hi) continue;
                    out = out0 + t, in = in0 + j * st.l1.s + i * st.l0.s;
                } else {
                    const int64_t row_in = st.pattern == GATHER ? j : st.pattern == SCATTER ? st.at[j] : j * st.l1.s;
                    const int64_t row_out = st.pattern == GATHER ? st.at[j] : st.pattern == SCATTER ? j : j * st.l1.d;
                    out = out0 + row_out + i * st.l0.d, in = in0 + row_in + i * st.l0.s;
                }
                if (!f(out, in)) return false;
            }
        for (int k = st.nouter - 1; k >= from; --k) {
            in0 += st.outer[k].s, out0 += st.outer[k].d;
            if (++index[k] < st.outer[k].n) break;
            in0 -= st.outer[k].n * st.outer[k].s, out0 -= st.outer[k].n * st.outer[k].d, index[k] = 0;
        }
    }
    return true;
}

// Units of the `m` loops innermost of a step's outer loops and its tile (outer 4): whether they fill a dense
// block of at most kTableWords output words, each unit going on from the one before in the loop outside
// them; the words a run of them writes (that loop's count times the unit), 0 where they do not. t filled.
inline int64_t units_around(const Step& st, int m, Table* t, bool fill = true) {
    const int64_t W = st.word, n = st.l0.n, R = st.l1.n, L = kLine / W;
    if (m < 1 || st.nouter < m + 1) return 0;
    const Loop* around = st.outer + st.nouter - m;
    const Loop on = st.outer[st.nouter - m - 1];
    int64_t per = 1;
    for (int k = 0; k < m; ++k) per *= around[k].n;
    const int64_t unit = per * R * n;
    if (unit > kMergedWords || unit < 1 || on.d != unit || on.n < 2) return 0;
    if (!fill) return on.n * unit;  // (what a run of them writes, if they are dense)
    const int64_t units = (L + unit - 1) / unit + 1;  // (the units a table's words reach into, for the range check)
    std::fill(t->at, t->at + unit, INT32_MIN);
    const bool dense = each_word(st, st.nouter - m, [&](int64_t out, int64_t in) {
        if (out < 0 || out >= unit || t->at[out] != INT32_MIN || std::abs(in) + (units - 1) * std::abs(on.s) >= kTableReach)
            return false;
        t->at[out] = (int32_t)in;
        return true;
    });
    if (!dense) return 0;
    // (every output offset written once: unit words, each in range and new)
    extend_table(t, unit, on.s, L);
    t->outer = 4, t->around = m, t->per = per;
    return on.n * unit;
}

// The longest tile row (bytes, not reached) whose units go by a table: under a line where the CPU's
// gather instruction reads the table (table_lines); a word at a time (table_words), under 24 bytes: the
// tiles of longer rows, as the SIMD bodies run them, were as fast or faster (the 2-core Intel Xeon built
// without AVX-512, NCHW float32 small images, 12-48 MiB: DepthToSpace of 4 x 4 images, 16-byte rows,
// 2.35x -> 1.48x the copy floor by the table; of 7 x 7, 28-byte rows, 1.33x -> 1.51x; of 14 x 14,
// 1.10x -> 1.80x).
inline int64_t table_rows_under() {
#if DM_HAVE_AVX512
    if (kAvx512) return kLine;
#endif
    return 24;
}

// The modes 0-3 of table_of: the words a run of units writes, 0 where the step has no such table.
inline int64_t table_modes(const Step& st, Table* t, bool streamed) {
    const int64_t W = st.word, n = st.l0.n, R = st.l1.n, under = table_rows_under();
    const bool block = st.pattern == GATHER || st.pattern == SCATTER;
    // (blocks of 2 or 4 rows of 1, 2, 4 or 8 positions keep scatter_run's pixels, and the SIMD block bodies
    // where stored plainly: streamed, SpaceToDepth depth_first NHWC 4 x 4 with 4 channels, 64 MiB, 1.55x ->
    // 0.85x the copy floor by the table, but plainly, 8 MiB, 0.67x -> 1.07x; rows of whole 16-byte groups,
    // the copies)
    if (st.pattern == CONTIGUOUS) {
        if (st.l0.s != 1 || st.l0.d != 1 || n * W >= under || n * W % 16 == 0) return false;
    } else if (block ? (n * W >= under || (st.block != 3 && (n & (n - 1)) == 0 && (st.pattern == SCATTER || !streamed)) || st.block != R)
                     : (st.pattern != STRIDED || strided_fits(st))) {
        return false;
    }
    const int64_t L = kLine / W;
    for (int outer = 0; outer < 4; ++outer) {
        if (st.nouter < 1 + (outer == 1 || outer == 2)) return false;
        if (outer == 3 && (block || R < 2)) break;  // (the rows' offsets: l1's)
        const Loop around = outer == 1 || outer == 2 ? st.outer[st.nouter - (outer == 1 ? 1 : 2)] : Loop{1, 0, 0};
        const Loop on = st.outer[st.nouter - (outer == 1 ? 2 : 1)];  // the loop the units go on in
        const int64_t rows = outer == 3 ? 1 : R;
        const int64_t unit = around.n * rows * n;
        if (unit > kTableWords || on.d != unit || on.n < 2) continue;
        const int64_t units = (L + unit - 1) / unit + 1;  // (the units a table's words reach into)
        // each word's input offset, by its output offset; dense: every output offset of the unit once
        std::fill(t->at, t->at + unit, INT32_MIN);
        int64_t filled = 0;
        bool dense = true;
        for (int64_t k = 0; k < around.n && dense; ++k)
            for (int64_t j = 0; j < rows && dense; ++j) {
                const int64_t row_in = st.pattern == GATHER ? j : st.pattern == SCATTER ? st.at[j] : j * st.l1.s;
                const int64_t row_out = st.pattern == GATHER ? st.at[j] : st.pattern == SCATTER ? j : j * st.l1.d;
                for (int64_t i = 0; i < n; ++i) {
                    const int64_t out = k * around.d + row_out + i * st.l0.d, in = k * around.s + row_in + i * st.l0.s;
                    if (out < 0 || out >= unit || t->at[out] != INT32_MIN || std::abs(in) + (units - 1) * std::abs(on.s) >= kTableReach) {
                        dense = false;
                        break;
                    }
                    t->at[out] = (int32_t)in;
                    ++filled;
                }
            }
        if (!dense || filled != unit) continue;
        extend_table(t, unit, on.s, L);
        t->outer = outer;
        return on.n * unit;
    }
    return 0;
}

// Whether a step's units make a table (see Table), filled when `tab` is given.
inline bool table_of(const Step& st, Table* tab, bool streamed = true) {
    if (st.table) return true;  // a UNITS step's own (merge_units, given_tables), run by run_units from it
    const int64_t W = st.word, n = st.l0.n, R = st.l1.n;
    const bool block = st.pattern == GATHER || st.pattern == SCATTER;
    if ((W != 4 && W != 8) || n < 1 || R < 1 || R > 4096) return false;
    Table* t = tab ? tab : thread_table();
    if (!t) return false;
    // Units of loops around the tile (outer 4, up to kMergedWords): taken where the tiles come in runs under 1 KiB
    // (the loop around them short: small images) and the units' runs are 4 times the longest of the modes
    // below, or those refuse the step. (NCHW DepthToSpace of 2 x 2 images, 12 MiB: tile by tile, 64 bytes
    // each, 3.9x the copy floor; by the table 0.8x. Channels-last DepthToSpace of 64-pixel rows, 16
    // channels, runs of 2 KiB: scatter_run's pixels 0.87-1.01x, the table 0.95-1.06x.)
    // (plainly, block tiles whose rows are 16-byte groups, two or more, run all their rows under two loops
    // at once in the SIMD bodies: gather_rows_run, scatter_rows_run. SpaceToDepth blocks_first of 16 x 16
    // images, rows of 32 bytes, at 1-4 MiB: 0.48-0.71x the copy floor by those, 1.12-1.85x by a table of
    // 4096 words; DepthToSpace blocks_first of 7 x 7 images, rows of 28 bytes: 2.01x by those, 0.87x
    // by the table)
    const bool bodies = !streamed && block && n * W % 16 == 0 && n * W >= 32 && st.nouter >= 2;
    const int64_t run = (st.nouter ? st.outer[st.nouter - 1].n : 1) * R * n * W * (bodies ? st.outer[st.nouter - 2].n : 1);
    const int64_t under = table_rows_under();
    const bool rows_fit = run < 1024 &&
                          (st.pattern == CONTIGUOUS ? st.l0.s == 1 && st.l0.d == 1 && n * W < under
                           : block ? n * W < under && st.block == R : st.pattern == STRIDED && !strided_fits(st));
    // (each candidate's run from its loops' counts; the table filled only for the longest, and the next
    // longest where it is not dense: each fill writes up to 4096 words, and a call of 128 KiB takes a few us)
    int64_t spans[7] = {0};
    for (int m = 1; rows_fit && m < st.nouter && m <= 6; ++m) spans[m] = units_around(st, m, t, false);
    const int64_t shorter = table_modes(st, t, streamed);
    for (bool refill = false;;) {
        int best = 0;
        for (int m = 1; m <= 6; ++m)
            if (spans[m] > spans[best]) best = m;
        if (!best || spans[best] < 4 * shorter) return shorter > 0 && (!refill || table_modes(st, t, streamed) > 0);
        if (units_around(st, best, t) > 0) return true;
        spans[best] = 0, refill = true;  // (not dense; its fill overwrote the modes' table)
    }
}


#if DM_HAVE_AVX512
// `count` units of a Table from src into dst, whose words follow each other: a line at a time by the
// gather instruction (lane offsets from the table), stored plainly or streamed as strided_lines does; the
// words after the last whole line one at a time, plainly. Word by word, SpaceToDepth depth_first NHWC
// with 3 x 3 and 4 x 4 blocks took 1.5-2.6x the copy floor.
// Z: the table has zeros (kZeroWord): their lanes masked off the gather, left zero. C: its lines are mostly
// runs of the input (Table::runs): each line whose offsets go up by one is a plain load, not a gather.
// (Channels-last BatchToSpace of 2 x 2 to 7 x 7 images with crops, a unit from tables: in turns, median
// 1.15x -> 0.89x the copy floor over 24 cases. Checked on every table, DepthToSpace NHWC of small images
// went 0.57-0.82x -> 0.96-1.41x: only the tables given in a program where most lines are runs check.)
template <int W, bool NT, bool Z, bool C>
__attribute__((target("avx512f"))) DM_NOINLINE void table_lines(const char* src, char* dst, const Table& tab, int64_t count) {
    constexpr int L = kLine / W;
    // (read once: the stores below could alias a Table's members as far as the compiler knows)
    const int32_t* const table = tab.at;
    const int64_t unit = tab.unit, step = tab.step;
    const int64_t total = count * unit, whole = total / L * L;
    const Shifted sh = shifted(NT ? dst : nullptr);  // (plainly: on a line, unshifted)
    __m512i prev = _mm512_setzero_si512();
    const __m512i zero_word = _mm512_set1_epi32(kZeroWord);
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    char* o = dst - sh.p;
    const char* base = src;
    for (int64_t u = 0, r = 0; u < whole; u += L, o += kLine) {
        __m512i vec;
        if constexpr (W == 4) {
            const __m512i at = _mm512_loadu_si512(table + r);
            if (C && _mm512_cmpneq_epi32_mask(at, _mm512_add_epi32(_mm512_set1_epi32(table[r]), iota)) == 0)
                vec = _mm512_loadu_si512(base + (int64_t)table[r] * 4);
            else if constexpr (Z)
                vec = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), _mm512_cmpneq_epi32_mask(at, zero_word), at, base, 4);
            else
                vec = _mm512_i32gather_epi32(at, base, 4);
        } else {
            const __m256i at = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(table + r));
            if (C && (_mm512_cmpneq_epi32_mask(_mm512_castsi256_si512(at), _mm512_add_epi32(_mm512_set1_epi32(table[r]), iota)) & 0xFF) == 0)
                vec = _mm512_loadu_si512(base + (int64_t)table[r] * 8);
            else if constexpr (Z)
                vec = _mm512_mask_i32gather_epi64(_mm512_setzero_si512(),
                                                  (__mmask8)(_mm512_cmpneq_epi32_mask(_mm512_castsi256_si512(at), zero_word) & 0xFF),
                                                  at, base, 8);
            else
                vec = _mm512_i32gather_epi64(at, base, 8);
        }
        for (r += L; r >= unit; r -= unit) base += step * W;
        put_shifted<NT>(o, sh, prev, vec, !u);
        prev = vec;
    }
    if (NT && whole) shifted_last(o, sh, prev);
    for (int64_t u = whole; u < total; ++u) {
        const int32_t at = table[u % unit];
        if (Z && at == kZeroWord) std::memset(dst + u * W, 0, W);
        else std::memcpy(dst + u * W, src + ((u / unit) * step + at) * W, W);
    }
}
#endif

// `count` units of a Table from src into dst, whose words follow each other, where the CPU has no
// AVX-512F (AVX2, aarch64, any other): a word at a time, a unit's words in one loop; streamed, 16 bytes a
// streaming store from registers (the table's words past its unit let a store's words read on into the
// next unit), the words before dst's first 16 bytes and after its last as 4-byte ones. (Through an L1
// buffer of 1 KiB chunks, SpaceToDepth blocks_first of 16 x 16 images, 48 MiB, streamed took 1.68x the
// copy floor, plainly 1.09x; from registers, streamed, 1.45x: the 4-byte stores into the buffer likely
// stalled its 16-byte loads.) On the 2-core Intel Xeon built without AVX-512, the 126 NCHW float32
// small-image cases of 12-48 MiB (see Table), in turns: a median of 1.69x the copy floor tile by tile,
// 1.28x by this loop (56 -> 19 cases over 2x; DepthToSpace of 2 x 2 images 5.55x -> 1.32x,
// BatchToSpace with crops of 4 x 4 3.78x -> 1.23x).
template <int W, bool NT, bool Z>
DM_NOINLINE void table_words(const char* src, char* dst, const Table& tab, int64_t count) {
    using Word = std::conditional_t<W == 4, uint32_t, uint64_t>;
    const int64_t unit = tab.unit, step = tab.step * W, total = count * unit;
    const int32_t* const at = tab.at;
    static const Word none = 0;
    // (a zero word's load from `none`, not a branch)
    const auto word = [&](int32_t a) { return Z && a == kZeroWord ? reinterpret_cast<const char*>(&none) : src + (int64_t)a * W; };
#if DM_HAVE_STREAM
    if (NT && reinterpret_cast<uintptr_t>(dst) % W == 0) {
        constexpr int64_t G = 16 / W;  // words a store
        int64_t u = 0, r = 0;  // the next word, and its place in its unit (r + k, k < G, reads on past it)
        const auto next = [&](int64_t k) {
            for (r += k; r >= unit; r -= unit) src += step;
        };
        const auto one = [&]() {  // the word u, streamed as 4-byte words
            for (int k = 0; k < W; k += 4) stream4(dst + u * W + k, word(at[r]) + k);
            next(1);
        };
        for (; u < total && reinterpret_cast<uintptr_t>(dst + u * W) % 16; ++u) one();
        for (; u + G <= total; u += G) {
            __m128i v;
            if constexpr (W == 4) {
                uint32_t w[4];
                for (int k = 0; k < 4; ++k) std::memcpy(&w[k], word(at[r + k]), 4);
                v = _mm_set_epi32((int)w[3], (int)w[2], (int)w[1], (int)w[0]);
            } else {
                long long w[2];
                for (int k = 0; k < 2; ++k) std::memcpy(&w[k], word(at[r + k]), 8);
                v = _mm_set_epi64x(w[1], w[0]);
            }
            _mm_stream_si128(reinterpret_cast<__m128i*>(dst + u * W), v);
            next(G);
        }
        for (; u < total; ++u) one();
        return;
    }
#endif
    for (int64_t c = 0; c < count; ++c, src += step, dst += unit * W)
        for (int64_t k = 0; k < unit; ++k) {
            Word v;
            std::memcpy(&v, word(at[k]), W);
            std::memcpy(dst + k * W, &v, W);
        }
    (void)total;
}

// `count` units of a table from src + a into dst + b: table_lines where the CPU has AVX-512F, else
// table_words.
template <typename T, bool NT>
inline void table_run(const T* src, T* dst, int64_t a, int64_t b, const Table& tab, int64_t count) {
    if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
        const char* from = reinterpret_cast<const char*>(src + a);
        char* to = reinterpret_cast<char*>(dst + b);
#if DM_HAVE_AVX512
        if (kAvx512) {
            constexpr int W = sizeof(T);
            if (tab.runs) return tab.zeros ? table_lines<W, NT, true, true>(from, to, tab, count) : table_lines<W, NT, false, true>(from, to, tab, count);
            return tab.zeros ? table_lines<W, NT, true, false>(from, to, tab, count) : table_lines<W, NT, false, false>(from, to, tab, count);
        }
#endif
        tab.zeros ? table_words<sizeof(T), NT, true>(from, to, tab, count) : table_words<sizeof(T), NT, false>(from, to, tab, count);
    }
    (void)src, (void)dst, (void)a, (void)b, (void)tab, (void)count;
}

// A run of STRIDED tiles a line at a time (strided_lines): whether it took them.
template <typename T, bool NT>
inline bool strided_run(const T* src, T* dst, int64_t a, int64_t b, int64_t run, const Loop& inner, const Step& st) {
#if DM_HAVE_AVX512
    if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
        char* to = reinterpret_cast<char*>(dst + b);
        if (NT && reinterpret_cast<uintptr_t>(to) % 4) return false;
        strided_lines<sizeof(T), NT>(reinterpret_cast<const char*>(src + a), to, st.l1.n, st.l1.s, st.l0.n, st.l0.s, run, inner.s);
        return true;
    }
#endif
    (void)src, (void)dst, (void)a, (void)b, (void)run, (void)inner, (void)st;
    return false;
}

// A streamed run of chained gather tiles (chained_rows) from registers: whether it took them.
template <typename T, int B>
inline bool gathers_chains(const T* src, T* dst, int64_t a, int64_t b, int64_t run, const Loop& inner, const Step& st) {
#if DM_HAVE_AVX512 || DM_HAVE_AVX2
    if constexpr (sizeof(T) >= 4 && sizeof(T) <= 16 && B >= 2 && B <= 4)
        if (const int64_t c = chained_rows(st)) {
            const char* from = reinterpret_cast<const char*>(src + a);
            char* to = reinterpret_cast<char*>(dst + b);
            if (reinterpret_cast<uintptr_t>(to + st.at[0] * sizeof(T)) % 4) return false;
            const int64_t k = st.l0.n * (int64_t)sizeof(T) / kLine;
#if DM_HAVE_AVX512
            if (kAvx512) return chained_lines<sizeof(T), B>(from, to, st.at, c, k, run, inner.s, inner.d), true;
#endif
#if DM_HAVE_AVX2
            if constexpr (sizeof(T) == 4 || sizeof(T) == 8)
                return chained_lines_avx2<sizeof(T), B>(from, to, st.at, c, k, run, inner.s, inner.d), true;
#endif
        }
#endif
    (void)src, (void)dst, (void)a, (void)b, (void)run, (void)inner, (void)st;
    return false;
}

#if DM_HAVE_STREAM
// A streamed run of gather tiles of W = 16-, 32-, 64- or 128-byte words (pixels of channels-last data:
// SpaceToBatch's windows, 4 to 32 float32 channels) straight from src to dst, 16 bytes a streaming store
// (16-byte pixels with AVX2: two a store, pixel_pairs), without AVX-512 (which shifts them to whole lines
// instead: gather_pixel_lines): a tile's part of each row in turn, a pixel at a time (zeros outside the window), so each row's stores go on in order and its
// lines fill whole but for one at either end of the part. Positions and tiles as in gather (runs of
// tiles, Steps, a side loop). dst's rows on 16 bytes (W16's alignment). Through the L1 buffer (chunks of
// 16 to 64 pixels, each row's put_lines), on the 2-core AMD EPYC (AVX2), same process, in turns, one
// thread, SpaceToBatch NHWC with pads, 64-126 MiB: 32 channels 3.06-3.45x the copy floor -> 1.09-1.14x,
// TensorFlow's 8 channels 3.36-3.76x -> 1.11-1.13x, 4 channels (plain stores before) 1.88x -> 1.27x; two
// threads, 32 channels 2.97x -> 1.11x.
#if DM_HAVE_AVX2
// Positions two at a time, each pair one 32-byte streaming store (out on 32 bytes): the first of a pair from
// `a`, the second from `b`, both `step` bytes further at each pair. Returns the positions written. A
// SCATTER<2> row of 16-byte words (a: the row of the first position, from its word; b: the other row, from
// the next position's word; step 16): scatter2_lines_from's AVX2 counterpart. gather_pixels' 16-byte pixels
// (b: the pixel after a's in its row; step two pixels): channels-last SpaceToBatch of 4 float32 channels
// with pads (``s2b short``), 65 MiB, at DATAMOVE_ISA=avx2 on the 2-core Intel Xeon, same process, in turns,
// 16-byte stores -> pairs: 1.25-1.26x the copy floor -> 1.13-1.17x.
DM_AVX2 DM_NOINLINE inline int64_t pixel_pairs(const char* a, const char* b, char* out, int64_t n, int64_t step = 16) {
    int64_t t = 0;
    for (; t + 2 <= n; t += 2, a += step, b += step) {
        const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
                                                  _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
        _mm256_stream_si256(reinterpret_cast<__m256i*>(out + t * 16), v);
    }
    return t;
}
#endif

template <int W, int B>
DM_NOINLINE void gather_pixels(const char* src, char* dst, const int64_t* at, int64_t n, int64_t runs, const Steps& step,
                               const Loop& side, const Bounds& w) {
    static_assert(W % 16 == 0, "whole 16-byte pieces");
    const __m128i zero = _mm_setzero_si128();
    TileAt tile;
    for (int64_t k = 0; k < runs; ++k, tile.next(step)) {
        for (int64_t m = 0; m < side.n; ++m) {
            const char* in = src + (tile.off + m * side.s) * W;
            for (int j = 0; j < B; ++j) {
                char* o = dst + (m * side.d + at[j] + k * n) * W;
                // the positions i whose t = i * B + j lies in the window: [i0, i1)
                const int64_t i0 = std::min(n, std::max<int64_t>(0, (w.lo - j + B - 1) / B));
                const int64_t i1 = std::max(i0, std::min(n, w.hi > j ? (w.hi - j + B - 1) / B : 0));
                for (int64_t i = 0; i < i0; ++i)
                    for (int q = 0; q < W; q += 16) _mm_stream_si128(reinterpret_cast<__m128i*>(o + i * W + q), zero);
                auto pixel = [&](int64_t i) {
                    const char* s = in + (i * B + j) * W;
                    for (int q = 0; q < W; q += 16)
                        _mm_stream_si128(reinterpret_cast<__m128i*>(o + i * W + q), _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + q)));
                };
                int64_t i = i0;
#if DM_HAVE_AVX2
                if (W == 16 && kAvx2) {  // two a 32-byte store from 32 bytes on (the first alone before)
                    if (i < i1 && reinterpret_cast<uintptr_t>(o + i * W) % 32) pixel(i++);
                    i += pixel_pairs(in + (i * B + j) * W, in + ((i + 1) * B + j) * W, o + i * W, i1 - i, 2 * B * W);
                }
#endif
                for (; i < i1; ++i) pixel(i);
                for (int64_t i = i1; i < n; ++i)
                    for (int q = 0; q < W; q += 16) _mm_stream_si128(reinterpret_cast<__m128i*>(o + i * W + q), zero);
            }
        }
    }
}

#endif

// A streamed gather (or gather window) a whole line at a time from registers, where the CPU and the rows
// allow it (lines_fit): whether it took the tiles.
template <typename T, int B>
inline bool gathers_lines(const T* src, T* dst, int64_t a, int64_t b, const Rows<B>& rows, int64_t n, int64_t runs,
                          const Steps& step, const Loop& side, const Step* window) {
#if DM_HAVE_STREAM
    if constexpr (sizeof(T) >= 16)
        if (kIsa < IsaAvx512f && window && reinterpret_cast<uintptr_t>(dst + b) % 16 == 0) {
            gather_pixels<sizeof(T), B>(reinterpret_cast<const char*>(src + a), reinterpret_cast<char*>(dst + b), rows.at, n, runs,
                                        step, side, Bounds{window->lo, window->hi});
            return true;
        }
#endif
#if DM_HAVE_AVX2
    if constexpr ((sizeof(T) == 4 || sizeof(T) == 8 || ((sizeof(T) == 1 || sizeof(T) == 2) && B != 3)) && B >= 2 && B <= 4)
        if ((kIsa < IsaAvx512f || (sizeof(T) <= 2 && !kAvx512Bytes)) &&
            lines_fit(sizeof(T), B, rows.at, n, side, window && padded_window(window->lo, window->hi, n, B))) {
            const Bounds w = window ? Bounds{window->lo, window->hi} : Bounds{0, n * B};
            gather_lines_avx2<sizeof(T), B>(reinterpret_cast<const char*>(src + a), reinterpret_cast<char*>(dst + b), rows.at, n,
                                            runs, step, side, w);
            return true;
        }
#endif
#if DM_HAVE_AVX512
    if constexpr (sizeof(T) >= 32)
        if (window && pixel_lines_fit(reinterpret_cast<const char*>(dst + b + rows.at[0]), sizeof(T), B, rows.at, side)) {
            const Bounds w{window->lo, window->hi};
            gather_pixel_lines<sizeof(T), B>(reinterpret_cast<const char*>(src + a), reinterpret_cast<char*>(dst + b), rows.at, n,
                                             runs, step, side, w);
            return true;
        }
    if constexpr (sizeof(T) <= 16)
        if (kAvx512 && lines_fit(sizeof(T), B, rows.at, n, side)) {
            const char* from = reinterpret_cast<const char*>(src + a);
            char* to = reinterpret_cast<char*>(dst + b);
            const Bounds w = window ? Bounds{window->lo, window->hi} : Bounds{0, n * B};
            if constexpr (sizeof(T) >= 4) {
                gather_lines<sizeof(T), B>(from, to, rows.at, n, runs, step, side, w);
            } else {
                if (!kAvx512Bytes) return false;  // (BW's and VBMI's permutes; AVX2's kernel took what it could above)
                gather_narrow_lines<sizeof(T), B>(from, to, rows.at, n, runs, step, side, w);
            }
            return true;
        }
#endif
    (void)src, (void)dst, (void)a, (void)b, (void)rows, (void)n, (void)runs, (void)step, (void)side, (void)window;
    return false;
}

// GATHER<B> over n positions: straight into dst, or through an L1 buffer streamed out. Streamed, it
// takes `runs` tiles at once whose rows go on in dst where the last one stopped (the loop around the
// tile steps dst by n and src by `step`): they fill the buffer together, so each output row is streamed
// as one run of lines, partial only at the run's two ends, which store plainly (put_lines: 5-D SpaceToDepth
// depth_first with block 3 into NumPy's own out=, 1.06-1.10x -> 1.00-1.02x). Tile by tile, a row not starting on a line
// (NumPy's own arrays start 16 bytes into one) left a partial line at every tile's ends, completed only
// after the other rows' stores: SpaceToDepth into such an out= ran 1.4-2x slower than into one on a line.
// `side`: a loop between the tile and the one its rows go on in (SpaceToDepth NCHW: the block's row
// offset, its input rows next to each other), its side.n * B rows buffered side by side.
// While a chunk streams out, the next chunk's input is prefetched: the buffer fills from memory and
// empties into it by turns, and without the prefetch the reads stopped while the stores ran.
// `window`: the tiles are a gather window's (SpaceToBatch NCHW with pads), their padding written too.
// Where the CPU has AVX-512 and the rows share their offset in a line (lines_fit), a streamed gather goes
// a whole line at a time from registers instead (gather_lines, gather_narrow_lines), windows included, and
// so do windows of 32- to 128-byte pixels, shifted (gather_pixel_lines).
template <typename T, int B, bool NT>
inline void gather(const T* src, T* dst, int64_t a, int64_t b, const Rows<B>& rows, int64_t n, char* scratch,
                   int64_t runs = 1, Steps step = Steps(), Loop side = Loop{1, 0, 0}, const Step* window = nullptr) {
    if (!NT) return gather_rows<T, B>(src, dst, a, b, rows, n);  // (windows come here streamed only)
    if (gathers_lines<T, B>(src, dst, a, b, rows, n, runs, step, side, window)) return;
    // A chunk of K positions a row, side.n * B rows: the buffer of B rows of kGatherChunkBytes shared among them
    T* buf = reinterpret_cast<T*>(scratch);
    const int64_t K = kGatherChunkBytes / side.n / kLine * kLine / (int64_t)sizeof(T);  // whole lines
    const Rows<B> packed(K);
    const int64_t total = n * runs;
    int64_t next = first_chunk(dst + b + rows.at[0], sizeof(T), 1, K, total);
    for (int64_t i0 = 0, k; i0 < total; i0 += k, next = K) {
        k = std::min(next, total - i0);
        for (int64_t p = i0, c; p < i0 + k; p += c) {  // the tiles' pieces in this chunk
            const int64_t tile = p / n, at = p - tile * n;
            c = std::min(n - at, i0 + k - p);
            for (int64_t m = 0; m < side.n; ++m) {
                const int64_t from = a + step.of(tile) + m * side.s;
                if (window)
                    gather_window_part<T, B>(src, buf + m * B * K, from, p - i0 - at, K, 1, B, at, at + c, window->first,
                                             window->last, window->lo, window->hi);
                else
                    gather_rows<T, B>(src, buf + m * B * K, from + at * B, p - i0, packed, c);
            }
        }
        Ahead ahead;  // the next chunk's input, asked for a share at a time between this chunk's stores
        for (int64_t p = i0 + k, c; p < std::min(total, i0 + k + K); p += c) {
            const int64_t tile = p / n, at = p - tile * n;
            c = std::min(n - at, i0 + k + K - p);
            for (int64_t m = 0; m < side.n; ++m) ahead.add(src + a + step.of(tile) + m * side.s + at * B, c * B * (int64_t)sizeof(T));
        }
        const int64_t share = (ahead.lines + side.n * B - 1) / (side.n * B);
        for (int64_t m = 0; m < side.n; ++m)
            for (int j = 0; j < B; ++j) {
                put_lines(reinterpret_cast<char*>(dst + b + m * side.d + rows.at[j] + i0),
                          reinterpret_cast<const char*>(buf + (m * B + j) * K), k * sizeof(T));
                ahead.ask(share);
            }
    }
}

#if DM_HAVE_STREAM
// out[k * B + j] <- in[j][k], k < 16 / W: the B rows' 16 bytes from `in`, interleaved in registers and
// stored at o (streamed when NT), for B = 2 or 4 rows of W = 4 or 8 bytes.
template <int W, int B, bool NT>
inline void interleave16(const char* const* in, int64_t at, __m128i* o) {
    __m128i r[B];
    for (int j = 0; j < B; ++j) r[j] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in[j] + at));
    auto put = [](__m128i* p, __m128i v) {
        if (NT) {
            _mm_stream_si128(p, v);
        } else {
            _mm_storeu_si128(p, v);
        }
    };
    if constexpr (B == 2) {
        put(o, unpack_lo<W>(r[0], r[1]));
        put(o + 1, unpack_hi<W>(r[0], r[1]));
    } else if constexpr (W == 4) {
        __m128 f[4];
        for (int k = 0; k < 4; ++k) f[k] = _mm_castsi128_ps(r[k]);
        _MM_TRANSPOSE4_PS(f[0], f[1], f[2], f[3]);
        for (int k = 0; k < 4; ++k) put(o + k, _mm_castps_si128(f[k]));
    } else {  // two positions of four 8-byte rows: (r0 r1) (r2 r3) of each
        put(o, _mm_unpacklo_epi64(r[0], r[1]));
        put(o + 1, _mm_unpacklo_epi64(r[2], r[3]));
        put(o + 2, _mm_unpackhi_epi64(r[0], r[1]));
        put(o + 3, _mm_unpackhi_epi64(r[2], r[3]));
    }
}
#endif

// Positions [t0, t1) of a streamed SCATTER<B> row of W-byte words (4 or 8), out[t] = in[t % B][t / B],
// straight from registers: the rows interleaved by unpacks and streamed 16 bytes at a time (blocks of 2,
// where the CPU has AVX-512F, two whole lines at a time: scatter2_lines), the few positions before the
// first block on 16 bytes and after the last as one-word streaming stores. False
// (nothing written) where no block starts on 16 bytes, or for B = 3.
// Through the L1 buffer (put_bytes) the row was stored twice, and the row's loads stopped while the
// buffer streamed out: BatchToSpace with crops, 512 MiB into np.empty, 1.30x the copy floor; straight
// from registers 1.09-1.13x (same process, 9 rounds).
// With a Carry, the partial lines at the row's ends join the thread's tiles before and after it: the
// line it starts in goes out whole where the carry holds the rest of it, and the line it ends in is held.
#if DM_HAVE_AVX512
// Blocks [i, ...) of a streamed SCATTER<2> row of W-byte words (4, 8 or 16), `out + i * 2 * W` on a line, two
// lines at a time while whole ones are left before block `end`: 64 bytes of each input row interleaved by
// two permutes and streamed as two 64-byte stores. Returns the first block not written. Against 16-byte
// unpacks and stores (2-core Intel Xeon, same process, in turns): DepthToSpace float32 128 MiB 0.80x ->
// 0.69x the copy floor, 512 MiB 1.23-1.29x -> 1.01-1.12x; float64 256 MiB 1.22x -> 0.97x; BatchToSpace
// with crops 512 MiB 1.25x -> 1.10x, 1 GiB 1.10x -> 1.03x.
template <int W>
__attribute__((target("avx512f"))) DM_NOINLINE int64_t scatter2_lines(const char* const in[2], char* out, int64_t i, int64_t end) {
    constexpr int64_t P = 64 / W;  // blocks of two lines
    const __m512i lo = W == 4   ? _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0)
                       : W == 8 ? _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0)
                                : _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);  // (16-byte words: pairs of 64-bit lanes)
    const __m512i hi = W == 4   ? _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8)
                       : W == 8 ? _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4)
                                : _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
    for (; i + P <= end; i += P) {
        const __m512i x = _mm512_loadu_si512(in[0] + i * W), y = _mm512_loadu_si512(in[1] + i * W);
        __m512i* o = reinterpret_cast<__m512i*>(out + i * 2 * W);
        if constexpr (W == 4) {
            _mm512_stream_si512(o, _mm512_permutex2var_epi32(x, lo, y));
            _mm512_stream_si512(o + 1, _mm512_permutex2var_epi32(x, hi, y));
        } else {
            _mm512_stream_si512(o, _mm512_permutex2var_epi64(x, lo, y));
            _mm512_stream_si512(o + 1, _mm512_permutex2var_epi64(x, hi, y));
        }
    }
    return i;
}
#endif

#if DM_HAVE_AVX512
// scatter2_lines from position t of a SCATTER<2> row on (out + t * W on a line), t odd or even: positions t + 2m
// and t + 2m + 1 are block m of the two rows shifted to start at t's word and the next position's. Returns the
// positions written (scatter_odd_span: 4-byte words a word off their blocks; scatter_pixel_span).
template <int W>
__attribute__((always_inline)) inline int64_t scatter2_lines_from(const char* const* in, char* out, int64_t t, int64_t t1) {
    const char* const rows[2] = {in[t % 2] + t / 2 * W, in[(t + 1) % 2] + (t + 1) / 2 * W};
    return 2 * scatter2_lines<W>(rows, out + t * W, 0, (t1 - t) / 2);
}
#endif

#if DM_HAVE_STREAM
// Positions [t0, t1) of a streamed SCATTER<2> row of 4-byte words whose blocks start 4 bytes past 8 (a crop
// of an odd number of words: no block starts on 16 bytes, so scatter_span's unpacks cannot be stored
// there): each 16 bytes on 16 bytes, from an odd position t = 2k + 1, is row 1's words k and k + 1 and row
// 0's k + 1 and k + 2, two 8-byte loads unpacked; the words before the first and after the last such 16
// bytes one at a time. Through the L1 buffer before (scatter_direct refused such rows): 5-D BatchToSpace
// with crops of 1 on W, 128 MiB into NumPy's out=, on the 2-core AMD EPYC (AVX2), two threads, same
// process, in turns against a streaming copy, 1.51x -> 1.03x.
// Where the CPU has AVX-512F, the whole lines between are scatter2_lines', on the two rows shifted by a
// word: 5-D BatchToSpace NCHW with crops of 1, 128 MiB, 2-core Intel Xeon, through the library, builds
// swapped between processes, 1.13x -> 1.04-1.05x the copy floor (in the L2: 80 -> 68 ns a KiB).
inline void scatter_odd_span(const char* const* in, char* out, int64_t t0, int64_t t1) {
    int64_t t = t0;
    for (; t < t1 && (reinterpret_cast<uintptr_t>(out) + 4 * t) % 16; ++t) stream4(out + 4 * t, in[t % 2] + t / 2 * 4);
    auto sixteen = [&](int64_t at) {  // (at odd: out + 4 at on 16 bytes)
        const int64_t k = at / 2;
        const __m128i one = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(in[1] + 4 * k));
        const __m128i zero = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(in[0] + 4 * (k + 1)));
        _mm_stream_si128(reinterpret_cast<__m128i*>(out + 4 * at), _mm_unpacklo_epi32(one, zero));
    };
#if DM_HAVE_AVX512
    if (kAvx512 && t1 - t >= 3 * 32) {
        for (; (reinterpret_cast<uintptr_t>(out) + 4 * t) % kLine; t += 4) sixteen(t);
        t += scatter2_lines_from<4>(in, out, t, t1);  // (t odd: row 1's words and row 0's from the next)
    }
#endif
    for (; t + 4 <= t1; t += 4) sixteen(t);
    for (; t < t1; ++t) stream4(out + 4 * t, in[t % 2] + t / 2 * 4);
}


// Positions [t0, t1) of a SCATTER<2> row of 16-byte words (out on 16 bytes), position t from row t % 2,
// word t / 2: each a 16-byte store (streamed when NT), and between them, where the CPU has AVX-512F, whole
// lines two at a time from registers (scatter2_lines_from), else where it has AVX2 pairs of positions, a 32-byte
// store each (pixel_pairs); scatter_direct takes no such row below AVX2. Channels-last BatchToSpace of 4
// float32 channels with crops, 64 MiB, 2-core Intel Xeon, same process, in turns, against the L1 buffer
// they went through before: [64,4,256,256] 1.21x -> 1.09x the copy floor, 5-D [32,4,32,64,64] (its edge
// pixels then steps of their own) 1.14-1.21x -> 0.96-0.98x; at DATAMOVE_ISA=avx2 1.07-1.14x -> 1.00-1.03x
// and 1.19x -> 0.88x (16-byte stores a position there instead: 1.13x -> 1.37x).
template <bool NT>
inline void scatter_pixel_span(const char* const* in, char* out, int64_t t0, int64_t t1) {
    auto one = [&](int64_t t) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in[t % 2] + t / 2 * 16));
        if (NT) {
            _mm_stream_si128(reinterpret_cast<__m128i*>(out + t * 16), v);
        } else {
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out + t * 16), v);
        }
    };
    int64_t t = t0;
#if DM_HAVE_AVX512
    if (NT && kAvx512 && t1 - t0 >= 12) {
        for (; (reinterpret_cast<uintptr_t>(out) + t * 16) % kLine; ++t) one(t);
        t += scatter2_lines_from<16>(in, out, t, t1);
    }
#endif
#if DM_HAVE_AVX2
    if (NT && kAvx2 && t1 - t >= 4) {  // (the rest of the row below AVX-512F, or its tail)
        if ((reinterpret_cast<uintptr_t>(out) + t * 16) % 32) one(t++);
        t += pixel_pairs(in[t % 2] + t / 2 * 16, in[(t + 1) % 2] + (t + 1) / 2 * 16, out + t * 16, t1 - t);
    }
#endif
    for (; t < t1; ++t) one(t);
}

template <int W, int B, bool NT>
inline void scatter_word_span(const char* const* in, char* out, int64_t t0, int64_t t1) {
    if constexpr (NT && W == 4 && B == 2)
        if (reinterpret_cast<uintptr_t>(out) % 8 == 4) return scatter_odd_span(in, out, t0, t1);
    constexpr int64_t P = 16 / W;  // positions in a 16-byte load
    auto one = [&](int64_t t) {
        const char* from = in[t % B] + t / B * W;
        if (!NT) {
            std::memcpy(out + t * W, from, W);
        } else if (W == 4) {
            stream4(out + t * W, from);
        } else {
            long long v;
            std::memcpy(&v, from, 8);
            _mm_stream_si64(reinterpret_cast<long long*>(out + t * W), v);
        }
    };
    // the first block at or after t0 that starts on 16 bytes; the body ends on a whole load
    int64_t body = (t0 + B - 1) / B;
    if ((reinterpret_cast<uintptr_t>(out) + body * B * W) % 16) ++body;  // (8-byte blocks from 8 bytes: the next one)
    const int64_t blocks = t1 / B;  // whole blocks end here
    for (int64_t t = t0; t < std::min(t1, body * B); ++t) one(t);
    int64_t i = body;
#if DM_HAVE_AVX512
    if constexpr (NT && B == 2) {
        if (kAvx512 && i + 3 * 64 / W <= blocks) {  // to a line (16-byte steps), then two lines a step
            if ((reinterpret_cast<uintptr_t>(out) + i * B * W) % 32) {  // 16 bytes, a word at a time
                for (int64_t t = i * B; t < (i + 16 / (B * W)) * B; ++t) one(t);
                i += 16 / (B * W);
            }
            if ((reinterpret_cast<uintptr_t>(out) + i * B * W) % 64) {
                interleave16<W, B, NT>(in, i * W, reinterpret_cast<__m128i*>(out + i * B * W));
                i += P;
            }
            i = scatter2_lines<W>(in, out, i, blocks);
        }
    }
#endif
    // Streamed 16-byte stores in pairs on 32 bytes: the first 16 bytes a word at a time where the body
    // starts 16 bytes past 32. On the 2-core AMD EPYC (AVX2), DepthToSpace NCHW float32 128 MiB into an
    // out= at each offset into a line, two threads, against a streaming copy in turns: 16 or 48 bytes in,
    // 1.45x (and no faster than one thread); 0 or 32, 0.99-1.00x.
    if constexpr (NT && 16 % (B * W) == 0)
        if ((reinterpret_cast<uintptr_t>(out) + i * B * W) % 32 && i + 2 * P <= blocks) {
            for (int64_t t = i * B; t < (i + 16 / (B * W)) * B; ++t) one(t);
            i += 16 / (B * W);
        }
    for (; i + P <= blocks; i += P) interleave16<W, B, NT>(in, i * W, reinterpret_cast<__m128i*>(out + i * B * W));
    for (int64_t t = std::max(t0, i * B); t < t1; ++t) one(t);
}

// Positions [t0, t1) of a SCATTER<B> row of W-byte words: 4- and 8-byte words in blocks of 2 or 4
// (scatter_word_span), 16-byte words in blocks of 2 (scatter_pixel_span).
template <int W, int B, bool NT>
inline void scatter_span(const char* const* in, char* out, int64_t t0, int64_t t1) {
    if constexpr (W == 16) {
        static_assert(B == 2, "16-byte words: blocks of 2");
        scatter_pixel_span<NT>(in, out, t0, t1);
    } else {
        scatter_word_span<W, B, NT>(in, out, t0, t1);
    }
}
#endif

template <int W, int B>
inline bool scatter_direct(const char* const* in, char* out, int64_t t0, int64_t t1, Carry* carry) {  // (in: B rows)
#if DM_HAVE_STREAM
    if constexpr (((W == 4 || W == 8) && (B == 2 || B == 4)) || (W == 16 && B == 2)) {
#if DM_HAVE_AVX2
        if (W == 16 && !kAvx2) return false;  // (see scatter_pixel_span)
#else
        if (W == 16) return false;
#endif
        const uintptr_t at = reinterpret_cast<uintptr_t>(out);
        // some block on 16 bytes, or blocks of two 4-byte words 4 bytes past 8 (scatter_odd_span)
        if ((at % (W * B == 8 ? 8 : 16) && !(W == 4 && B == 2 && at % 4 == 0)) || t0 >= t1) return false;
        // [h, e): the positions on lines of this row's own; the ones before and after share a line
        int64_t h = t0, e = t1;
        const uintptr_t first = (at + t0 * W) & ~uintptr_t(kLine - 1), last = (at + t1 * W) & ~uintptr_t(kLine - 1);
        // `out` for positions that go to the carry's buffer, whose bytes stand for the line at `line`
        auto in_carry = [&](uintptr_t line) { return reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(carry->buf) + at - line); };
        if (carry && first != last) {
            const int64_t lead = at + t0 * W - first, tail = at + t1 * W - last;  // bytes
            if (lead) {  // the line the row starts in: with the rest the carry holds, or stored plainly
                h = t0 + (kLine - lead) / W;
                if (carry->goes_on(out + t0 * W)) {
                    scatter_span<W, B, false>(in, in_carry(first), t0, h);
                    carry->stream_whole();
                } else {  // (plainly, as Carry::flush stores a line no row went on to)
                    scatter_span<W, B, false>(in, out, t0, h);
                }
            }
            if (tail) {  // the line the row ends in, held
                e = t1 - tail / W;
                carry->start(reinterpret_cast<char*>(last), tail);
                scatter_span<W, B, false>(in, in_carry(last), e, t1);
            }
        }
        scatter_span<W, B, true>(in, out, h, e);
        return true;
    }
#endif
    (void)in, (void)out, (void)t0, (void)t1, (void)carry;
    return false;
}

template <typename T, int B, bool NT>
inline void scatter(const T* src, T* dst, int64_t a, int64_t b, const Rows<B>& rows, int64_t n, char* scratch, Carry* carry) {
    if (transpose4<T, B, NT>(src, dst, a, b, rows, n)) return;
    if (!NT) return scatter_rows<T, B>(src, dst, a, b, rows, n);
    if constexpr (sizeof(T) == 4 || sizeof(T) == 8 || (sizeof(T) == 16 && B == 2)) {
        const char* in[B];
        for (int j = 0; j < B; ++j) in[j] = reinterpret_cast<const char*>(src + a + rows.at[j]);
        // Rows of a line or two, in input streams a line or more apart (SpaceToDepth depth_first NHWC, a 2 x
        // 2 block's two input rows): each stream asked for 4 KiB ahead, as scatter_run_of does. 16
        // channels, 64 MiB, 2-core Intel Xeon, same process, in turns: 1.15-1.19x -> 1.03-1.06x the copy
        // floor (at DATAMOVE_ISA=avx2 1.00-1.03x -> 0.90x); NCHW DepthToSpace, whose rows are long, keeps
        // the CPU's own prefetching (asked too, it read 3-9% slower).
        for (int j = 0; j < B && n * (int64_t)sizeof(T) <= 2 * kLine; ++j)
            if (j == 0 || std::abs(rows.at[j] - rows.at[j - 1]) * (int64_t)sizeof(T) >= kLine) {
                ask_line(in[j] + 4096);
                ask_line(in[j] + 4096 + 64);
            }
        // (no carry: nothing comes between one row's last stores and the next row's first, and the CPU
        // joins the line they share; DepthToSpace 512 MiB into np.empty, 1.23x the copy floor without
        // the carry, 1.38x with it)
        if (scatter_direct<sizeof(T), B>(in, reinterpret_cast<char*>(dst + b), 0, n * B, nullptr)) return;
    }
    constexpr int64_t K = kChunkBytes / sizeof(T);
    T* buf = reinterpret_cast<T*>(scratch);  // B * K
    int64_t next = first_chunk(dst + b, sizeof(T), B, K, n);
    for (int64_t i0 = 0, k; i0 < n; i0 += k, next = K) {
        k = std::min(next, n - i0);
        scatter_rows<T, B>(src, buf, a + i0, 0, rows, k);
        put_joined(reinterpret_cast<char*>(dst + b + i0 * B), reinterpret_cast<const char*>(buf), k * B * sizeof(T), carry);
    }
}

// Windows: loop 1 the block offset j (size words), loop 0 the block index i; t = i * size + j.
// Blocks [first, last) lie wholly inside lo <= t < hi; only the others test t.
inline void inside_blocks(int64_t size, int64_t n0, int64_t lo, int64_t hi, int64_t* first, int64_t* last) {
    *first = std::min(n0, (lo + size - 1) / size);
    *last = std::max(*first, std::min(n0, hi / size));
}


// Streamed, each output row is assembled chunk by chunk in L1, edges and inside blocks together, and
// streamed out whole: no line gets both plain and streaming stores (edges written in place beside
// streamed inside blocks made S2B with pads 1.1x -> 5.1x the copy floor).
template <typename T, int B, bool NT>
inline void gather_window(const T* src, T* dst, int64_t a, int64_t b, const Step& st) {
    const int64_t size = B ? B : st.l1.n, n0 = st.l0.n, d1 = st.l1.d, d0 = st.l0.d, lo = st.lo, hi = st.hi;
    const int64_t first = st.first, last = st.last;
    if (!NT || !B || d0 != 1) return gather_window_part<T, B>(src, dst, a, b, d1, d0, size, 0, n0, first, last, lo, hi);
    if constexpr (B >= 2)  // a whole line a store, padding and all
        if (gathers_lines<T, B>(src, dst, a, b, Rows<B>(d1), n0, 1, 0, Loop{1, 0, 0}, &st)) return;
    constexpr int64_t K = kChunkBytes / sizeof(T);
    T* buf = reinterpret_cast<T*>(st.scratch);  // (B ? B : 1) * K
    int64_t next = first_chunk(dst + b, sizeof(T), 1, K, n0);
    for (int64_t i0 = 0, k; i0 < n0; i0 += k, next = K) {
        k = std::min(next, n0 - i0);
        gather_window_part<T, B>(src, buf, a, -i0, K, 1, size, i0, i0 + k, first, last, lo, hi);
        for (int64_t j = 0; j < size; ++j)
            put_bytes<true>(reinterpret_cast<char*>(dst + b + j * d1 + i0), reinterpret_cast<const char*>(buf + j * K), k * sizeof(T));
    }
}


}  // namespace dm

// The tile kernels by pattern (windows, runs of rows, contiguous rows, tile) and run_rows, which walks
// a step's rows and calls them.

#pragma once

#include "streamed.hpp"

namespace dm {

// Blocks [i0, i1) of a scatter window into dst + b + t, the positions lo <= t < hi only.
template <typename T, int B>
inline void scatter_window_part(const T* src, T* dst, int64_t a, int64_t b, int64_t s1, int64_t s0, int64_t size,
                                int64_t i0, int64_t i1, int64_t first, int64_t last, int64_t lo, int64_t hi) {
    for (int edge = 0; edge < 2; ++edge) {
        for (int64_t i = edge ? std::max(i0, last) : i0; i < (edge ? i1 : std::min(i1, first)); ++i)
            for (int64_t j = 0; j < size; ++j) {
                int64_t t = i * size + j;
                if (lo <= t && t < hi) dst[b + t] = src[a + j * s1 + i * s0];
            }
    }
    const int64_t f = std::max(i0, first), l = std::min(i1, last);
    if (f >= l) return;
    if (B && s0 == 1) return scatter_rows<T, (B ? B : 2)>(src, dst, a + f, b + f * size, Rows<(B ? B : 2)>(s1), l - f);
    for (int64_t i = f; i < l; ++i)
        for (int64_t j = 0; j < size; ++j) dst[b + i * size + j] = src[a + j * s1 + i * s0];
}

template <typename T, int B, bool NT>
inline void scatter_window(const T* src, T* dst, int64_t a, int64_t b, const Step& st) {
    const int64_t size = B ? B : st.l1.n, n0 = st.l0.n, s1 = st.l1.s, s0 = st.l0.s, lo = st.lo, hi = st.hi;
    const int64_t first = st.first, last = st.last;
    if (!NT || !B || s0 != 1) return scatter_window_part<T, B>(src, dst, a, b, s1, s0, size, 0, n0, first, last, lo, hi);
    if constexpr (sizeof(T) == 4 || sizeof(T) == 8 || (sizeof(T) == 16 && B == 2)) {
        const char* in[B ? B : 1];
        for (int64_t j = 0; j < B; ++j) in[j] = reinterpret_cast<const char*>(src + a + j * s1);
        // Input rows of 1 KiB or more that go on where a later tile reads (BatchToSpace: each image row by
        // row): the next rows asked for before this row's stores. (Rows of 256 bytes, 5-D BatchToSpace
        // with crops: 0.70x -> 0.79x the copy floor with the prefetch.)
        Ahead ahead;
        for (int64_t j = 0; j < B && st.reads_on; ++j) ahead.add(in[j] + n0 * sizeof(T), n0 * (int64_t)sizeof(T));
        ahead.ask(ahead.lines);
        // the next rows' lines asked for between this row's last stores and the next row's first push the
        // line they share out of the CPU's write-combining half written: the carry joins it
        if (scatter_direct<sizeof(T), B>(in, reinterpret_cast<char*>(dst + b), std::max<int64_t>(lo, 0), std::min(hi, n0 * B),
                                         st.reads_on ? st.carry : nullptr)) return;
    }
    constexpr int64_t K = kChunkBytes / sizeof(T);  // positions per chunk: K / size blocks
    constexpr int64_t KB = K / (B ? B : 1);
    T* buf = reinterpret_cast<T*>(st.scratch);  // K
    int64_t next = first_chunk(dst + b, sizeof(T), size, KB, n0);
    for (int64_t i0 = 0, k; i0 < n0; i0 += k, next = KB) {
        k = std::min(next, n0 - i0);
        scatter_window_part<T, B>(src, buf, a, -i0 * size, s1, s0, size, i0, i0 + k, first, last, lo, hi);
        const int64_t t0 = std::max(lo, i0 * size), t1 = std::min(hi, (i0 + k) * size);
        if (t0 < t1)
            put_joined(reinterpret_cast<char*>(dst + b + t0), reinterpret_cast<const char*>(buf + t0 - i0 * size), (t1 - t0) * sizeof(T), st.carry);
    }
}

#if DM_HAVE_STREAM
// Row j at o + at[j], positions [i, i + 16 / W)  <-  in[k * B + j], k < 16 / W: B 16-byte loads taken
// apart in registers and stored plainly, for B = 2 or 4 rows of W = 4 or 8 bytes.
template <int W, int B>
inline void deinterleave16(const char* in, char* o, const int64_t* at, int64_t i) {
    __m128i r[B];
    for (int k = 0; k < B; ++k) r[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 16 * k));
    __m128i v[B];
    if constexpr (W == 4 && B == 2) {
        const __m128 x = _mm_castsi128_ps(r[0]), y = _mm_castsi128_ps(r[1]);
        v[0] = _mm_castps_si128(_mm_shuffle_ps(x, y, 0x88));  // words 0 2 of x, then of y
        v[1] = _mm_castps_si128(_mm_shuffle_ps(x, y, 0xDD));  // words 1 3
    } else if constexpr (W == 4) {
        __m128 f[4];
        for (int k = 0; k < 4; ++k) f[k] = _mm_castsi128_ps(r[k]);
        _MM_TRANSPOSE4_PS(f[0], f[1], f[2], f[3]);
        for (int k = 0; k < 4; ++k) v[k] = _mm_castps_si128(f[k]);
    } else if constexpr (B == 2) {
        v[0] = _mm_unpacklo_epi64(r[0], r[1]);
        v[1] = _mm_unpackhi_epi64(r[0], r[1]);
    } else {  // r0 = position 0 rows 0 1, r1 = position 0 rows 2 3, r2 and r3 the same of position 1
        v[0] = _mm_unpacklo_epi64(r[0], r[2]);
        v[1] = _mm_unpackhi_epi64(r[0], r[2]);
        v[2] = _mm_unpacklo_epi64(r[1], r[3]);
        v[3] = _mm_unpackhi_epi64(r[1], r[3]);
    }
    for (int j = 0; j < B; ++j) _mm_storeu_si128(reinterpret_cast<__m128i*>(o + (at[j] + i) * W), v[j]);
}

// The whole blocks [first, last) of `runs` x `run` gather rows (`next` and `inner` apart, in words; rows
// at `rows`), 16 / W positions at a time, the last group overlapping the one before. A function of its own
// so that the offsets stay in registers: inlined in gather_rows_run, beside its edge lists, they were
// spilled to the stack and reloaded around every row's stores. SpaceToDepth of 16 x 16 images, [1024,4,16,16]
// float32, 4 MiB into out=, same process, in turns, two threads: blocks_first 300 -> 171 us (the copy floor
// took about 230 us), depth_first 343 -> 229 us, block 4 353 -> 190 us; one thread 443-676 -> 252-427 us.
template <int W, int B>
DM_NOINLINE void deinterleave_rows(const char* src, char* dst, int64_t runs, Loop next, int64_t run, Loop inner,
                                   Rows<B> rows, int64_t first, int64_t last) {
    constexpr int P = 16 / W;
    for (int64_t q = 0; q < runs; ++q)
        for (int64_t m = 0; m < run; ++m) {
            const char* in = src + (q * next.s + m * inner.s) * W;
            char* o = dst + (q * next.d + m * inner.d) * W;
            for (int64_t i = first; i < last - P; i += P) deinterleave16<W, B>(in + i * B * W, o, rows.at, i);
            deinterleave16<W, B>(in + (last - P) * B * W, o, rows.at, last - P);
        }
}
#endif

// The rows of `runs` x `run` GATHER or GATHER_WINDOW tiles (`next` and `inner` apart), stored plainly:
// out row j, position i <- in[t] for t = i * B + j (GATHER: rows at st.at), or for a window (rows d1
// apart) in[t] inside it (lo <= t < hi) and zero outside. The blocks wholly inside go 16 / W positions at
// a time (deinterleave16), the last group overlapping the one before; the other blocks' words (a
// window's padding and the blocks it cuts) come from two lists made once for all the rows: the zeros,
// and the words read. False (nothing written) where the tiles are not B = 2 or 4 rows of 4- or 8-byte
// words with contiguous positions, a GATHER tile is shorter than a group, or a window row has more
// than kEdgeWords such words (runs_plainly).
// Tile by tile (transpose4, or the compiler's loop in gather_rows after a window's edges word by
// word), the set-up of each short tile cost as much as its moves. Into out=, same process, in turns:
// SpaceToDepth of [1024,4,16,16] float32, 4 MiB, one thread 345 us -> 200 us (a memcpy 170-184 us, a
// loop written by hand for the case 183 us); two threads against the copy floor blocks_first 0.99x ->
// 0.75x, depth_first 1.08x -> 0.72x, block 4 1.05x -> 0.68x, rows of 64 positions unchanged.
// SpaceToBatch NCHW with pads of 1 and a 2 x 2 block: [64,16,14,14] 1.30x -> 0.99x the copy floor,
// [64,16,30,46] 1.24x -> 1.09x, [16,16,62,126] 1.21x -> 0.92x; float64 4 x 4, [64,16,22,22] 2.18x -> 1.79x.
constexpr int kEdgeWords = 64;

// Whether the plain run loops (gather_rows_run, scatter_rows_run) take a step's tiles: B = 2 or 4 rows of
// 4- or 8-byte words with contiguous positions, a GATHER tile at least a group long, a gather window
// with at most kEdgeWords words outside its whole groups, a SCATTER not a small_scatter (scatter_run's).
// One rule for the run loops and for streams_whole, which stores such tiles' short rows plainly.
inline bool runs_plainly(const Step& st) {
#if DM_HAVE_STREAM
    if ((st.word != 4 && st.word != 8) || (st.block != 2 && st.block != 4)) return false;
    const int64_t B = st.block, P = 16 / st.word, n0 = st.l0.n;
    switch (st.pattern) {
        case GATHER: return st.l0.d == 1 && st.l0.s == B && n0 >= P;
        case GATHER_WINDOW: {
            const int64_t inside = st.last - st.first;  // whole blocks, taken in groups where there is one
            return st.l0.d == 1 && (n0 - (inside >= P ? inside : 0)) * B <= kEdgeWords;
        }
        case SCATTER: return st.l0.s == 1 && st.l0.d == B && !small_scatter(st);
        case SCATTER_WINDOW: return st.l0.s == 1;
        default: return false;
    }
#else
    (void)st;
    return false;
#endif
}

template <typename T, int B>
inline bool gather_rows_run(const T* src, T* dst, int64_t a, int64_t b, int64_t runs, const Loop& next, int64_t run,
                            const Loop& inner, const Step& st) {
#if DM_HAVE_STREAM
    if constexpr ((B == 2 || B == 4) && (sizeof(T) == 4 || sizeof(T) == 8)) {
        constexpr int W = sizeof(T), P = 16 / W;  // positions a group
        const bool window = st.pattern == GATHER_WINDOW;
        const int64_t n0 = st.l0.n, lo = window ? st.lo : 0, hi = window ? st.hi : n0 * B;
        const int64_t first = window ? st.first : 0, last = window ? st.last : n0;  // the blocks wholly inside
        if (!runs_plainly(st)) return false;
        const bool grouped = last - first >= P;
        int64_t at[B];
        for (int j = 0; j < B; ++j) at[j] = window ? j * st.l1.d : st.at[j];
        int64_t zeros[kEdgeWords], to[kEdgeWords], from[kEdgeWords];
        int nzeros = 0, words = 0;
        auto edge = [&](int64_t i) {  // block i's words, one at a time
            for (int j = 0; j < B; ++j) {
                const int64_t t = i * B + j;
                if (lo <= t && t < hi) {
                    to[words] = at[j] + i, from[words++] = t;
                } else {
                    zeros[nzeros++] = at[j] + i;
                }
            }
        };
        for (int64_t i = 0; i < (grouped ? first : n0); ++i) edge(i);  // (not the inside blocks, which may be many)
        for (int64_t i = grouped ? last : n0; i < n0; ++i) edge(i);
        const Rows<B> rows(at);
        if (!nzeros && !words) {  // all the rows' groups in one call
            if (grouped)
                deinterleave_rows<W, B>(reinterpret_cast<const char*>(src + a), reinterpret_cast<char*>(dst + b), runs, next,
                                        run, inner, rows, first, last);
            return true;
        }
        for (int64_t q = 0; q < runs; ++q)  // a row's groups, then its edge words (the row still in L1)
            for (int64_t m = 0; m < run; ++m) {
                const T* row = src + a + q * next.s + m * inner.s;
                T* out = dst + b + q * next.d + m * inner.d;
                if (grouped) {  // (here, not by deinterleave_rows a row at a time: windows of 30-126 positions
                    const char* in = reinterpret_cast<const char*>(row);  // ran 5-15% slower through its call)
                    char* o = reinterpret_cast<char*>(out);
                    for (int64_t i = first; i < last - P; i += P) deinterleave16<W, B>(in + i * B * W, o, at, i);
                    deinterleave16<W, B>(in + (last - P) * B * W, o, at, last - P);
                }
                for (int k = 0; k < nzeros; ++k) out[zeros[k]] = T();
                for (int k = 0; k < words; ++k) out[to[k]] = row[from[k]];
            }
        return true;
    }
#endif
    (void)src, (void)dst, (void)a, (void)b, (void)runs, (void)next, (void)run, (void)inner, (void)st;
    return false;
}

#if DM_HAVE_STREAM
// The whole blocks of `runs` x `run` scatter rows (`next` and `inner` apart, in words; input rows at `rows`):
// groups [body, end) of 16 / W positions, and one more at `extra` (-1: none). A function of its own, as
// deinterleave_rows is for gathers: same process, in turns, two threads, DepthToSpace of 8 x 8 images
// [512,16,8,8] float32 132 -> 97 us, float64 182 -> 152 us; depth_first [1024,16,8,8] 336 -> 249 us;
// BatchToSpace of 16 x 16 images [4096,1,16,16] 155 -> 134 us.
template <int W, int B>
DM_NOINLINE void interleave_rows(const char* src, char* dst, int64_t runs, Loop next, int64_t run, Loop inner,
                                 Rows<B> rows, int64_t body, int64_t end, int64_t extra) {
    constexpr int P = 16 / W;
    for (int64_t q = 0; q < runs; ++q)
        for (int64_t m = 0; m < run; ++m) {
            const char* row = src + (q * next.s + m * inner.s) * W;
            char* out = dst + (q * next.d + m * inner.d) * W;
            const char* in[B];
            for (int j = 0; j < B; ++j) in[j] = row + rows.at[j] * W;
            for (int64_t i = body; i < end; i += P)
                interleave16<W, B, false>(in, i * W, reinterpret_cast<__m128i*>(out + i * B * W));
            if (extra >= 0) interleave16<W, B, false>(in, extra * W, reinterpret_cast<__m128i*>(out + extra * B * W));
        }
}
#endif

// The rows of `runs` x `run` SCATTER or SCATTER_WINDOW tiles (`next` and `inner` apart), stored
// plainly: out[t] = row t % B [t / B] for all t (SCATTER; rows at st.at) or the window's positions
// lo <= t < hi (rows s1 apart). Each row's whole blocks are interleaved in registers (interleave16),
// the last ones as one more group overlapping the one before; the few words left (a partial block at
// either end) come from a list made once for all the rows. False (nothing written) where the tiles
// are not B = 2 or 4 rows of 4- or 8-byte words with contiguous positions (runs_plainly).
// Tile by tile, the set-up cost more than the moves of short rows. Into out=, same process, in turns:
// BatchToSpace with crops on 16 x 16 images, [4096,1,16,16], 4 MiB, 1.10x -> 0.89x the copy floor
// (one thread against a memcpy 2.69x -> 1.89x); DepthToSpace of 8 x 8 images, float64 [512,16,8,8],
// one thread 2.53x -> 1.44x (float32: 1.67x before and 1.73x after, within this machine's noise).
template <typename T, int B>
inline bool scatter_rows_run(const T* src, T* dst, int64_t a, int64_t b, int64_t runs, const Loop& next, int64_t run,
                             const Loop& inner, const Step& st) {
#if DM_HAVE_STREAM
    if constexpr ((B == 2 || B == 4) && (sizeof(T) == 4 || sizeof(T) == 8)) {
        constexpr int W = sizeof(T), P = 16 / W;  // positions in a 16-byte load
        const bool window = st.pattern == SCATTER_WINDOW;
        const int64_t n0 = st.l0.n;
        if (!runs_plainly(st)) return false;
        int64_t at[B];
        for (int j = 0; j < B; ++j) at[j] = window ? j * st.l1.s : st.at[j];
        const int64_t t0 = window ? std::max<int64_t>(st.lo, 0) : 0, t1 = window ? std::min(st.hi, n0 * B) : n0 * B;
        if (t0 >= t1) return true;
        // whole blocks [body, end) in groups of P, and [t1 / B - P, t1 / B) if some are left
        const int64_t body = (t0 + B - 1) / B, groups = std::max<int64_t>(0, (t1 / B - body) / P);
        const int64_t end = body + groups * P;
        const bool extra = groups > 0 && end < t1 / B;
        // the single words: where each is read (from the tile's start) and written
        int64_t from[(P + 2) * B], to[(P + 2) * B];  // (at most B - 1 before the body, (P + 1) * B - 1 after)
        int words = 0;
        auto add = [&](int64_t t) { from[words] = at[t % B] + t / B, to[words++] = t; };
        for (int64_t t = t0; t < std::min(t1, body * B); ++t) add(t);
        for (int64_t t = std::max(t0, (extra ? t1 / B : end) * B); t < t1; ++t) add(t);
        if (!words) {  // all the rows' groups in one call (rows with single words below, each whole while in L1)
            interleave_rows<W, B>(reinterpret_cast<const char*>(src + a), reinterpret_cast<char*>(dst + b), runs, next, run,
                                  inner, Rows<B>(at), body, end, extra ? t1 / B - P : -1);
            return true;
        }
        for (int64_t q = 0; q < runs; ++q)
            for (int64_t m = 0; m < run; ++m) {
                const T* row = src + a + q * next.s + m * inner.s;
                T* out = dst + b + q * next.d + m * inner.d;
                const char* in[B];
                for (int j = 0; j < B; ++j) in[j] = reinterpret_cast<const char*>(row + at[j]);
                for (int64_t i = body; i < end; i += P)
                    interleave16<W, B, false>(in, i * W, reinterpret_cast<__m128i*>(out + i * B));
                if (extra)
                    interleave16<W, B, false>(in, (t1 / B - P) * W, reinterpret_cast<__m128i*>(out + (t1 / B - P) * B));
                for (int k = 0; k < words; ++k) out[to[k]] = row[from[k]];
            }
        return true;
    }
#endif
    (void)src, (void)dst, (void)a, (void)b, (void)runs, (void)next, (void)run, (void)inner, (void)st;
    return false;
}

// Rows of a fixed number of bytes (short runs: channels innermost): constant-size copies the
// compiler turns into a few vector moves, instead of a memcpy call per run.
template <int N>
inline void copy_rows(char* d, const char* s, int64_t rows, int64_t d1, int64_t s1) {
    for (int64_t j = 0; j < rows; ++j) std::memcpy(d + j * d1, s + j * s1, N);
}

// The same, streamed: rows of 16 to 128 bytes at 16-byte aligned destinations (checked by the caller)
// as inline streaming stores, without put_bytes' call and head/tail arithmetic per row.
template <int N>
inline void stream_rows(char* d, const char* s, int64_t rows, int64_t d1, int64_t s1) {
#if DM_HAVE_STREAM
    for (int64_t j = 0; j < rows; ++j) {
        const char* in = s + j * s1;
        char* o = d + j * d1;
        for (int k = 0; k < N; k += 16)
            _mm_stream_si128(reinterpret_cast<__m128i*>(o + k), _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + k)));
    }
#else
    copy_rows<N>(d, s, rows, d1, s1);
#endif
}

// `run` tiles of short rows (`rows` rows of N bytes each, d1/s1 apart) whose tiles lie dm/sm apart: the
// whole run as one loop of constant-size moves. Tile by tile, each tile's size switch, alignment test and
// loop set-up cost more than its few moves (TensorFlow's NHWC space_to_batch_nd, 8 channels: two rows of
// 32 bytes a tile).
template <int N, bool NT>
inline void short_rows_run(char* d, const char* s, int64_t run, int64_t dm, int64_t sm, int64_t rows, int64_t d1,
                           int64_t s1) {
    for (int64_t m = 0; m < run; ++m, d += dm, s += sm) {
        if (NT) {
            stream_rows<N>(d, s, rows, d1, s1);
        } else {
            copy_rows<N>(d, s, rows, d1, s1);
        }
    }
}

// n bytes, 1 <= n <= 32, as two fixed-size moves that overlap in the middle (as memcpy does small sizes):
// for rows of a size no case of short_rows_run has (a pixel of 3 channels: 3, 6, 12 or 24 bytes), whose
// memcpy call per row cost 10x the copy floor (TensorFlow's NHWC space_to_batch_nd of uint8 RGB images).
template <int K>
inline void copy_ends(char* d, const char* s, int64_t n) {  // K <= n <= 2K bytes: the first K and the last K
    char head[K], tail[K];  // both loaded before either is stored
    std::memcpy(head, s, K);
    std::memcpy(tail, s + n - K, K);
    std::memcpy(d, head, K);
    std::memcpy(d + n - K, tail, K);
}

inline void copy_small(char* d, const char* s, int64_t n) {
    if (n >= 16) return copy_ends<16>(d, s, n);
    if (n >= 8) return copy_ends<8>(d, s, n);
    if (n >= 4) return copy_ends<4>(d, s, n);
    if (n >= 2) return copy_ends<2>(d, s, n);
    *d = *s;
}

#if DM_HAVE_AVX512
// `total` bytes to o (on 16 bytes) from chunks of c >= 64 bytes (a multiple of 16), chunk i at in + i * sm: the
// rows of a run of CONTIGUOUS tiles that go on from each other (a pixel's channels: DepthToSpace,
// BatchToSpace and SpaceToBatch NHWC). Each whole line of the output is one 64-byte streaming store: one load inside a
// chunk, two masked loads (16 bytes a lane group; the masked-off lanes are not read) where it spans two;
// the partial lines at the two ends are 16-byte streaming stores. Before, each tile's row was 16-byte
// streaming stores: in a loop written by hand (2-core Intel Xeon, 64 MiB, 2 threads) such stores 16
// bytes into a line copied in 4.25 ms, 64-byte ones 2.93 ms. Same process, in turns: DepthToSpace NHWC
// blocks_first 128 MiB (512-byte chunks) 0.97-0.98x -> 0.84-0.85x the copy floor, 64 channels into 16
// (128-byte chunks) 0.86-0.93x -> 0.73-0.87x, BatchToSpace NHWC 16 channels 0.66-0.67x -> 0.59-0.61x.
// (Two masked loads for every line: 512-byte chunks read 1.18x. A loop over a line's chunks of any
// size, down to 16 bytes: 128-byte chunks read 1.31-1.36x, 32-byte ones 1.22x. So chunks of 64 bytes or
// more only; those of 16 and 32 bytes fill a vector at fixed places: stream_small_chunks.)
//
// With Rows, `many` such rows at once, row j from in + j * s1 to o + j * d1 (d1 a whole number of lines, so
// that each row's lines fall at the same places): line by line, each line of every row in turn. A tile's
// rows are its block's rows (DepthToSpace blocks_first NHWC: the two halves of each input pixel, to two
// output rows). A row at a time, a pass read half of every input pixel from memory and the next pass the
// other half from the cache, so reads and stores came in bursts. The bench's cases in turns, three rounds,
// every call from memory (2-core Intel Xeon): DepthToSpace blocks_first NHWC [8,256,128,128] 1.12-1.14x ->
// 1.02-1.04x the copy floor, [16,64,128,128] (128-byte chunks) 1.23-1.24x -> 1.11-1.12x, BatchToSpace NHWC
// with crops 1.02-1.05x -> 1.01x. (TensorFlow's BatchToSpace has its tiles' rows side by side: not this
// kernel's, stream_small_chunks<32, 2>'s.)
// (Without Rows the loops over rows are gone: through them, one row's copy, as the copy floor's own of
// 64 MiB, took 3.96-4.57 ms against 3.30-3.36.)
template <bool Rows>
__attribute__((target("avx512f"))) DM_NOINLINE inline void stream_chunks(char* o, const char* in, int64_t c, int64_t sm, int64_t total,
                                                                        int64_t many = 1, int64_t d1 = 0, int64_t s1 = 0) {
    const int64_t rows = Rows ? many : 1;
    int64_t x = 0, i = 0, w = 0;  // output byte x is byte w of chunk i
    auto advance = [&](int64_t n) {
        w += n;
        while (w >= c) w -= c, ++i;
    };
    auto piece = [&](int64_t at) {  // 16 bytes (inside one chunk), of every row
        for (int64_t j = 0; j < rows; ++j)
            _mm_stream_si128(reinterpret_cast<__m128i*>(o + j * d1 + at),
                             _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + j * s1 + i * sm + w)));
        advance(16);
    };
    for (; x < total && (reinterpret_cast<uintptr_t>(o + x) & (kLine - 1)); x += 16) piece(x);
    for (; x + kLine <= total; x += kLine) {  // (c >= 64: a line spans at most two chunks)
        if (w + kLine <= c) {
            for (int64_t j = 0; j < rows; ++j)
                _mm512_stream_si512(reinterpret_cast<__m512i*>(o + j * d1 + x), _mm512_loadu_si512(in + j * s1 + i * sm + w));
        } else {
            const int64_t first = c - w;  // bytes from chunk i; the rest from chunk i + 1
            const __mmask16 mine = (__mmask16)((1u << (first / 4)) - 1);
            for (int64_t j = 0; j < rows; ++j) {
                const char* r = in + j * s1;
                _mm512_stream_si512(reinterpret_cast<__m512i*>(o + j * d1 + x),
                                    _mm512_mask_loadu_epi32(_mm512_maskz_loadu_epi32(mine, r + i * sm + w), (__mmask16)~mine,
                                                            r + (i + 1) * sm - first));
            }
        }
        advance(kLine);
    }
    for (; x < total; x += 16) piece(x);
}
#endif

#if DM_HAVE_AVX512
// `run` chunks of C = 16 or 32 bytes to o (on 4 bytes), one after another, chunk i at in + i * sm: the rows
// of a run of CONTIGUOUS tiles of a pixel or two of a few channels (DepthToSpace blocks_first NHWC of 16
// channels: 32-byte chunks, every other one of a 64-byte input pixel). Each 64 bytes of chunks are loaded
// into one vector and stored as whole lines shifted (Shifted: the run's first and last partial lines
// plainly). Same process, in turns, 64 MiB: 16-byte streaming stores a chunk (short_rows_run, tile by
// tile, its rows in turns) 1.01-1.03x the copy floor, this way 0.85-0.86x.
//
// With N rows a tile (N > 1), the tiles' rows interleave in o: chunk m is row m % N of tile m / N, at
// in + (m % N) * s1 + (m / N) * sm (TensorFlow's BatchToSpace: each output line two 32-byte pixels, from two
// input batches). Before, such tiles took 16-byte streaming stores, four a line: [128,128,128,8] with crops
// read 1.14-1.16x the copy floor, now 1.05-1.06x (the bench's case in turns, three rounds, from memory).
template <int C, int N = 1>
__attribute__((target("avx512f"))) DM_NOINLINE inline void stream_small_chunks(char* o, const char* in, int64_t sm, int64_t run,
                                                                              int64_t s1 = 0) {
    constexpr int K = kLine / C;  // chunks a vector
    static_assert(K % N == 0, "a vector holds whole tiles");
    const auto at = [&](int64_t m) __attribute__((always_inline)) { return in + (m % N) * s1 + (m / N) * sm; };
    run *= N;  // (chunks)
    const Shifted sh = shifted(o);
    char* line = o - sh.p;
    __m512i prev = _mm512_setzero_si512();
    int64_t i = 0;
    for (; i + K <= run; i += K, line += kLine) {
        __m512i v;
        if constexpr (C == 32) {
            v = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at(i)))),
                                   _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at(i + 1))), 1);
        } else {
            const __m256i lo = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at(i)))),
                                                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(at(i + 1))), 1);
            const __m256i hi = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at(i + 2)))),
                                                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(at(i + 3))), 1);
            v = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
        }
        if (i || !sh.p) {  // (on a line: the first line streams whole)
            shifted_line(line, sh, prev, v);
        } else {
            shifted_first(line, sh, v);
        }
        prev = v;
    }
    if (i) shifted_last(line, sh, prev);
    for (; i < run; ++i) std::memcpy(o + i * C, at(i), C);  // (the chunks after the last whole vector)
}
#endif

#if DM_HAVE_AVX512
// Runs of rows of P bytes (P under 32 and not a power of two: a pixel of 3 uint8 channels), each of `run`
// rows one after another in d (row m of run j from s + j * s1 + m * sm to d + j * d1 + m * P: a run of
// CONTIGUOUS tiles of `rows` rows), stored plainly G rows at a time: two 64-byte loads (each masked to the bytes the
// rows read, so nothing past them is read), one byte permute (VBMI), one masked store; the last group
// short. False where fewer than 2 rows fit a permute's 128 bytes. A row at a time (copy_small),
// channels-last SpaceToBatch of uint8 RGB images with pads, 64 MiB, took 5.2x the copy floor.
DM_NARROW DM_NOINLINE inline bool pixel_rows(char* d, const char* s, int64_t P, int64_t sm, int64_t run, int64_t rows,
                                             int64_t d1, int64_t s1, Permute* perm) {
    if (!perm || sm < 0 || P < 1 || P >= 64) return false;
    const int64_t G = std::min<int64_t>(64 / P, sm > 0 ? (128 - P) / sm + 1 : 64);
    if (G < 2) return false;
    permute_of(perm, P, 1, 1, sm, G);  // (byte k of a group: row k / P, byte k % P of it, at (k / P) * sm + k % P)
    const __m512i idx = _mm512_loadu_si512(perm->at);
    for (int64_t j = 0; j < rows; ++j) {  // (a tile's rows: each its own run in d)
        const auto group = [&](int64_t m, int64_t g) DM_NARROW __attribute__((always_inline)) {  // rows [m, m + g) of the run
            const int64_t need = (g - 1) * sm + P;  // bytes they read
            const char* p = s + j * s1 + m * sm;
            const __m512i x = _mm512_maskz_loadu_epi8(first_bytes(need), p), y = _mm512_maskz_loadu_epi8(first_bytes(need - 64), p + 64);
            _mm512_mask_storeu_epi8(d + j * d1 + m * P, first_bytes(g * P), _mm512_permutex2var_epi8(x, idx, y));
        };
        int64_t m = 0;
        for (; m + G <= run; m += G) group(m, G);  // (the masks the same each time: hoisted)
        if (m < run) group(m, run - m);
    }
    return true;
}
#endif

// A run of CONTIGUOUS tiles (one tile: run 1) whose rows go on from tile to tile (stream_chunks,
// stream_small_chunks), or of rows up to 128 bytes (see short_rows_run); false where it has no such case.
template <typename T, bool NT>
inline bool contiguous_run(const T* src, T* dst, int64_t a, int64_t b, int64_t run, const Loop& inner, const Step& st) {
    const int64_t w = sizeof(T), bytes = st.l0.n * w;
    char* d = reinterpret_cast<char*>(dst + b);
    const char* s = reinterpret_cast<const char*>(src + a);
    const int64_t d1 = st.l1.d * w, s1 = st.l1.s * w, dm = inner.d * w, sm = inner.s * w, n = st.l1.n;
#if DM_HAVE_AVX512
    // rows that go on from tile to tile, a line or more in all: each row streamed whole lines at a time
    if (NT && kAvx512 && dm == bytes && bytes % 16 == 0 && bytes >= kLine && run * bytes >= kLineStoresFrom &&
        (reinterpret_cast<uintptr_t>(d) | d1) % 16 == 0) {
        if (n > 1 && d1 % kLine == 0) {  // every row's lines at the same places: all rows line by line
            stream_chunks<true>(d, s, bytes, sm, run * bytes, n, d1, s1);
        } else {
            for (int64_t j = 0; j < n; ++j) stream_chunks<false>(d + j * d1, s + j * s1, bytes, sm, run * bytes);
        }
        return true;
    }
    // rows of 16 or 32 bytes that go on from tile to tile: 64 bytes of them a vector (stream_small_chunks)
    if (NT && kAvx512 && dm == bytes && (bytes == 16 || bytes == 32) && run * bytes >= kLineStoresFrom &&
        (reinterpret_cast<uintptr_t>(d) | d1) % 4 == 0) {
        for (int64_t j = 0; j < n; ++j) {
            if (bytes == 16) {
                stream_small_chunks<16>(d + j * d1, s + j * s1, sm, run);
            } else {
                stream_small_chunks<32>(d + j * d1, s + j * s1, sm, run);
            }
        }
        return true;
    }
    // tiles of 2 rows of 32 bytes side by side in the output (dm 64: TensorFlow's BatchToSpace of 8 float32
    // channels, a pixel from each of two input batches): their rows interleaved, a line a vector
    if (NT && kAvx512 && bytes == 32 && n == 2 && d1 == bytes && dm == 2 * bytes && run * dm >= kLineStoresFrom &&
        reinterpret_cast<uintptr_t>(d) % 4 == 0) {
        stream_small_chunks<32, 2>(d, s, sm, run, s1);
        return true;
    }
#endif
    if (bytes > 128) return false;
    if (NT) {
        const bool on16 = (reinterpret_cast<uintptr_t>(d) | d1 | dm) % 16 == 0;  // the fixed sizes' 16-byte stores
        switch (on16 ? bytes : 0) {
            case 16: return short_rows_run<16, true>(d, s, run, dm, sm, n, d1, s1), true;
            case 32: return short_rows_run<32, true>(d, s, run, dm, sm, n, d1, s1), true;
            case 48: return short_rows_run<48, true>(d, s, run, dm, sm, n, d1, s1), true;
            case 64: return short_rows_run<64, true>(d, s, run, dm, sm, n, d1, s1), true;
            case 128: return short_rows_run<128, true>(d, s, run, dm, sm, n, d1, s1), true;
            default: break;
        }
#if DM_HAVE_STREAM
        // other multiples of 8 bytes (a pixel of 3 float64 channels: 24): 8-byte streaming stores; per row,
        // put_bytes' head and tail arithmetic cost 2.5x the copy floor
        if (bytes % 8 == 0 && (reinterpret_cast<uintptr_t>(d) | d1 | dm) % 8 == 0) {
            for (int64_t m = 0; m < run; ++m, d += dm, s += sm)
                for (int64_t j = 0; j < n; ++j)
                    for (int64_t k = 0; k < bytes; k += 8) {
                        long long v;
                        std::memcpy(&v, s + j * s1 + k, 8);
                        _mm_stream_si64(reinterpret_cast<long long*>(d + j * d1 + k), v);
                    }
            return true;
        }
#endif
        return false;
    }
#if DM_HAVE_AVX512
    const int64_t side[4] = {0, s1, 2 * s1, 3 * s1};  // (permute_rows: a tile's rows side by side in d)
    if (bytes < 32 && (bytes & (bytes - 1)) && run * bytes >= 2 * kLine && kAvx512Bytes &&
        ((dm == bytes && pixel_rows(d, s, bytes, sm, run, n, d1, s1, st.perm)) ||
         (d1 == bytes && dm == n * bytes && n <= 4 && dm <= 32 && permute_rows(d, s, bytes, 1, n, side, sm, run, st.perm))))
        return true;
#endif
    switch (bytes) {
        case 4: return short_rows_run<4, false>(d, s, run, dm, sm, n, d1, s1), true;
        case 8: return short_rows_run<8, false>(d, s, run, dm, sm, n, d1, s1), true;
        case 12: return short_rows_run<12, false>(d, s, run, dm, sm, n, d1, s1), true;
        case 16: return short_rows_run<16, false>(d, s, run, dm, sm, n, d1, s1), true;
        case 24: return short_rows_run<24, false>(d, s, run, dm, sm, n, d1, s1), true;
        case 32: return short_rows_run<32, false>(d, s, run, dm, sm, n, d1, s1), true;
        case 48: return short_rows_run<48, false>(d, s, run, dm, sm, n, d1, s1), true;
        case 64: return short_rows_run<64, false>(d, s, run, dm, sm, n, d1, s1), true;
        case 128: return short_rows_run<128, false>(d, s, run, dm, sm, n, d1, s1), true;
        default: break;
    }
    if (bytes > 32) return false;
    for (int64_t m = 0; m < run; ++m, d += dm, s += sm)
        for (int64_t j = 0; j < n; ++j) copy_small(d + j * d1, s + j * s1, bytes);
    return true;
}

// Whether a step's strided tiles transpose, their output's rows going on from tile to tile (the row loop's
// words one after another in dst, the next tile's row after them): channels-last data into a C-order
// result, the channels the tile's positions (4 KiB or more apart in dst: a plane each). transposed_run.
// The run's tiles must lie near each other in the input (under 2 KiB apart): each of the tile's positions
// reads the whole run again, and tiles 4 KiB apart put all its lines in one set of the L1 cache (SpaceToDepth
// depth_first into channels-last, [8,64,32,32] float32, 8-byte words 4 KiB apart: 150 us tile by tile,
// 240 us this way).
inline bool transposes_runs(const Step& st) {
    return st.pattern == STRIDED && st.nouter >= 1 && st.l1.d == 1 && st.l1.n >= 1 && std::abs(st.l0.d) >= st.l1.n &&
           st.outer[st.nouter - 1].d == st.l1.n && st.l0.n >= 2 && std::abs(st.outer[st.nouter - 1].s) * st.word < 2048;
}

// A run of `run` such tiles, `inner` apart: for each of the tile's positions (a channel), its output row
// through the whole run (run x l1.n words, stored one after another; the loads stride), instead of each
// tile's words a position at a time, whose stores lay a plane apart. The run's input lines (a pixel's
// channels) stay in L1 from one channel to the next. DepthToSpace blocks_first of channels-last
// [8,256,16,16] float32 into a C-order result, 2 MiB: 3213 us -> 428 us; [8,64,32,32] 1262 us -> 401 us
// (2-core AMD EPYC, medians; the NumPy engine's strided copies 2.2-2.6 ms).
template <typename T>
inline void transposed_run(const T* src, T* dst, int64_t a, int64_t b, int64_t run, const Loop& inner, const Step& st) {
    const Loop l1 = st.l1, l0 = st.l0;
    for (int64_t i = 0; i < l0.n; ++i) {
        const T* in = src + a + i * l0.s;
        T* o = dst + b + i * l0.d;
        for (int64_t m = 0; m < run; ++m, in += inner.s, o += l1.n)
            for (int64_t j = 0; j < l1.n; ++j) o[j] = in[j * l1.s];
    }
}

#if DM_HAVE_STREAM
// A tile of 4-byte words that transposes: out[p * out_row + q] = in[q * in_row + p] for p < np (the input's
// contiguous axis) and q < nq (the output's), rows in words. 4 x 4 blocks taken apart in registers (four
// 16-byte loads, four 16-byte stores), the side whose rows lie farther apart (a plane each: channels-first
// data) walked four rows at a time along them, so that its lines go on and are not all in one set of
// the L1 cache; the words past the last whole block one at a time.
DM_NOINLINE inline void transpose_words4(const char* in, int64_t in_row, char* out, int64_t out_row, int64_t np, int64_t nq) {
    const int64_t P = np & ~int64_t(3), Q = nq & ~int64_t(3), ir = in_row * 4, orow = out_row * 4;
    const auto block = [&](int64_t p, int64_t q) {
        const char* i = in + q * ir + p * 4;
        __m128 r0 = _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(i)));
        __m128 r1 = _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(i + ir)));
        __m128 r2 = _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(i + 2 * ir)));
        __m128 r3 = _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(i + 3 * ir)));
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
        char* o = out + p * orow + q * 4;
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o), _mm_castps_si128(r0));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o + orow), _mm_castps_si128(r1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o + 2 * orow), _mm_castps_si128(r2));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o + 3 * orow), _mm_castps_si128(r3));
    };
    if (std::abs(in_row) >= std::abs(out_row)) {
        for (int64_t q = 0; q < Q; q += 4)
            for (int64_t p = 0; p < P; p += 4) block(p, q);
    } else {
        for (int64_t p = 0; p < P; p += 4)
            for (int64_t q = 0; q < Q; q += 4) block(p, q);
    }
    for (int64_t q = 0; q < nq; ++q)
        for (int64_t p = q < Q ? P : 0; p < np; ++p) std::memcpy(out + p * orow + q * 4, in + q * ir + p * 4, 4);
}
#endif

// Whether a strided tile transposes 4-byte words in blocks of 4 (transpose_words4): one loop reads its
// input's rows, the other writes its output's.
inline bool transposes_words4(const Step& st) {
    return DM_HAVE_STREAM && st.pattern == STRIDED && st.word == 4 && st.l1.n >= 4 && st.l0.n >= 4 &&
           ((st.l1.s == 1 && st.l0.d == 1) || (st.l0.s == 1 && st.l1.d == 1));
}

template <typename T, int P, int B, bool NT>
inline void tile(const T* src, T* dst, int64_t a, int64_t b, const Step& st) {
    const Loop l1 = st.l1, l0 = st.l0;
    if (P == CONTIGUOUS) {
        if (contiguous_run<T, NT>(src, dst, a, b, 1, Loop{1, 0, 0}, st)) return;  // short rows: one tile as a run
        const int64_t bytes = l0.n * (int64_t)sizeof(T);
        char* d = reinterpret_cast<char*>(dst + b);
        const char* s = reinterpret_cast<const char*>(src + a);
        const int64_t d1 = l1.d * (int64_t)sizeof(T), s1 = l1.s * (int64_t)sizeof(T);
        for (int64_t j = 0; j < l1.n; ++j) put_bytes<NT>(d + j * d1, s + j * s1, bytes);
    } else if (P == FILL) {
        for (int64_t j = 0; j < l1.n; ++j) {
            if (l0.d == 1) {
                zero_bytes<NT>(reinterpret_cast<char*>(dst + b + j * l1.d), l0.n * sizeof(T));
            } else {
                T* o = dst + b + j * l1.d;
                for (int64_t i = 0; i < l0.n; ++i) o[i * l0.d] = T();
            }
        }
    } else if (P == GATHER) {
        gather<T, B, NT>(src, dst, a, b, Rows<B>(st.at), l0.n, st.scratch);
    } else if (P == SCATTER) {
        scatter<T, B, NT>(src, dst, a, b, Rows<B>(st.at), l0.n, st.scratch, st.carry);
    } else if (P == GATHER_WINDOW) {
        gather_window<T, B, NT>(src, dst, a, b, st);
    } else if (P == SCATTER_WINDOW) {
        scatter_window<T, B, NT>(src, dst, a, b, st);
#if DM_HAVE_STREAM
    } else if (sizeof(T) == 4 && transposes_words4(st)) {
        const char* in = reinterpret_cast<const char*>(src + a);
        char* out = reinterpret_cast<char*>(dst + b);
        if (l1.s == 1) {  // positions down the rows in, along them out (channels-first data into channels-last)
            transpose_words4(in, l0.s, out, l1.d, l1.n, l0.n);
        } else {
            transpose_words4(in, l1.s, out, l0.d, l0.n, l1.n);
        }
#endif
    } else if (l1.d == 1 && l0.d != 1 && l1.n >= 4) {
        // A transpose (the output's contiguous loop is the row loop: channels-last data into a C-order
        // result): each output row's words in turn, so that the stores go on from each other and the loads
        // stride. The other way round, a row's stores lay l0.d apart; at 4 KiB (1024 float32 channels'
        // planes) all in one set of the L1 cache. SpaceToDepth depth_first of a channels-last [4,16,32,32]
        // float32 into a C-order result, 256 KiB: 298 us -> 73 us (the NumPy idiom 71 us); [8,16,64,64]
        // blocks_first, 2 MiB, 2406 us -> 242 us (idiom 561 us); 2-core AMD EPYC, in turns, medians. (Tiles of
        // 4-byte words 4 or more each way now go to transpose_words4 above: that case 89-106 us.)
        for (int64_t i = 0; i < l0.n; ++i) {
            const T* in = src + a + i * l0.s;
            T* o = dst + b + i * l0.d;
            for (int64_t j = 0; j < l1.n; ++j) o[j] = in[j * l1.s];
        }
    } else {
        for (int64_t j = 0; j < l1.n; ++j) {
            const T* in = src + a + j * l1.s;
            T* o = dst + b + j * l1.d;
            if (l0.s == 1) {
                for (int64_t i = 0; i < l0.n; ++i) o[i * l0.d] = in[i];
            } else if (l0.d == 1) {
                for (int64_t i = 0; i < l0.n; ++i) o[i] = in[i * l0.s];
            } else {
                for (int64_t i = 0; i < l0.n; ++i) o[i * l0.d] = in[i * l0.s];
            }
        }
    }
}

// Units [u0, u1) of a step's table of units around the tile (Table outer 4), a run along the loop they go
// on in at a time.
template <typename T, bool NT>
inline void units_run(const Step& st, const Table& tab, const T* src, T* dst, int64_t u0, int64_t u1) {
    const int outside = st.nouter - tab.around;  // the loops the units go on in, `on` the last of them
    const Loop& on = st.outer[outside - 1];
    for (int64_t u = u0; u < u1;) {
        int64_t rest = u, a = st.src0, b = st.dst0, at = 0;
        for (int k = outside - 1; k >= 0; --k) {
            const int64_t i = rest % st.outer[k].n;
            rest /= st.outer[k].n;
            if (k == outside - 1) at = i;
            a += i * st.outer[k].s, b += i * st.outer[k].d;
        }
        const int64_t count = std::min(u1 - u, on.n - at);
        table_run<T, NT>(src, dst, a, b, tab, count);
        u += count;
    }
}

// Rows [r0, r1) of a step: the outer loops walked as an odometer, a tile per row, each run of tiles to
// the step's kernel (its table's units first), chosen when its program was prepared (choose).
// I: the step's SCATTER tiles of narrow words go to permute_rows (K_PERMUTE_ROWS): a separate instance,
// so that the others' loops stay as they were (the call in the loop, even untaken, cost float16 NCHW
// DepthToSpace of 12 x 12 images 1.35-1.61x -> 1.62-2.19x the copy floor).
template <typename T, int P, int B, bool NT, bool I = false>
void run_rows(const Step& step, char* src_base, char* dst_base, int64_t r0, int64_t r1) {
    // A local copy: the tiles' stores (any type, and the build has -fno-strict-aliasing) cannot reach it,
    // so the compiler keeps its fields in registers instead of reloading them for every tile.
    Step st = step;
    Carry carry;
    Permute permute;
    st.perm = &permute;
    if (NT) {
        st.scratch = scratch();
        if (!st.scratch) return run_rows<T, P, B, false>(step, src_base, dst_base, r0, r1);  // no memory: plain stores
        st.carry = &carry;
    }
    const T* src = reinterpret_cast<const T*>(src_base);
    T* dst = reinterpret_cast<T*>(dst_base);
    int64_t index[kMaxLoops];
    int64_t a = st.src0, b = st.dst0, rest = r0;
    for (int k = st.nouter - 1; k >= 0; --k) {
        const Loop& l = st.outer[k];
        index[k] = rest % l.n;
        rest /= l.n;
        a += index[k] * l.s;
        b += index[k] * l.d;
    }
    // The innermost outer loop runs straight through, and from its start, whole runs of it under the next
    // loop too: the odometer only carries into the others. (Carried per run of a short innermost loop, it
    // cost as much as the tiles: SpaceToDepth of 16 x 16 images, 4 MiB, 0.78 -> 0.52 ms on one thread.)
    const int last = st.nouter - 1;
    const Loop inner = st.nouter ? st.outer[last] : Loop{1, 0, 0};
    const Loop next = last >= 1 ? st.outer[last - 1] : Loop{1, 0, 0};
    const Loop around = last >= 2 ? st.outer[last - 2] : Loop{1, 0, 0};  // (runs through two loops: side_runs)
    constexpr bool G = P == GATHER || (P == GATHER_WINDOW && B != 0);  // (windows: when runs_of_windows)
    const int kernel = st.kernel, then = st.then;
    constexpr bool TAB = P == STRIDED || P == GATHER || P == SCATTER || P == CONTIGUOUS;
    const Table* const table = TAB ? st.rows_table : nullptr;
    bool tabled = table != nullptr;
    if constexpr (TAB) {
        if (tabled && table->outer == 4) {  // whole units by the table; the rows of a part of one as tiles
            const int64_t per = table->per, u0 = (r0 + per - 1) / per, u1 = r1 / per;
            if (u0 < u1) {
                Step part = step;
                part.rows_table = nullptr;
                if (r0 < u0 * per) run_rows<T, P, B, NT>(part, src_base, dst_base, r0, u0 * per);
                units_run<T, NT>(st, *table, src, dst, u0, u1);
                if (u1 * per < r1) run_rows<T, P, B, NT>(part, src_base, dst_base, u1 * per, r1);
                return;
            }
            tabled = false;
        }
    }
    const Rows<(B ? B : 2)> rows = P == GATHER ? Rows<(B ? B : 2)>(st.at) : Rows<(B ? B : 2)>(st.l1.d);
    const Step* window = P == GATHER_WINDOW ? &st : nullptr;
    for (int64_t r = r0; r < r1;) {
        const int64_t at = st.nouter ? index[last] : 0;
        int64_t run = std::min(r1 - r, inner.n - at), runs = 1;
        if (at == 0 && last >= 1) runs = std::max<int64_t>(1, std::min((r1 - r) / inner.n, next.n - index[last - 1]));
        if (runs > 1) run = inner.n;
        bool units = false;  // whole units of a table: the runs' tiles at once
        if constexpr (TAB) {
            if (tabled && table->outer == 1 && at == 0 && run == inner.n) {
                table_run<T, NT>(src, dst, a, b, *table, runs), units = true;
            } else if (tabled && table->outer == 2 && at == 0 && index[last - 1] == 0 && runs == next.n) {
                table_run<T, NT>(src, dst, a, b, *table, inner.n), units = true;
            } else if (tabled && !table->outer) {
                for (int64_t q = 0; q < runs; ++q) table_run<T, NT>(src, dst, a + q * next.s, b + q * next.d, *table, run);
                units = true;
            } else if (tabled && table->outer == 3) {
                for (int64_t q = 0; q < runs; ++q)
                    for (int64_t j = 0; j < st.l1.n; ++j)
                        table_run<T, NT>(src, dst, a + q * next.s + j * st.l1.s, b + q * next.d + j * st.l1.d, *table, run);
                units = true;
            }
        }
        const bool sides = !units && G && NT && kernel == K_SIDE_LINES && run == inner.n;  // whole side loops: streamed as one
        int64_t outer = 1;  // whole runs of `around` too, where it goes on with the rows (side_runs)
        if (sides && runs == next.n && last >= 2 && index[last - 1] == 0 && around.d == next.n * st.l0.n)
            outer = std::max<int64_t>(1, std::min((r1 - r) / (inner.n * next.n), around.n - index[last - 2]));
        if constexpr (G)
            if (sides)
                gather<T, (B ? B : 2), NT>(src, dst, a, b, rows, st.l0.n, st.scratch, runs * outer,
                                           Steps(next.s, outer > 1 ? next.n : 0, around.s), inner, window);
        // plain-stored block tiles of 4- and 8-byte words: all the rows under the two loops at once, set up once
        const bool done = !NT && !sides && !units && kernel == K_ROWS_SIMD &&
                          (((P == SCATTER_WINDOW || P == SCATTER) && scatter_rows_run<T, B>(src, dst, a, b, runs, next, run, inner, st)) ||
                           ((P == GATHER || P == GATHER_WINDOW) && gather_rows_run<T, B>(src, dst, a, b, runs, next, run, inner, st)));
        for (int64_t q = 0; q < (sides || done || units ? 0 : runs); ++q) {
            if constexpr (P == STRIDED) {
                if (kernel == K_STRIDED_LINES && strided_run<T, NT>(src, dst, a + q * next.s, b + q * next.d, run, inner, st)) continue;
                if (!NT && kernel == K_TRANSPOSED_RUNS) {
                    transposed_run<T>(src, dst, a + q * next.s, b + q * next.d, run, inner, st);
                    continue;
                }
            }
            if constexpr (P == GATHER)
                if (NT && (kernel == K_CHAINED_LINES || then == K_CHAINED_LINES) &&
                    gathers_chains<T, (B ? B : 2)>(src, dst, a + q * next.s, b + q * next.d, run, inner, st))
                    continue;
            if constexpr (G)
                if (NT && kernel == K_JOINED_LINES) {  // the run's rows go on from each other: streamed as one
                    gather<T, (B ? B : 2), NT>(src, dst, a + q * next.s, b + q * next.d, rows, st.l0.n, st.scratch, run, inner.s,
                                               Loop{1, 0, 0}, window);
                    continue;
                }
            if (P == CONTIGUOUS && kernel == K_CONTIGUOUS_RUNS &&
                contiguous_run<T, NT>(src, dst, a + q * next.s, b + q * next.d, run, inner, st))
                continue;
#if DM_HAVE_AVX512
            if constexpr (I)
                if (run * st.l0.n * B * (int64_t)sizeof(T) >= 2 * kLine &&
                    interleaved_run<T, (B ? B : 2)>(src, dst, a + q * next.s, b + q * next.d, run, inner, st))
                    continue;
#endif
            if (P == SCATTER && (kernel == K_SCATTER_RUNS || then == K_SCATTER_RUNS) &&
                scatter_run<T, B, NT>(src, dst, a + q * next.s, b + q * next.d, run, inner, st))
                continue;
            for (int64_t m = 0; m < run; ++m)
                tile<T, P, B, NT>(src, dst, a + q * next.s + m * inner.s, b + q * next.d + m * inner.d, st);
        }
        r += outer * runs * run;
        if (r >= r1) break;
        if (outer > 1) {
            index[last - 2] += outer - 1;
            a += (outer - 1) * around.s;
            b += (outer - 1) * around.d;
        }
        if (st.nouter) {  // the row the runs ended on: carry from there
            index[last] = inner.n - 1;
            a += (run - 1) * inner.s;
            b += (run - 1) * inner.d;
        }
        if (runs > 1) {
            index[last - 1] += runs - 1;
            a += (runs - 1) * next.s;
            b += (runs - 1) * next.d;
        }
        for (int k = last; k >= 0; --k) {  // next row
            const Loop& l = st.outer[k];
            if (++index[k] < l.n) {
                a += l.s;
                b += l.d;
                break;
            }
            index[k] = 0;
            a -= (l.n - 1) * l.s;
            b -= (l.n - 1) * l.d;
        }
    }
    carry.flush();
}


#if DM_HAVE_AVX512
// A plainly stored GATHER step of narrow words whose tiles make units (units_of): each block of R side
// rows by the units' loop at once (gather_units), a thread's partial blocks at its range's ends by run_rows.
template <typename T, int B>
void gather_unit_rows(const Step& st, char* src_base, char* dst_base, int64_t r0, int64_t r1) {
    Units un;
    if (!units_of(st, &un)) return run_rows<T, GATHER, B, false>(st, src_base, dst_base, r0, r1);
    const Loop inner = st.outer[st.nouter - 1];
    const int outside = st.nouter - (un.R > 1 ? 2 : 1);  // the loops around a block
    const int64_t per = inner.n * un.R, b0 = (r0 + per - 1) / per, b1 = r1 / per;
    if (b0 >= b1) return run_rows<T, GATHER, B, false>(st, src_base, dst_base, r0, r1);
    if (r0 < b0 * per) run_rows<T, GATHER, B, false>(st, src_base, dst_base, r0, b0 * per);
    int64_t off[4] = {0, 0, 0, 0};
    for (int64_t r = 1; r < un.R; ++r) off[r] = r * st.outer[st.nouter - 2].s * (int64_t)sizeof(T);
    for (int64_t k = b0; k < b1; ++k) {
        int64_t rest = k, a = st.src0, b = st.dst0;
        for (int q = outside - 1; q >= 0; --q) {
            const int64_t i = rest % st.outer[q].n;
            rest /= st.outer[q].n;
            a += i * st.outer[q].s, b += i * st.outer[q].d;
        }
        gather_units(dst_base + b * (int64_t)sizeof(T), src_base + a * (int64_t)sizeof(T), off, un, inner.n);
    }
    if (b1 * per < r1) run_rows<T, GATHER, B, false>(st, src_base, dst_base, b1 * per, r1);
}
#endif

// Gather windows only: 32- to 128-byte words (pixels) come only in SpaceToBatch's windows, so only those are
// compiled for them (every pattern would add a third to the build's time).
template <typename T, bool NT>
RowsFn pick_gather_window(int block) {
    return block == 2 ? run_rows<T, GATHER_WINDOW, 2, NT> : block == 3 ? run_rows<T, GATHER_WINDOW, 3, NT>
         : block == 4 ? run_rows<T, GATHER_WINDOW, 4, NT> : run_rows<T, GATHER_WINDOW, 0, NT>;
}

template <typename T, bool NT>
RowsFn pick_word(int pattern, int block, bool interleaved) {
    if constexpr (sizeof(T) <= 2 && !NT) {  // (see run_rows' I)
        if (pattern == SCATTER && interleaved)
            return block == 2 ? run_rows<T, SCATTER, 2, NT, true> : block == 3 ? run_rows<T, SCATTER, 3, NT, true>
                                                                 : run_rows<T, SCATTER, 4, NT, true>;
#if DM_HAVE_AVX512
        if (pattern == GATHER && interleaved)
            return block == 2 ? gather_unit_rows<T, 2> : block == 3 ? gather_unit_rows<T, 3> : gather_unit_rows<T, 4>;
#endif
    }
    switch (pattern) {
        case CONTIGUOUS: return run_rows<T, CONTIGUOUS, 0, NT>;
        case FILL: return run_rows<T, FILL, 0, NT>;
        case STRIDED: return run_rows<T, STRIDED, 0, NT>;
        case GATHER:
            return block == 2 ? run_rows<T, GATHER, 2, NT> : block == 3 ? run_rows<T, GATHER, 3, NT> : run_rows<T, GATHER, 4, NT>;
        case SCATTER:
            return block == 2 ? run_rows<T, SCATTER, 2, NT> : block == 3 ? run_rows<T, SCATTER, 3, NT> : run_rows<T, SCATTER, 4, NT>;
        case GATHER_WINDOW: return pick_gather_window<T, NT>(block);
        default:
            return block == 2 ? run_rows<T, SCATTER_WINDOW, 2, NT> : block == 3 ? run_rows<T, SCATTER_WINDOW, 3, NT>
                 : block == 4 ? run_rows<T, SCATTER_WINDOW, 4, NT> : run_rows<T, SCATTER_WINDOW, 0, NT>;
    }
}

// The run_rows of a word type for a pattern and block, plain or streamed. Each word type's instances are
// compiled in a file of their own (word1.cpp ... word16.cpp; wide.cpp the three widest), in parallel; the others see these
// declarations only. `interleaved`: SCATTER tiles that permute_rows takes, GATHER tiles that
// gather_units takes (pick).
template <typename T>
RowsFn rows_for(int pattern, int block, bool stream, bool interleaved) {
    if constexpr (std::is_same_v<T, W32> || std::is_same_v<T, W64> || std::is_same_v<T, W128>) {
        return stream ? pick_gather_window<T, true>(block) : pick_gather_window<T, false>(block);
    } else {
        return stream ? pick_word<T, true>(pattern, block, interleaved) : pick_word<T, false>(pattern, block, interleaved);
    }
}

extern template RowsFn rows_for<uint8_t>(int, int, bool, bool);
extern template RowsFn rows_for<uint16_t>(int, int, bool, bool);
extern template RowsFn rows_for<uint32_t>(int, int, bool, bool);
extern template RowsFn rows_for<uint64_t>(int, int, bool, bool);
extern template RowsFn rows_for<W16>(int, int, bool, bool);
extern template RowsFn rows_for<W32>(int, int, bool, bool);
extern template RowsFn rows_for<W64>(int, int, bool, bool);
extern template RowsFn rows_for<W128>(int, int, bool, bool);

}  // namespace dm

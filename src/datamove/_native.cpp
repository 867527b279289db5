// datamove._native: the compiled CPU core.
//
// It runs the loop nests that datamove.engines.strided lowers a plan to, over
// raw memory, with a thread pool of its own and the GIL released. Python keeps
// the validation and the planning; this file only moves words.
//
// A *program* is a flat int64 buffer: its number of steps, then per step
//
//     pattern, word, block, lo, hi, src_start, dst_start, nloops, (count, src_stride, dst_stride) * nloops
//
// with starts and strides in words from each array's lowest address. The last
// two loops are the tile (loop 1, loop 0); the loops before them are the rows,
// which the threads share. The tiles (see datamove.engines.native_engine):
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
// where it has AVX-512BW and VBMI too, those of 1- and 2-byte words.

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <numeric>
#include <type_traits>

#if (defined(__x86_64__) || defined(_M_X64)) && !defined(DM_PORTABLE)  // DM_PORTABLE: the scalar build other CPUs get (tests)
#include <emmintrin.h>
#define DM_HAVE_STREAM 1
#else
#define DM_HAVE_STREAM 0
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

// AVX-512F's whole-line streaming stores and two-vector permutes, for the streamed gathers of 4- and 8-byte
// words, in functions compiled for it and called only where the CPU (and the OS) has it; GCC and Clang only.
// DM_NO_AVX512: what a CPU without it runs (tests).
#if DM_HAVE_STREAM && defined(__GNUC__) && !defined(DM_NO_AVX512)
#include <immintrin.h>
#define DM_HAVE_AVX512 1
#else
#define DM_HAVE_AVX512 0
#endif

namespace {

enum Pattern { CONTIGUOUS = 0, GATHER = 1, SCATTER = 2, STRIDED = 3, FILL = 4, GATHER_WINDOW = 5, SCATTER_WINDOW = 6 };

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

struct Loop {
    int64_t n, s, d;
};

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
    bool reads_on;         // scatter windows of rows from 1 KiB: a tile's input rows go on where a later tile reads
    char* scratch;         // streamed: this thread's chunk buffer, kScratchBytes on a page (set by run_rows)
    struct Carry* carry;   // streamed: this thread's held partial line (set by run_rows)
};

// ------------------------------------------------------------------ stores

constexpr int64_t kLine = 64;
// Streams a thread may write side by side, each a line at a time, and still join each one's partial lines.
constexpr int64_t kJoinedStreams = 8;
// Rows a streamed gather buffers side by side (side_joined): 4 x 4 blocks.
constexpr int64_t kSideRows = 16;

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
    // The held bytes streamed as they are, a 4-byte word at a time (the last few bytes of a `to` that is
    // not a multiple of 4 stored plainly, as put_bytes stores such a row's tail).
    void flush() {
        if (!line) return;
        int64_t k = 0;
#if DM_HAVE_STREAM
        for (; k + 4 <= to; k += 4) stream4(line + k, buf + k);
#endif
        std::memcpy(line + k, buf + k, to - k);
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

#if DM_HAVE_AVX512
const bool kAvx512 = (__builtin_cpu_init(), __builtin_cpu_supports("avx512f"));
// AVX-512BW's masked byte loads and VBMI's byte permutes: gather_lines of 1- and 2-byte words.
const bool kAvx512Bytes = kAvx512 && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vbmi");

// n bytes (a multiple of 64) from s to d (on a line) around the cache, a whole line a store. Where the CPU
// has AVX-512F, put_bytes and put_lines store their bodies of 256 bytes or more so: on the 2-core Intel
// Xeon, same process, in turns, SpaceToDepth NHWC 128 MiB 0.94x -> 0.63x the copy floor, DepthToSpace
// NHWC 1.13-1.27x -> 0.93-1.03x (512-byte pieces), SpaceToBatch NHWC with pads 4 channels 1.13x ->
// 1.04x; the other cases within +-0.05. (A function of its own: its vzeroupper keeps the vector
// registers' upper halves clean for the SSE code around it.)
__attribute__((target("avx512f"))) DM_NOINLINE void stream_lines(char* d, const char* s, int64_t n) {
    for (int64_t k = 0; k < n; k += kLine) _mm512_stream_si512(reinterpret_cast<__m512i*>(d + k), _mm512_loadu_si512(s + k));
}

// n bytes (a multiple of 64) of zeros at d (on a line), as stream_lines (zero_bytes' bodies).
__attribute__((target("avx512f"))) DM_NOINLINE void zero_lines(char* d, int64_t n) {
    for (int64_t k = 0; k < n; k += kLine) _mm512_stream_si512(reinterpret_cast<__m512i*>(d + k), _mm512_setzero_si512());
}
#endif

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

void Carry::stream_whole() {
#if DM_HAVE_STREAM
    for (int k = 0; k < kLine; k += 16)
        _mm_stream_si128(reinterpret_cast<__m128i*>(line + k), _mm_load_si128(reinterpret_cast<const __m128i*>(buf + k)));
#else
    std::memcpy(line, buf, kLine);  // (no build without streaming stores streams: run's `stream` is 0 there)
#endif
    line = nullptr;
}

// put_bytes<true> for a piece of a streamed output that the thread's next piece may go on from: the line
// the piece starts in goes out whole where the carry holds the rest of it, and the line it ends in is
// held (see Carry).
inline void put_joined(char* d, const char* s, int64_t n, Carry* carry) {
    char* const first = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(d) & ~uintptr_t(kLine - 1));
    char* const last = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(d + n) & ~uintptr_t(kLine - 1));
    if (!carry || first == last) return put_bytes<true>(d, s, n);
    if (d != first) {
        const int64_t h = first + kLine - d;
        if (carry->goes_on(d)) {
            carry->finish(s, h);
        } else {
            put_bytes<true>(d, s, h);
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
#if DM_HAVE_STREAM
            _mm_prefetch(at[i], _MM_HINT_T0);
#elif defined(__GNUC__)
            __builtin_prefetch(at[i]);
#endif
            at[i] += kLine;
            if (at[i] >= end[i]) ++i;
        }
    }
};

// ------------------------------------------------------------------ tiles
// a, b: word indices of the tile's first element in src and dst.

// The offsets of a block tile's B rows: evenly spaced by `step`, or in groups of `group` spaced by `far`.
template <int B>
struct Rows {
    int64_t at[4];
    Rows(int64_t step, int64_t group = 0, int64_t far = 0) {
        for (int j = 0; j < B; ++j) at[j] = group ? (j % group) * step + (j / group) * far : j * step;
    }
    explicit Rows(const int64_t* offsets) {
        for (int j = 0; j < B; ++j) at[j] = offsets[j];
    }
};

// ------------------------------------------------------------------ SIMD block bodies
// The block tiles the compiler does not vectorize well on plain SSE2 (no -march): it turns stride-3
// and byte stride-4 loops into scalar code or long shuffle chains. Each returns how many positions
// it did; the caller's scalar loop does the rest. In cache, 4-byte GATHER<3> went from 4.7x a
// memcpy of the same bytes to 1.6x, byte GATHER<4> from 6.2x to 1.5x.

#if DM_HAVE_STREAM
// out row j, positions [0, n & ~3)  <-  in[3 * i + j], 4-byte words: three loads, seven shuffles, three stores.
inline int64_t gather3_words(const uint32_t* in, uint32_t* o0, uint32_t* o1, uint32_t* o2, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const __m128 x0 = _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 3 * i)));
        const __m128 x1 = _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 3 * i + 4)));
        const __m128 x2 = _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 3 * i + 8)));
        // row 0 = x0[0] x0[3] x1[2] x2[1]; row 1 = x0[1] x1[0] x1[3] x2[2]; row 2 = x0[2] x1[1] x2[0] x2[3]
        const __m128 r0 = _mm_shuffle_ps(x0, _mm_shuffle_ps(x1, x2, _MM_SHUFFLE(1, 1, 2, 2)), _MM_SHUFFLE(2, 0, 3, 0));
        const __m128 r1 = _mm_shuffle_ps(_mm_shuffle_ps(x0, x1, _MM_SHUFFLE(0, 0, 1, 1)),
                                         _mm_shuffle_ps(x1, x2, _MM_SHUFFLE(2, 2, 3, 3)), _MM_SHUFFLE(2, 0, 2, 0));
        const __m128 r2 = _mm_shuffle_ps(_mm_shuffle_ps(x0, x1, _MM_SHUFFLE(1, 1, 2, 2)), x2, _MM_SHUFFLE(3, 0, 2, 0));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o0 + i), _mm_castps_si128(r0));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o1 + i), _mm_castps_si128(r1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o2 + i), _mm_castps_si128(r2));
    }
    return i;
}

// in[3 * i + j]  <-  in row j, positions [0, n & ~3), 4-byte words: the mirror image (nine shuffles).
inline int64_t scatter3_words(const uint32_t* i0, const uint32_t* i1, const uint32_t* i2, uint32_t* out, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const __m128 r0 = _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(i0 + i)));
        const __m128 r1 = _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(i1 + i)));
        const __m128 r2 = _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(i2 + i)));
        // x0 = r0[0] r1[0] r2[0] r0[1]; x1 = r1[1] r2[1] r0[2] r1[2]; x2 = r2[2] r0[3] r1[3] r2[3]
        const __m128 x0 = _mm_shuffle_ps(_mm_unpacklo_ps(r0, r1), _mm_shuffle_ps(r2, r0, _MM_SHUFFLE(1, 1, 0, 0)), _MM_SHUFFLE(2, 0, 1, 0));
        const __m128 x1 = _mm_shuffle_ps(_mm_unpacklo_ps(r1, r2), _mm_unpackhi_ps(r0, r1), _MM_SHUFFLE(1, 0, 3, 2));
        const __m128 x2 = _mm_shuffle_ps(_mm_shuffle_ps(r2, r0, _MM_SHUFFLE(3, 3, 2, 2)), _mm_unpackhi_ps(r1, r2), _MM_SHUFFLE(3, 2, 2, 0));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 3 * i), _mm_castps_si128(x0));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 3 * i + 4), _mm_castps_si128(x1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 3 * i + 8), _mm_castps_si128(x2));
    }
    return i;
}

// Words of W bytes of two vectors interleaved (their low halves).
template <int W>
inline __m128i unpack_lo(__m128i x, __m128i y) {
    return W == 1 ? _mm_unpacklo_epi8(x, y) : W == 2 ? _mm_unpacklo_epi16(x, y) : W == 4 ? _mm_unpacklo_epi32(x, y)
                                                                                    : _mm_unpacklo_epi64(x, y);
}
template <int W>
inline __m128i unpack_hi(__m128i x, __m128i y) {
    return W == 1 ? _mm_unpackhi_epi8(x, y) : W == 2 ? _mm_unpackhi_epi16(x, y) : W == 4 ? _mm_unpackhi_epi32(x, y)
                                                                                    : _mm_unpackhi_epi64(x, y);
}

// Blocks of B = 2 or 4 rows of words of W = 1 or 2 bytes, 32 bytes at a time, by rounds of unpacks: one
// round takes the 32 bytes (two vectors) through a perfect shuffle (word k and word k + 16 / W side by side),
// whose order is log2(32 / W); interleaving B rows is log2(B) rounds, taking them apart the rest. The
// compiler moved these a word at a time (TensorFlow's space_to_batch_nd of one uint8 channel: 2.2x the
// copy floor).
template <int W, int B>
constexpr int kApartRounds = (W == 1 ? 5 : 4) - (B == 4 ? 2 : 1);

// out row j, positions [0, n - n % P)  <-  in[B * i + j]: P = 32 / (W * B) positions per block.
template <int W, int B>
inline int64_t gather_unpack(const char* in, char* const o[B], int64_t n) {
    constexpr int P = 32 / (W * B);
    int64_t i = 0;
    for (; i + P <= n; i += P) {
        __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i * B * W));
        __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i * B * W + 16));
        for (int r = 0; r < kApartRounds<W, B>; ++r) {
            const __m128i lo = unpack_lo<W>(a, b), hi = unpack_hi<W>(a, b);
            a = lo, b = hi;
        }
        if (B == 2) {
            _mm_storeu_si128(reinterpret_cast<__m128i*>(o[0] + i * W), a);
            _mm_storeu_si128(reinterpret_cast<__m128i*>(o[1] + i * W), b);
        } else {
            _mm_storel_epi64(reinterpret_cast<__m128i*>(o[0] + i * W), a);
            _mm_storel_epi64(reinterpret_cast<__m128i*>(o[1] + i * W), _mm_unpackhi_epi64(a, a));
            _mm_storel_epi64(reinterpret_cast<__m128i*>(o[2] + i * W), b);
            _mm_storel_epi64(reinterpret_cast<__m128i*>(o[B - 1] + i * W), _mm_unpackhi_epi64(b, b));
        }
    }
    return i;
}

// out[B * i + j]  <-  in row j, positions [0, n - n % P): the mirror image (log2(B) rounds).
template <int W, int B>
inline int64_t scatter_unpack(const char* const in[B], char* out, int64_t n) {
    constexpr int P = 32 / (W * B);
    int64_t i = 0;
    for (; i + P <= n; i += P) {
        __m128i a, b;
        if (B == 2) {
            a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in[0] + i * W));
            b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in[1] + i * W));
        } else {
            a = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in[0] + i * W)),
                                   _mm_loadl_epi64(reinterpret_cast<const __m128i*>(in[1] + i * W)));
            b = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in[2] + i * W)),
                                   _mm_loadl_epi64(reinterpret_cast<const __m128i*>(in[B - 1] + i * W)));
        }
        for (int r = 0; r < (B == 4 ? 2 : 1); ++r) {
            const __m128i lo = unpack_lo<W>(a, b), hi = unpack_hi<W>(a, b);
            a = lo, b = hi;
        }
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i * B * W), a);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i * B * W + 16), b);
    }
    return i;
}

// out row j, positions [0, n & ~15)  <-  in[4 * i + j], bytes: the 4 x 16 bytes of four loads transposed
// by byte unpacks, each stage halving the distance between a row's bytes (16 unpacks per 64 bytes; by
// shifts, masks and saturating packs it took 36).
inline int64_t gather4_bytes(const uint8_t* in, uint8_t* const o[4], int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i x[4];
        for (int k = 0; k < 4; ++k) x[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 4 * i + 16 * k));
        // row r of position p written r.p: a = 0.0 4.0 0.1 4.1 .. 1.3 5.3 and b the same of 2 6, 3 7
        const __m128i a = _mm_unpacklo_epi8(x[0], x[1]), b = _mm_unpackhi_epi8(x[0], x[1]);
        const __m128i c = _mm_unpacklo_epi8(x[2], x[3]), d = _mm_unpackhi_epi8(x[2], x[3]);
        // e = 0.0 2.0 4.0 6.0 0.1 2.1 .. 6.3, f the same of 1 3 5 7; g, h of 8 10 12 14 and 9 11 13 15
        const __m128i e = _mm_unpacklo_epi8(a, b), f = _mm_unpackhi_epi8(a, b);
        const __m128i g = _mm_unpacklo_epi8(c, d), h = _mm_unpackhi_epi8(c, d);
        // rows 0 and 1 of positions 0-7 (lo), rows 2 and 3 (hi); then of positions 8-15
        const __m128i lo01 = _mm_unpacklo_epi8(e, f), lo23 = _mm_unpackhi_epi8(e, f);
        const __m128i hi01 = _mm_unpacklo_epi8(g, h), hi23 = _mm_unpackhi_epi8(g, h);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o[0] + i), _mm_unpacklo_epi64(lo01, hi01));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o[1] + i), _mm_unpackhi_epi64(lo01, hi01));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o[2] + i), _mm_unpacklo_epi64(lo23, hi23));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o[3] + i), _mm_unpackhi_epi64(lo23, hi23));
    }
    return i;
}
#endif

#if DM_HAVE_SSSE3
const bool kSsse3 = (__builtin_cpu_init(), __builtin_cpu_supports("ssse3"));

// Byte shuffles for blocks of 3 words of W bytes: 48 bytes as three vectors. Gathering, [j][k] picks from
// input vector k the bytes of output row j (its next 16 bytes); scattering, [k][j] picks from row j's
// 16 bytes those of output vector k. -128: a zero byte, for the OR of the three.
struct Shuffle3 {
    alignas(16) int8_t m[3][3][16];
};

template <int W, bool Gather>
constexpr Shuffle3 shuffle3() {
    Shuffle3 t{};
    for (int a = 0; a < 3; ++a)
        for (int k = 0; k < 3; ++k)
            for (int q = 0; q < 16; ++q) t.m[a][k][q] = -128;
    for (int a = 0; a < 3; ++a)
        for (int q = 0; q < 16; ++q) {
            if (Gather) {  // row a, byte q: position q / W, word 3 * (q / W) + a of the 48 bytes
                const int from = (3 * (q / W) + a) * W + q % W;
                t.m[a][from / 16][q] = (int8_t)(from % 16);
            } else {       // vector a, byte q: byte g of the 48, word g / W = 3 * position + row
                const int g = 16 * a + q, word = g / W;
                t.m[a][word % 3][q] = (int8_t)((word / 3) * W + g % W);
            }
        }
    return t;
}

template <int W, bool Gather>
constexpr Shuffle3 kShuffle3 = shuffle3<W, Gather>();

// out row j, positions [0, n & ~(16 / W - 1))  <-  in[3 * i + j], words of W = 1 or 2 bytes: nine shuffles per 48 bytes.
template <int W>
__attribute__((target("ssse3"))) int64_t gather3_narrow(const char* in, char* o0, char* o1, char* o2, int64_t n) {
    constexpr int64_t P = 16 / W;  // positions per vector
    const Shuffle3& t = kShuffle3<W, true>;
    __m128i m[3][3];
    for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 3; ++k) m[j][k] = _mm_load_si128(reinterpret_cast<const __m128i*>(t.m[j][k]));
    char* const o[3] = {o0, o1, o2};
    int64_t i = 0;
    for (; i + P <= n; i += P) {
        __m128i x[3];
        for (int k = 0; k < 3; ++k) x[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 3 * W * i + 16 * k));
        for (int j = 0; j < 3; ++j) {
            const __m128i r = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(x[0], m[j][0]), _mm_shuffle_epi8(x[1], m[j][1])),
                                           _mm_shuffle_epi8(x[2], m[j][2]));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(o[j] + W * i), r);
        }
    }
    return i;
}

// in[3 * i + j]  <-  in row j, words of W = 1 or 2 bytes: the mirror image.
template <int W>
__attribute__((target("ssse3"))) int64_t scatter3_narrow(const char* i0, const char* i1, const char* i2, char* out, int64_t n) {
    constexpr int64_t P = 16 / W;
    const Shuffle3& t = kShuffle3<W, false>;
    __m128i m[3][3];
    for (int k = 0; k < 3; ++k)
        for (int j = 0; j < 3; ++j) m[k][j] = _mm_load_si128(reinterpret_cast<const __m128i*>(t.m[k][j]));
    int64_t i = 0;
    for (; i + P <= n; i += P) {
        const __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(i0 + W * i));
        const __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(i1 + W * i));
        const __m128i r2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(i2 + W * i));
        for (int k = 0; k < 3; ++k) {
            const __m128i x = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(r0, m[k][0]), _mm_shuffle_epi8(r1, m[k][1])),
                                           _mm_shuffle_epi8(r2, m[k][2]));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 3 * W * i + 16 * k), x);
        }
    }
    return i;
}
#endif

template <typename T, int B>
inline int64_t gather_simd(const T* in, T* const o[B], int64_t n) {
#if DM_HAVE_STREAM
    if (std::is_same<T, uint32_t>::value && B == 3)
        return gather3_words(reinterpret_cast<const uint32_t*>(in), reinterpret_cast<uint32_t*>(o[0]),
                             reinterpret_cast<uint32_t*>(o[1]), reinterpret_cast<uint32_t*>(o[B - 1]), n);
    if constexpr (sizeof(T) <= 2 && (B == 2 || B == 4)) {
        int64_t done = 0;
        if (sizeof(T) == 1 && B == 4)
            done = gather4_bytes(reinterpret_cast<const uint8_t*>(in), reinterpret_cast<uint8_t* const*>(o), n);
        char* rest[B];
        for (int j = 0; j < B; ++j) rest[j] = reinterpret_cast<char*>(o[j] + done);
        const char* from = reinterpret_cast<const char*>(in + done * B);
        return done + (sizeof(T) == 1 ? gather_unpack<1, B>(from, rest, n - done) : gather_unpack<2, B>(from, rest, n - done));
    }
#endif
#if DM_HAVE_SSSE3
    if constexpr (sizeof(T) <= 2 && B == 3)  // (constexpr: only narrow words instantiate it)
        if (kSsse3) return gather3_narrow<sizeof(T)>(reinterpret_cast<const char*>(in), reinterpret_cast<char*>(o[0]),
                                         reinterpret_cast<char*>(o[1]), reinterpret_cast<char*>(o[B - 1]), n);
#endif
    return 0;
}

template <typename T, int B>
inline int64_t scatter_simd(const T* const in[B], T* out, int64_t n) {
#if DM_HAVE_STREAM
    if constexpr (sizeof(T) <= 2 && (B == 2 || B == 4)) {
        const char* rows[B];
        for (int j = 0; j < B; ++j) rows[j] = reinterpret_cast<const char*>(in[j]);
        return sizeof(T) == 1 ? scatter_unpack<1, B>(rows, reinterpret_cast<char*>(out), n)
                              : scatter_unpack<2, B>(rows, reinterpret_cast<char*>(out), n);
    }
    if (std::is_same<T, uint32_t>::value && B == 3)
        return scatter3_words(reinterpret_cast<const uint32_t*>(in[0]), reinterpret_cast<const uint32_t*>(in[1]),
                              reinterpret_cast<const uint32_t*>(in[B - 1]), reinterpret_cast<uint32_t*>(out), n);
#endif
#if DM_HAVE_SSSE3
    if constexpr (sizeof(T) <= 2 && B == 3)
        if (kSsse3) return scatter3_narrow<sizeof(T)>(reinterpret_cast<const char*>(in[0]), reinterpret_cast<const char*>(in[1]),
                                          reinterpret_cast<const char*>(in[B - 1]), reinterpret_cast<char*>(out), n);
#endif
    return 0;
}

template <typename T, int B>
inline void gather_rows(const T* __restrict src, T* __restrict dst, int64_t a, int64_t b, const Rows<B>& rows, int64_t n) {
    // out row j, position i  <-  in[i * B + j]
    {
        T* o[B];
        for (int j = 0; j < B; ++j) o[j] = dst + b + rows.at[j];
        const int64_t done = gather_simd<T, B>(src + a, o, n);
        if (done) {
            src += done * B, dst += done, n -= done;
        }
    }
    if (B == 2) {
        T* __restrict o0 = dst + b;
        T* __restrict o1 = dst + b + rows.at[1];
        const T* __restrict in = src + a;
        for (int64_t i = 0; i < n; ++i) {
            o0[i] = in[2 * i];
            o1[i] = in[2 * i + 1];
        }
    } else if (B == 3) {
        T* __restrict o0 = dst + b;
        T* __restrict o1 = dst + b + rows.at[1];
        T* __restrict o2 = dst + b + rows.at[2];
        const T* __restrict in = src + a;
        for (int64_t i = 0; i < n; ++i) {
            o0[i] = in[3 * i];
            o1[i] = in[3 * i + 1];
            o2[i] = in[3 * i + 2];
        }
    } else {
        T* __restrict o0 = dst + b;
        T* __restrict o1 = dst + b + rows.at[1];
        T* __restrict o2 = dst + b + rows.at[2];
        T* __restrict o3 = dst + b + rows.at[3];
        const T* __restrict in = src + a;
        for (int64_t i = 0; i < n; ++i) {
            o0[i] = in[4 * i];
            o1[i] = in[4 * i + 1];
            o2[i] = in[4 * i + 2];
            o3[i] = in[4 * i + 3];
        }
    }
}

template <typename T, int B>
inline void scatter_rows(const T* __restrict src, T* __restrict dst, int64_t a, int64_t b, const Rows<B>& rows, int64_t n) {
    // out[i * B + j]  <-  in row j, position i
    {
        const T* in[B];
        for (int j = 0; j < B; ++j) in[j] = src + a + rows.at[j];
        const int64_t done = scatter_simd<T, B>(in, dst + b, n);
        if (done) {
            src += done, dst += done * B, n -= done;
        }
    }
    T* __restrict out = dst + b;
    const T* __restrict i0 = src + a;
    const T* __restrict i1 = src + a + rows.at[1];
    if (B == 2) {
        for (int64_t i = 0; i < n; ++i) {
            out[2 * i] = i0[i];
            out[2 * i + 1] = i1[i];
        }
    } else if (B == 3) {
        const T* __restrict i2 = src + a + rows.at[2];
        for (int64_t i = 0; i < n; ++i) {
            out[3 * i] = i0[i];
            out[3 * i + 1] = i1[i];
            out[3 * i + 2] = i2[i];
        }
    } else {
        const T* __restrict i2 = src + a + rows.at[2];
        const T* __restrict i3 = src + a + rows.at[3];
        for (int64_t i = 0; i < n; ++i) {
            out[4 * i] = i0[i];
            out[4 * i + 1] = i1[i];
            out[4 * i + 2] = i2[i];
            out[4 * i + 3] = i3[i];
        }
    }
}

// Four rows of four 4-byte words, transposed in registers: out[4 * i + j] <- in row j, position i.
// Channels-last depth_first SCATTER tiles with four channels (a 2 x 2 block), 64 bytes each and too
// short for the loops above to pay. (Their GATHER mirror images go to gather_rows_run, or stream.)
template <typename T, int B, bool NT>
inline bool transpose4(const T* src, T* dst, int64_t a, int64_t b, const Rows<B>& rows, int64_t n) {
#if DM_HAVE_STREAM
    if (sizeof(T) != 4 || B != 4 || n != 4) return false;
    __m128 r[4];
    for (int k = 0; k < 4; ++k) r[k] = _mm_castsi128_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + a + rows.at[k])));
    _MM_TRANSPOSE4_PS(r[0], r[1], r[2], r[3]);
    for (int k = 0; k < 4; ++k) {
        T* o = dst + b + 4 * k;
        if (NT && (reinterpret_cast<uintptr_t>(dst + b) & 15) == 0)
            _mm_stream_ps(reinterpret_cast<float*>(o), r[k]);
        else
            _mm_storeu_si128(reinterpret_cast<__m128i*>(o), _mm_castps_si128(r[k]));
    }
    return true;
#else
    (void)src, (void)dst, (void)a, (void)b, (void)rows, (void)n;
    return false;
#endif
}

// Whether a SCATTER step's tiles are pixels of a few channels that scatter_run moves in registers: 4-byte
// words, B rows (2 or 4) of n = 2 or 4 positions each, out[i * B + j] <- row j, position i.
inline bool small_scatter(const Step& st) {
    return st.pattern == SCATTER && st.word == 4 && (st.block == 2 || st.block == 4) && (st.l0.n == 2 || st.l0.n == 4) &&
           st.l0.s == 1 && st.l0.d == st.block;
}

#if DM_HAVE_STREAM
template <bool NT>
inline void put16(float* o, __m128 v) {
    if (NT) {
        _mm_stream_ps(o, v);
    } else {
        _mm_storeu_ps(o, v);
    }
}

// Eight bytes (two 4-byte words) into the low half of a vector.
inline __m128 load8(const float* p) {
    return _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

// A run of small_scatter tiles (tile m reads rows at src + m * sm + at[j], writes n * B words at dst + m * dm),
// each transposed in registers: as one loop, not tile by tile, where each tile's set-up cost more than its
// moves (DepthToSpace depth_first NHWC with 16 channels: 32-byte tiles). NT: dst and dm on 16 bytes.
// Where the rows lie in two or more input streams (rows a line or more apart: SpaceToDepth depth_first
// NHWC, a 2 x 2 block's two input rows), each stream's input is asked for 4 KiB ahead once a line: 2
// channels, 64 MiB, 1.09x -> 0.75x the copy floor (same process, in turns). One stream (DepthToSpace)
// is left to the CPU's prefetchers.
template <int B, int N, bool NT>
inline void scatter_run_of(const float* s, float* d, const int64_t* at, int64_t run, int64_t sm, int64_t dm) {
    const int64_t a1 = at[1], a2 = at[2], a3 = at[3];
    const int64_t every = std::max<int64_t>(1, 16 / std::max<int64_t>(1, sm));  // tiles a line of input
    int64_t streams[B], count = 0;
    for (int j = 0; j < B; ++j)
        if (j == 0 || std::abs(at[j] - at[j - 1]) >= 16) streams[count++] = at[j];
    for (int64_t m = 0, ask = count > 1 ? 0 : run; m < run; ++m, s += sm, d += dm) {
        if (m == ask) {  // (a counter: a modulo here cost DepthToSpace 1.2x -> 1.7x)
            ask += every;
            for (int64_t j = 0; j < count; ++j) _mm_prefetch(reinterpret_cast<const char*>(s + streams[j]) + 4096, _MM_HINT_T0);
        }
        if (B == 2 && N == 2) {  // [r0 r0'] [r1 r1'] -> [r0 r1 r0' r1']
            put16<NT>(d, _mm_unpacklo_ps(load8(s), load8(s + a1)));
        } else if (B == 2 && N == 4) {
            const __m128 r0 = _mm_loadu_ps(s), r1 = _mm_loadu_ps(s + a1);
            put16<NT>(d, _mm_unpacklo_ps(r0, r1));
            put16<NT>(d + 4, _mm_unpackhi_ps(r0, r1));
        } else if (B == 4 && N == 2) {
            const __m128 x01 = _mm_unpacklo_ps(load8(s), load8(s + a1));        // r0[0] r1[0] r0[1] r1[1]
            const __m128 x23 = _mm_unpacklo_ps(load8(s + a2), load8(s + a3));   // r2[0] r3[0] r2[1] r3[1]
            put16<NT>(d, _mm_movelh_ps(x01, x23));
            put16<NT>(d + 4, _mm_movehl_ps(x23, x01));
        } else {
            __m128 r0 = _mm_loadu_ps(s), r1 = _mm_loadu_ps(s + a1), r2 = _mm_loadu_ps(s + a2), r3 = _mm_loadu_ps(s + a3);
            _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
            put16<NT>(d, r0);
            put16<NT>(d + 4, r1);
            put16<NT>(d + 8, r2);
            put16<NT>(d + 12, r3);
        }
    }
}
#endif

#if DM_HAVE_STREAM
// R <= 8 bytes at p as the low bytes of an integer, from loads of whole words (a fixed-size memcpy into a
// zeroed local is stored byte-wise and then loaded whole: a store-forwarding stall per row).
template <int R>
inline uint64_t load_low(const char* p) {
    uint64_t v = 0;
    uint32_t w4 = 0, t4 = 0;
    uint16_t w2 = 0;
    if (R == 8) {
        std::memcpy(&v, p, 8);
    } else if (R >= 4) {
        std::memcpy(&w4, p, 4);
        if (R > 4) std::memcpy(&t4, p + R - 4, 4);  // overlaps the first four: the same bytes, OR-ed
        v = (uint64_t)w4 | (uint64_t)t4 << (8 * (R - 4));
    } else if (R >= 2) {
        std::memcpy(&w2, p, 2);
        v = w2;
        if (R == 3) v |= (uint64_t)(uint8_t)p[2] << 16;
    } else {
        v = (uint8_t)p[0];
    }
    return v;
}

// The low S <= 16 bytes of v at d, from registers.
template <int S>
inline void store_low(char* d, __m128i v) {
    if (S == 16) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d), v);
    } else if (S >= 8) {
        _mm_storel_epi64(reinterpret_cast<__m128i*>(d), v);
        store_low<(S >= 8 ? S - 8 : 0)>(d + 8, _mm_srli_si128(v, 8));
    } else if (S >= 4) {
        const uint32_t w = (uint32_t)_mm_cvtsi128_si32(v);
        std::memcpy(d, &w, 4);
        store_low<(S >= 4 && S < 8 ? S - 4 : 0)>(d + 4, _mm_srli_si128(v, 4));
    } else if (S >= 2) {
        const uint16_t w = (uint16_t)_mm_cvtsi128_si32(v);
        std::memcpy(d, &w, 2);
        if (S == 3) d[2] = (char)(uint8_t)(_mm_cvtsi128_si32(v) >> 16);
    } else if (S == 1) {
        d[0] = (char)(uint8_t)_mm_cvtsi128_si32(v);
    }
}

// A run of SCATTER tiles of narrow words (W = 1 or 2 bytes: a pixel of a few uint8 or float16 channels),
// B = 2 or 4 rows of N positions, N * W <= 8: each row's N * W bytes into a vector, interleaved a word
// then two words at a time (out[i * B + j] <- row j, position i), the N * B * W bytes stored from registers.
// Byte by byte, SpaceToDepth depth_first of uint8 NHWC images took 4-5x the copy floor.
template <int W, int B, int N>
inline void narrow_scatter_run(const char* s, char* d, const int64_t* at, int64_t run, int64_t sm, int64_t dm) {
    constexpr int row = N * W, size = N * W * B;
    for (int64_t m = 0; m < run; ++m, s += sm, d += dm) {
        __m128i r[B];
        for (int j = 0; j < B; ++j) r[j] = _mm_cvtsi64_si128((long long)load_low<row>(s + at[j] * W));
        if (B == 2) {
            store_low<size>(d, unpack_lo<W>(r[0], r[1]));
        } else {
            const __m128i x01 = unpack_lo<W>(r[0], r[1]), x23 = unpack_lo<W>(r[B - 2], r[B - 1]);
            store_low<(size < 16 ? size : 16)>(d, unpack_lo<2 * W>(x01, x23));
            if (size > 16) store_low<(size > 16 ? size - 16 : 0)>(d + 16, unpack_hi<2 * W>(x01, x23));
        }
    }
}

template <int W, int B>
inline bool narrow_scatter(const char* s, char* d, const Step& st, int64_t run, const Loop& inner) {
    const int64_t sm = inner.s * W, dm = inner.d * W;
    switch (st.l0.n * W) {
        case 1 * W: return narrow_scatter_run<W, B, 1>(s, d, st.at, run, sm, dm), true;
        case 2 * W: return narrow_scatter_run<W, B, 2>(s, d, st.at, run, sm, dm), true;
        case 3 * W: return narrow_scatter_run<W, B, 3>(s, d, st.at, run, sm, dm), true;
        case 4 * W: return narrow_scatter_run<W, B, 4>(s, d, st.at, run, sm, dm), true;
        default: break;
    }
    if (W == 1) {
        switch (st.l0.n) {
            case 5: return narrow_scatter_run<1, B, 5>(s, d, st.at, run, sm, dm), true;
            case 6: return narrow_scatter_run<1, B, 6>(s, d, st.at, run, sm, dm), true;
            case 7: return narrow_scatter_run<1, B, 7>(s, d, st.at, run, sm, dm), true;
            case 8: return narrow_scatter_run<1, B, 8>(s, d, st.at, run, sm, dm), true;
            default: break;
        }
    }
    return false;
}
#endif

// A run of `run` small_scatter tiles `inner` apart; false where the step is not one (or, streamed, its
// stores are not on 16 bytes: streams_whole streams such steps only where they are). Narrow words: see
// narrow_scatter_run (plain stores only: streams_whole never streams them).
#if DM_HAVE_AVX512
// A streamed run of small_scatter tiles whose rows all lie in one input stream (DepthToSpace depth_first
// NHWC: a pixel's channels), a whole output line at a time: the 16 / (N * B) tiles of a line read their
// words from two 64-byte loads (tile t's row j, position i: lane t * sm + at[j] + i), one permute puts
// them in place, one 64-byte streaming store writes the line. It takes the tiles [*lead, end) that
// write whole lines and returns end (0 where the lanes do not fit or no tile starts a line); the caller
// stores the others with scatter_run_of, outside this function: legacy SSE code run with the upper
// halves of the vector registers in use (before this function's vzeroupper) ran 2x slower.
// 16-byte stores, as scatter_run_of makes them, ran 8 channels into 2 at 1.13-1.18x the copy floor.
// The second load is masked to the lanes used: whole, it read past an input ending at an unreadable
// page (test_no_read_past_the_input); masked, 0.87-0.92x against 0.84-0.88x whole (in turns).
template <int B, int N>
__attribute__((target("avx512f"))) DM_NOINLINE int64_t scatter_run_lines(const float* s, float* d, const int64_t* at, int64_t run,
                                                                          int64_t sm, int64_t dm, int64_t* lead) {
    constexpr int T = 16 / (N * B);  // tiles a line
    const int64_t gap = (kLine - (int64_t)(reinterpret_cast<uintptr_t>(d) & (kLine - 1))) & (kLine - 1);  // bytes to a line
    if (!kAvx512 || dm != N * B || sm < 0 || gap % (dm * 4)) return 0;
    // Lane p = (t * N + i) * B + j of the permute's index: t * sm + at[j] + i, built in registers. (Stored
    // word by word and loaded whole, the load cannot take the words from the queued stores: it waited
    // for the queue to drain, streaming stores and all, once a run.)
    int64_t top = 0;
    for (int j = 0; j < B; ++j) {
        if (at[j] < 0) return 0;
        top = std::max(top, at[j]);
    }
    // lanes read (16 distinct ones: never under 16): the second load is masked to them, so no word past
    // the run's input is read
    const int64_t need = (T - 1) * sm + top + N;
    if (need > 32 || need < 16) return 0;
    constexpr int LB = B == 2 ? 1 : 2, LN = N == 2 ? 1 : 2;
    const __m512i p = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    __m512i rows = _mm512_set1_epi32((int)at[0]);
    for (int j = 1; j < B; ++j)
        rows = _mm512_mask_mov_epi32(rows, (__mmask16)((B == 2 ? 0x5555 : 0x1111) << j), _mm512_set1_epi32((int)at[j]));
    const __m512i i = _mm512_and_si512(_mm512_srli_epi32(p, LB), _mm512_set1_epi32(N - 1));
    const __m512i t = _mm512_srli_epi32(p, LB + LN);
    const __m512i idx = _mm512_add_epi32(_mm512_add_epi32(rows, i), _mm512_mullo_epi32(t, _mm512_set1_epi32((int)(T > 1 ? sm : 0))));  // (T = 1: t = 0, sm any size)
    const __mmask16 second = (__mmask16)((1u << (need - 16)) - 1);
    *lead = std::min<int64_t>(run, gap / (dm * 4));
    int64_t m = *lead;
    for (; m + T <= run; m += T) {
        const float* p = s + m * sm;
        _mm_prefetch(reinterpret_cast<const char*>(p) + 4096, _MM_HINT_T0);
        const __m512 x = _mm512_loadu_ps(p), y = _mm512_maskz_loadu_ps(second, p + 16);
        _mm512_stream_ps(d + m * dm, _mm512_permutex2var_ps(x, idx, y));
    }
    return m;
}
#endif

template <typename T, int B, bool NT>
inline bool scatter_run(const T* src, T* dst, int64_t a, int64_t b, int64_t run, const Loop& inner, const Step& st) {
#if DM_HAVE_STREAM
    if (B < 2 || st.l0.s != 1 || st.l0.d != B) return false;
    if (B == 3 && sizeof(T) <= 2 && st.l0.n <= 8 && !NT) {  // blocks of 3 (no unpacks): word by word, a run at a time
        const T* s = src + a;
        T* d = dst + b;
        const int64_t n = st.l0.n;
        for (int64_t m = 0; m < run; ++m, s += inner.s, d += inner.d)
            for (int64_t i = 0; i < n; ++i)
                for (int j = 0; j < B; ++j) d[i * B + j] = s[st.at[j] + i];
        return true;
    }
    if (B == 3) return false;
    if (sizeof(T) <= 2) {
        if (NT) return false;
        const char* s = reinterpret_cast<const char*>(src + a);
        char* d = reinterpret_cast<char*>(dst + b);
        return sizeof(T) == 1 ? narrow_scatter<1, B>(s, d, st, run, inner) : narrow_scatter<2, B>(s, d, st, run, inner);
    }
    if (sizeof(T) != 4 || !small_scatter(st)) return false;
    const float* s = reinterpret_cast<const float*>(src + a);
    float* d = reinterpret_cast<float*>(dst + b);
    if (NT && ((reinterpret_cast<uintptr_t>(d) & 15) || (inner.d & 3))) return false;
    auto tiles = [&](int64_t m0, int64_t m1) {  // tiles [m0, m1), 16 bytes a store
        if (st.l0.n == 2) {
            scatter_run_of<B, 2, NT>(s + m0 * inner.s, d + m0 * inner.d, st.at, m1 - m0, inner.s, inner.d);
        } else {
            scatter_run_of<B, 4, NT>(s + m0 * inner.s, d + m0 * inner.d, st.at, m1 - m0, inner.s, inner.d);
        }
    };
    int64_t lead = run, end = run;  // tiles [lead, end) stored a whole line at a time
#if DM_HAVE_AVX512
    if constexpr (B == 2 || B == 4)
        if (NT) {
            int64_t first = 0;
            const int64_t last = st.l0.n == 2 ? scatter_run_lines<B, 2>(s, d, st.at, run, inner.s, inner.d, &first)
                                              : scatter_run_lines<B, 4>(s, d, st.at, run, inner.s, inner.d, &first);
            if (last) lead = first, end = last;
        }
#endif
    tiles(0, lead);
    tiles(end, run);
    return true;
#else
    (void)src, (void)dst, (void)a, (void)b, (void)run, (void)inner, (void)st;
    return false;
#endif
}

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
inline bool side_joined(const Step& st) {
    const int last = st.nouter - 1;
    if (last < 1 || !(st.pattern == GATHER || runs_of_windows(st)) || rows_go_on(st) || st.outer[last - 1].d != st.l0.n)
        return false;
    const int64_t rows = st.outer[last].n * st.block;
    return rows <= kJoinedStreams || (rows <= kSideRows && st.outer[last - 1].n * st.l0.n * st.word >= kGatherChunkBytes);
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

#if DM_HAVE_AVX512

// How far ahead of its loads gather_lines asks for each input line: 4 KiB. It once read the side rows a
// line of each in turn, and 1 KiB was best for that (SpaceToDepth blocks_first, 1 GiB into NumPy's out=,
// 2-core Intel Xeon: 1.24-1.30x the copy floor; 4 KiB 1.43-1.45x, none 1.58x). It now reads them a tile's
// row of each in turn (the input in its own order, each output stream in bursts of a row). Same process,
// in turns: that and 4 KiB, 256 MiB 1.16-1.22x -> 1.04-1.10x, 1 GiB 1.22-1.26x -> 1.08-1.12x, 128 MiB
// 0.73-0.78x -> 0.68-0.70x; 4 KiB alone gained about half of that, the rows alone (1 KiB) nothing.
// Every line of the B read, not the first alone: 1.28x -> 1.14x (128 MiB, streamed: 0.80x -> 0.71x).
constexpr int64_t kLinesAhead = 4096;

// Whether a streamed gather of B rows of W-byte words may go straight from registers to memory a whole line
// a store (gather_lines): every row and side row on the same offset within a line, and tiles of a line or
// more (a line's positions then span at most two tiles). Words of 1-16 bytes: a 16-byte word (a pixel of
// 4 float32 channels, SpaceToBatch NHWC) always starts on 16 bytes, so its lines are whole words, while
// 32-byte pixels lie 16 bytes into a line in NumPy's arrays (they keep the L1 buffer).
inline bool lines_fit(int64_t W, int B, const int64_t* at, int64_t n, const Loop& side) {
    if (!(W >= 4 ? kAvx512 : kAvx512Bytes) || (W & (W - 1)) || W > 16 || B < 2 || B > 4 || n < kLine / W ||
        (side.n > 1 && side.d * W % kLine))
        return false;
    for (int j = 1; j < B; ++j)
        if ((at[j] - at[0]) * W % kLine) return false;
    return true;
}

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

// Vectors stored at `p` bytes into a line (a multiple of 4), a whole line at a time: each line of dst is
// the end of the vector before it and the start of its own (one permute). A run's first line takes its
// start only, and its last its end only, both stored plainly (masked). chained_lines, strided_lines,
// table_lines.
struct Shifted {
    int64_t p;
    __m512i idx;  // lane i: lane i - p / 4 of its own vector, or for i < p / 4 lane 16 + i - p / 4 of the one before
    __mmask16 head, tail;
};

__attribute__((target("avx512f"), always_inline)) inline Shifted shifted(const char* at) {
    const int64_t p = (int64_t)(reinterpret_cast<uintptr_t>(at) & (kLine - 1));
    const int ph = (int)(p / 4);
    const __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    return Shifted{p, _mm512_add_epi32(iota, _mm512_set1_epi32(16 - ph)), (__mmask16)(0xFFFFu << ph), (__mmask16)((1u << ph) - 1)};
}

// The line at o (on a line): the end of prev and the start of v.
__attribute__((target("avx512f"), always_inline)) inline void shifted_line(char* o, const Shifted& s, __m512i prev, __m512i v) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(o), _mm512_permutex2var_epi32(prev, s.idx, v));
}

// A run's first line, at o: v's start only.
__attribute__((target("avx512f"), always_inline)) inline void shifted_first(char* o, const Shifted& s, __m512i v) {
    _mm512_mask_storeu_epi32(o, s.head, _mm512_permutex2var_epi32(v, s.idx, v));
}

// A line of a run at o: stored plainly (NT false: o is where v goes), or streamed shifted (the run's
// first line: its start only). strided_lines, table_lines.
template <bool NT>
__attribute__((target("avx512f"), always_inline)) inline void put_shifted(char* o, const Shifted& s, __m512i prev, __m512i v,
                                                                         bool first) {
    if (!NT) {
        _mm512_storeu_si512(o, v);
    } else if (first) {
        shifted_first(o, s, v);
    } else {
        shifted_line(o, s, prev, v);
    }
}

// A run's last line, at o (none where the run ends on a line): the end of its last vector.
__attribute__((target("avx512f"), always_inline)) inline void shifted_last(char* o, const Shifted& s, __m512i last) {
    if (s.tail) _mm512_mask_storeu_epi32(o, s.tail, _mm512_permutex2var_epi32(last, s.idx, last));
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
inline void gather_positions(const char* src, char* dst, const int64_t* at, int64_t n, int64_t step, const Loop& side,
                             Bounds w, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
        const int64_t tile = i / n, t = i - tile * n;
        for (int64_t m = 0; m < side.n; ++m)
            for (int j = 0; j < B; ++j) {
                char* o = dst + (m * side.d + at[j] + i) * W;
                const int64_t word = t * B + j;
                if (w.lo <= word && word < w.hi) {
                    std::memcpy(o, src + (tile * step + m * side.s + word) * W, W);
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
                                                                 int64_t runs, int64_t step, Loop side, Bounds w) {
    constexpr int L = kLine / W;      // positions a line
    constexpr int H = W / 4;          // 32-bit lanes a word
    const int64_t total = n * runs;
    __m512i pick[B], then[B];
    load_line_permutes<H, B>(pick, then);
    int64_t first, last;
    whole_lines(dst + at[0] * W, W, total, &first, &last);
    gather_positions<W, B>(src, dst, at, n, step, side, w, 0, first);
    const bool padded = w.lo > 0 || w.hi < n * B;
    const int64_t group = side.n > 1 ? (n + L - 1) / L * L : total;  // (kLinesAhead)
    for (int64_t g = first, tile0 = first / n, t0 = first - tile0 * n; g < last; g += group) {
        for (int64_t m = 0, tile = tile0, t = t0; m < side.n; ++m, tile = tile0, t = t0) {
            for (int64_t i = g; i < std::min(last, g + group); i += L) {
                const int64_t cut = std::min<int64_t>(n - t, L) * B * H;  // lanes from this tile; the rest from the next
                const bool inside = cut == B * 16 && w.lo <= t * B && (t + L) * B <= w.hi;
                const int32_t* pa = reinterpret_cast<const int32_t*>(src + (tile * step + m * side.s + t * B) * W);
                const int32_t* pb = reinterpret_cast<const int32_t*>(src + ((tile + 1) * step + m * side.s) * W) - cut;
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
                t += L;
                if (t >= n) t -= n, ++tile;
            }
            if (m + 1 == side.n) tile0 = tile, t0 = t;  // the next group's first line
        }
    }
    gather_positions<W, B>(src, dst, at, n, step, side, w, last, total);
}
#endif

#if DM_HAVE_AVX512
#define DM_NARROW __attribute__((target("avx512f,avx512bw,avx512vbmi")))
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
    const char* src, char* dst, const int64_t* at, int64_t n, int64_t runs, int64_t step, Loop side, Bounds w) {
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
    const int64_t group = side.n > 1 ? (n + L - 1) / L * L : total;  // (kLinesAhead)
    for (int64_t g = first, tile0 = first / n, t0 = first - tile0 * n; g < last; g += group) {
        for (int64_t m = 0, tile = tile0, t = t0; m < side.n; ++m, tile = tile0, t = t0) {
            for (int64_t i = g; i < std::min(last, g + group); i += L) {
                const int64_t cut = std::min<int64_t>(n - t, L) * B;  // lanes from this tile; the rest from the next
                const bool inside = cut == B * L && w.lo <= t * B && (t + L) * B <= w.hi;
                const char* pa = src + (tile * step + m * side.s + t * B) * W;
                const char* pb = src + ((tile + 1) * step + m * side.s - cut) * W;
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
                t += L;
                if (t >= n) t -= n, ++tile;
            }
            if (m + 1 == side.n) tile0 = tile, t0 = t;  // the next group's first line
        }
    }
    gather_positions<W, B>(src, dst, at, n, step, side, w, last, total);
}
#endif

// Rows a chain for chained_lines: a GATHER tile's rows that are whole lines (n * W a multiple of 64
// bytes, read from one contiguous tile) and follow each other in dst in chains of c (DepthToSpace
// depth_first NHWC: an output row's pixels j = 0, 1 of a block, then the next tile's); the next tile (the
// loop just outside) going on where each chain stopped. 0 where not.
inline int64_t chained_rows(const Step& st) {
#if DM_HAVE_AVX512
    const int64_t W = st.word, B = st.block, n = st.l0.n;
    if (!kAvx512 || st.pattern != GATHER || !st.nouter || (W != 4 && W != 8 && W != 16) || B < 2 || B > 4 ||
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
    // a vector's lane offsets (in words) fit the instruction's 32-bit indices
    return (L - 1) * (std::abs(st.l1.s) + std::abs(st.l0.s)) < (1ll << 28);
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

// The input offsets of a dense block of output words (table_lines): a step whose tile (with one or two
// loops outside it, or a tile's row alone: `outer`) fills `unit` output words, every one once, with the
// loop outside that going on where the unit stopped. STRIDED tiles (SpaceToDepth depth_first NHWC: a
// pixel's channels, block rows and columns; DepthToSpace depth_first NHWC, blocks of 3 with a few
// channels); block tiles under 64 bytes a row of 3 rows, or of 3, 5, 6 or 7 positions (pixels of 3
// channels, a 3 x 3 block's 3 pixels: the SIMD block bodies take 2 or 4 rows of powers of two), and
// streamed gathers of such short rows of any size; copies of pixels of 1-3 channels. `at[r]` is word r's
// input offset, over `units` units, `words` in all: whole lines.
constexpr int kTableWords = 1024;
struct Table {
    int64_t words, unit, units, step;  // step: the input offset from one unit to the next
    int outer;  // 0: a tile a unit, the loop outside going on; 1: the loop outside too, the next one going
                // on; 2: the second loop outside too, the first going on (the input read row by row);
                // 3: a tile's row a unit, each row of a run of tiles a piece of its own (rows far apart)
    int32_t at[kTableWords];
};

// Whether a step's units make a table (see Table), filled when `tab` is given.
inline bool table_of(const Step& st, Table* tab, bool streamed = true) {
#if DM_HAVE_AVX512
    const int64_t W = st.word, n = st.l0.n, R = st.l1.n;
    const bool block = st.pattern == GATHER || st.pattern == SCATTER;
    if (!kAvx512 || (W != 4 && W != 8) || n < 1 || R < 1 || R > 4096) return false;
    // (blocks of 2 or 4 rows of 1, 2, 4 or 8 positions keep scatter_run's pixels, and the SIMD block bodies
    // where stored plainly: streamed, SpaceToDepth depth_first NHWC 4 x 4 with 4 channels, 64 MiB, 1.55x ->
    // 0.85x the copy floor by the table, but plainly, 8 MiB, 0.67x -> 1.07x; rows of whole 16-byte groups,
    // the copies)
    if (st.pattern == CONTIGUOUS) {
        if (st.l0.s != 1 || st.l0.d != 1 || n * W >= kLine || n * W % 16 == 0) return false;
    } else if (block ? (n * W >= kLine || (st.block != 3 && (n & (n - 1)) == 0 && (st.pattern == SCATTER || !streamed)) || st.block != R)
                     : (st.pattern != STRIDED || strided_fits(st))) {
        return false;
    }
    const int64_t L = kLine / W;
    Table local;
    Table* t = tab ? tab : &local;
    for (int outer = 0; outer < 4; ++outer) {
        if (st.nouter < 1 + (outer == 1 || outer == 2)) return false;
        if (outer == 3 && (block || R < 2)) break;  // (the rows' offsets: l1's)
        const Loop around = outer == 1 || outer == 2 ? st.outer[st.nouter - (outer == 1 ? 1 : 2)] : Loop{1, 0, 0};
        const Loop on = st.outer[st.nouter - (outer == 1 ? 2 : 1)];  // the loop the units go on in
        const int64_t rows = outer == 3 ? 1 : R;
        const int64_t unit = around.n * rows * n;
        if (unit > kTableWords || on.d != unit || on.n < 2) continue;
        const int64_t units = L / std::gcd(unit, L), words = units * unit;
        if (words > kTableWords) continue;
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
                    if (out < 0 || out >= unit || t->at[out] != INT32_MIN || std::abs(in) + (units - 1) * std::abs(on.s) >= (1ll << 28)) {
                        dense = false;
                        break;
                    }
                    t->at[out] = (int32_t)in;
                    ++filled;
                }
            }
        if (!dense || filled != unit) continue;
        for (int64_t u = 1; u < units; ++u)
            for (int64_t r = 0; r < unit; ++r) t->at[u * unit + r] = (int32_t)(t->at[r] + u * on.s);
        t->words = words, t->unit = unit, t->units = units, t->step = on.s, t->outer = outer;
        return true;
    }
#else
    (void)st, (void)tab;
#endif
    return false;
}

#if DM_HAVE_AVX512
// `count` units of a Table from src into dst, whose words follow each other: a line at a time by the
// gather instruction (lane offsets from the table), stored plainly or streamed as strided_lines does; the
// words after the last whole line one at a time, plainly. Word by word, SpaceToDepth depth_first NHWC
// with 3 x 3 and 4 x 4 blocks took 1.5-2.6x the copy floor.
template <int W, bool NT>
__attribute__((target("avx512f"))) DM_NOINLINE void table_lines(const char* src, char* dst, const Table& tab, int64_t count) {
    constexpr int L = kLine / W;
    const int64_t total = count * tab.unit, whole = total / L * L;
    const Shifted sh = shifted(NT ? dst : nullptr);  // (plainly: on a line, unshifted)
    const int64_t period = tab.units * tab.step;  // input words from one table's worth to the next
    __m512i prev = _mm512_setzero_si512();
    char* o = dst - sh.p;
    const char* base = src;
    for (int64_t u = 0, r = 0; u < whole; u += L, o += kLine) {
        __m512i vec;
        if constexpr (W == 4) vec = _mm512_i32gather_epi32(_mm512_loadu_si512(tab.at + r), base, 4);
        else vec = _mm512_i32gather_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tab.at + r)), base, 8);
        if ((r += L) == tab.words) r = 0, base += period * W;
        put_shifted<NT>(o, sh, prev, vec, !u);
        prev = vec;
    }
    if (NT && whole) shifted_last(o, sh, prev);
    for (int64_t u = whole; u < total; ++u) {
        const int64_t r = u % tab.words;
        std::memcpy(dst + u * W, src + ((u / tab.words) * period + tab.at[r]) * W, W);
    }
}
#endif

// `count` units of a table (table_lines) from src + a into dst + b.
template <typename T, bool NT>
inline void table_run(const T* src, T* dst, int64_t a, int64_t b, const Table& tab, int64_t count) {
#if DM_HAVE_AVX512
    if constexpr (sizeof(T) == 4 || sizeof(T) == 8)
        table_lines<sizeof(T), NT>(reinterpret_cast<const char*>(src + a), reinterpret_cast<char*>(dst + b), tab, count);
#endif
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
#if DM_HAVE_AVX512
    if constexpr (sizeof(T) >= 4 && sizeof(T) <= 16 && B >= 2)
        if (const int64_t c = chained_rows(st)) {
            const char* from = reinterpret_cast<const char*>(src + a);
            char* to = reinterpret_cast<char*>(dst + b);
            if (reinterpret_cast<uintptr_t>(to + st.at[0] * sizeof(T)) % 4) return false;
            chained_lines<sizeof(T), B>(from, to, st.at, c, st.l0.n * (int64_t)sizeof(T) / kLine, run, inner.s, inner.d);
            return true;
        }
#endif
    (void)src, (void)dst, (void)a, (void)b, (void)run, (void)inner, (void)st;
    return false;
}

// A streamed gather (or gather window) a whole line at a time from registers, where the CPU and the rows
// allow it (lines_fit): whether it took the tiles.
template <typename T, int B>
inline bool gathers_lines(const T* src, T* dst, int64_t a, int64_t b, const Rows<B>& rows, int64_t n, int64_t runs,
                          int64_t step, const Loop& side, const Step* window) {
#if DM_HAVE_AVX512
    if constexpr (sizeof(T) <= 16)
        if (lines_fit(sizeof(T), B, rows.at, n, side)) {
            const char* from = reinterpret_cast<const char*>(src + a);
            char* to = reinterpret_cast<char*>(dst + b);
            const Bounds w = window ? Bounds{window->lo, window->hi} : Bounds{0, n * B};
            if constexpr (sizeof(T) >= 4) gather_lines<sizeof(T), B>(from, to, rows.at, n, runs, step, side, w);
            else gather_narrow_lines<sizeof(T), B>(from, to, rows.at, n, runs, step, side, w);
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
// a whole line at a time from registers instead (gather_lines, gather_narrow_lines), windows included.
template <typename T, int B, bool NT>
inline void gather(const T* src, T* dst, int64_t a, int64_t b, const Rows<B>& rows, int64_t n, char* scratch,
                   int64_t runs = 1, int64_t step = 0, Loop side = Loop{1, 0, 0}, const Step* window = nullptr) {
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
                const int64_t from = a + tile * step + m * side.s;
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
            for (int64_t m = 0; m < side.n; ++m) ahead.add(src + a + tile * step + m * side.s + at * B, c * B * (int64_t)sizeof(T));
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
inline void interleave16(const char* const in[B], int64_t at, __m128i* o) {
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
// Blocks [i, ...) of a streamed SCATTER<2> row of W-byte words (4 or 8), `out + i * 2 * W` on a line, two
// lines at a time while whole ones are left before block `end`: 64 bytes of each input row interleaved by
// two permutes and streamed as two 64-byte stores. Returns the first block not written. Against 16-byte
// unpacks and stores (2-core Intel Xeon, same process, in turns): DepthToSpace float32 128 MiB 0.80x ->
// 0.69x the copy floor, 512 MiB 1.23-1.29x -> 1.01-1.12x; float64 256 MiB 1.22x -> 0.97x; BatchToSpace
// with crops 512 MiB 1.25x -> 1.10x, 1 GiB 1.10x -> 1.03x.
template <int W>
__attribute__((target("avx512f"))) DM_NOINLINE int64_t scatter2_lines(const char* const in[2], char* out, int64_t i, int64_t end) {
    constexpr int64_t P = 64 / W;  // blocks of two lines
    const __m512i lo = W == 4 ? _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0) : _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0);
    const __m512i hi = W == 4 ? _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8) : _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
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

#if DM_HAVE_STREAM
template <int W, int B, bool NT>
inline void scatter_span(const char* const in[B], char* out, int64_t t0, int64_t t1) {
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
    for (; i + P <= blocks; i += P) interleave16<W, B, NT>(in, i * W, reinterpret_cast<__m128i*>(out + i * B * W));
    for (int64_t t = std::max(t0, i * B); t < t1; ++t) one(t);
}
#endif

template <int W, int B>
inline bool scatter_direct(const char* const in[B], char* out, int64_t t0, int64_t t1, Carry* carry) {
#if DM_HAVE_STREAM
    if constexpr ((W == 4 || W == 8) && (B == 2 || B == 4)) {
        const uintptr_t at = reinterpret_cast<uintptr_t>(out);
        if (at % (W * B == 8 ? 8 : 16) || t0 >= t1) return false;  // some block on 16 bytes
        // [h, e): the positions on lines of this row's own; the ones before and after share a line
        int64_t h = t0, e = t1;
        const uintptr_t first = (at + t0 * W) & ~uintptr_t(kLine - 1), last = (at + t1 * W) & ~uintptr_t(kLine - 1);
        // `out` for positions that go to the carry's buffer, whose bytes stand for the line at `line`
        auto in_carry = [&](uintptr_t line) { return reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(carry->buf) + at - line); };
        if (carry && first != last) {
            const int64_t lead = at + t0 * W - first, tail = at + t1 * W - last;  // bytes
            if (lead) {  // the line the row starts in: with the rest the carry holds, or streamed as it is
                h = t0 + (kLine - lead) / W;
                if (carry->goes_on(out + t0 * W)) {
                    scatter_span<W, B, false>(in, in_carry(first), t0, h);
                    carry->stream_whole();
                } else {
                    scatter_span<W, B, true>(in, out, t0, h);
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
    if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
        const char* in[B];
        for (int j = 0; j < B; ++j) in[j] = reinterpret_cast<const char*>(src + a + rows.at[j]);
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
    if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
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
// more only.)
__attribute__((target("avx512f"))) DM_NOINLINE void stream_chunks(char* o, const char* in, int64_t c, int64_t sm, int64_t total) {
    int64_t x = 0, i = 0, w = 0;  // output byte x is byte w of chunk i
    auto advance = [&](int64_t n) {
        w += n;
        while (w >= c) w -= c, ++i;
    };
    auto piece = [&](int64_t at) {  // 16 bytes (inside one chunk)
        _mm_stream_si128(reinterpret_cast<__m128i*>(o + at), _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i * sm + w)));
        advance(16);
    };
    for (; x < total && (reinterpret_cast<uintptr_t>(o + x) & (kLine - 1)); x += 16) piece(x);
    for (; x + kLine <= total; x += kLine) {  // (c >= 64: a line spans at most two chunks)
        __m512i v;
        if (w + kLine <= c) {
            v = _mm512_loadu_si512(in + i * sm + w);
        } else {
            const int64_t first = c - w;  // bytes from chunk i; the rest from chunk i + 1
            const __mmask16 mine = (__mmask16)((1u << (first / 4)) - 1);
            v = _mm512_mask_loadu_epi32(_mm512_maskz_loadu_epi32(mine, in + i * sm + w), (__mmask16)~mine, in + (i + 1) * sm - first);
        }
        _mm512_stream_si512(reinterpret_cast<__m512i*>(o + x), v);
        advance(kLine);
    }
    for (; x < total; x += 16) piece(x);
}
#endif

// A run of CONTIGUOUS tiles (one tile: run 1) whose rows go on from tile to tile (stream_chunks), or of rows
// up to 128 bytes (see short_rows_run); false where it has no such case.
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
        for (int64_t j = 0; j < n; ++j) stream_chunks(d + j * d1, s + j * s1, bytes, sm, run * bytes);
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

// Rows [r0, r1) of a step: the outer loops walked as an odometer, a tile per row.
template <typename T, int P, int B, bool NT>
void run_rows(const Step& step, char* src_base, char* dst_base, int64_t r0, int64_t r1) {
    // A local copy: the tiles' stores (any type, and the build has -fno-strict-aliasing) cannot reach it,
    // so the compiler keeps its fields in registers instead of reloading them for every tile.
    Step st = step;
    Carry carry;
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
    constexpr bool G = P == GATHER || (P == GATHER_WINDOW && B != 0);  // (windows: when runs_of_windows)
    const bool runs_ok = P == GATHER || runs_of_windows(st);
    const bool joined = runs_ok && rows_go_on(st), side = runs_ok && side_joined(st);
    const bool chains = NT && chained_rows(st);
    const bool strided = P == STRIDED && strided_fits(st);
    struct NoTable {};
    constexpr bool TAB = P == STRIDED || P == GATHER || P == SCATTER || P == CONTIGUOUS;
    std::conditional_t<TAB, Table, NoTable> tab;  // (table_lines)
    bool tabled = false;
    if constexpr (TAB) tabled = table_of(st, &tab, NT) && (!NT || reinterpret_cast<uintptr_t>(dst_base) % 4 == 0);
    const Rows<(B ? B : 2)> rows = P == GATHER ? Rows<(B ? B : 2)>(st.at) : Rows<(B ? B : 2)>(st.l1.d);
    const Step* window = P == GATHER_WINDOW ? &st : nullptr;
    for (int64_t r = r0; r < r1;) {
        const int64_t at = st.nouter ? index[last] : 0;
        int64_t run = std::min(r1 - r, inner.n - at), runs = 1;
        if (at == 0 && last >= 1) runs = std::max<int64_t>(1, std::min((r1 - r) / inner.n, next.n - index[last - 1]));
        if (runs > 1) run = inner.n;
        bool units = false;  // whole units of a table: the runs' tiles at once
        if constexpr (TAB) {
            if (tabled && tab.outer == 1 && at == 0 && run == inner.n) {
                table_run<T, NT>(src, dst, a, b, tab, runs), units = true;
            } else if (tabled && tab.outer == 2 && at == 0 && index[last - 1] == 0 && runs == next.n) {
                table_run<T, NT>(src, dst, a, b, tab, inner.n), units = true;
            } else if (tabled && !tab.outer) {
                for (int64_t q = 0; q < runs; ++q) table_run<T, NT>(src, dst, a + q * next.s, b + q * next.d, tab, run);
                units = true;
            } else if (tabled && tab.outer == 3) {
                for (int64_t q = 0; q < runs; ++q)
                    for (int64_t j = 0; j < st.l1.n; ++j)
                        table_run<T, NT>(src, dst, a + q * next.s + j * st.l1.s, b + q * next.d + j * st.l1.d, tab, run);
                units = true;
            }
        }
        const bool sides = !units && G && NT && side && run == inner.n;  // whole side loops: streamed as one
        if constexpr (G)
            if (sides) gather<T, (B ? B : 2), NT>(src, dst, a, b, rows, st.l0.n, st.scratch, runs, next.s, inner, window);
        // plain-stored block tiles of 4- and 8-byte words: all the rows under the two loops at once, set up once
        const bool done = !NT && !sides && !units &&
                          (((P == SCATTER_WINDOW || P == SCATTER) && scatter_rows_run<T, B>(src, dst, a, b, runs, next, run, inner, st)) ||
                           ((P == GATHER || P == GATHER_WINDOW) && gather_rows_run<T, B>(src, dst, a, b, runs, next, run, inner, st)));
        for (int64_t q = 0; q < (sides || done || units ? 0 : runs); ++q) {
            if constexpr (P == STRIDED)
                if (strided && strided_run<T, NT>(src, dst, a + q * next.s, b + q * next.d, run, inner, st)) continue;
            if constexpr (P == GATHER)
                if (NT && chains && gathers_chains<T, (B ? B : 2)>(src, dst, a + q * next.s, b + q * next.d, run, inner, st)) continue;
            if constexpr (G)
                if (NT && joined) {  // the run's rows go on from each other: streamed as one
                    gather<T, (B ? B : 2), NT>(src, dst, a + q * next.s, b + q * next.d, rows, st.l0.n, st.scratch, run, inner.s,
                                               Loop{1, 0, 0}, window);
                    continue;
                }
            if (P == CONTIGUOUS && contiguous_run<T, NT>(src, dst, a + q * next.s, b + q * next.d, run, inner, st)) continue;
            if (P == SCATTER && scatter_run<T, B, NT>(src, dst, a + q * next.s, b + q * next.d, run, inner, st)) continue;
            for (int64_t m = 0; m < run; ++m)
                tile<T, P, B, NT>(src, dst, a + q * next.s + m * inner.s, b + q * next.d + m * inner.d, st);
        }
        r += runs * run;
        if (r >= r1) break;
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

typedef void (*RowsFn)(const Step&, char*, char*, int64_t, int64_t);

// Gather windows only: 32-byte words (pixels) come only in SpaceToBatch's windows, so only those are
// compiled for them (every pattern would add a third to the build's time).
template <typename T, bool NT>
RowsFn pick_gather_window(int block) {
    return block == 2 ? run_rows<T, GATHER_WINDOW, 2, NT> : block == 3 ? run_rows<T, GATHER_WINDOW, 3, NT>
         : block == 4 ? run_rows<T, GATHER_WINDOW, 4, NT> : run_rows<T, GATHER_WINDOW, 0, NT>;
}

template <typename T, bool NT>
RowsFn pick_word(int pattern, int block) {
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

template <bool NT>
RowsFn pick_stream(const Step& st) {
    switch (st.word) {
        case 1: return pick_word<uint8_t, NT>(st.pattern, st.block);
        case 2: return pick_word<uint16_t, NT>(st.pattern, st.block);
        case 4: return pick_word<uint32_t, NT>(st.pattern, st.block);
        case 8: return pick_word<uint64_t, NT>(st.pattern, st.block);
        case 16: return pick_word<W16, NT>(st.pattern, st.block);
        default: return pick_gather_window<W32, NT>(st.block);
    }
}

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
// gather_narrow_lines take.
inline bool from_registers(const Step& st) {
    if (st.pattern == CONTIGUOUS || st.pattern == FILL || table_of(st, nullptr)) return true;  // (table_lines)
    if (st.pattern == SCATTER || st.pattern == SCATTER_WINDOW) return (st.word == 4 || st.word == 8) && (st.block == 2 || st.block == 4);
#if DM_HAVE_AVX512
    // (gather windows go through gather too, their padding as zeros in the loads)
    if (st.pattern == GATHER && chained_rows(st)) return true;  // (chained_lines)
    if (st.pattern == STRIDED) return strided_fits(st);  // (strided_lines)
    if (st.pattern == GATHER || runs_of_windows(st))
        return lines_fit(st.word, st.block, st.pattern == GATHER ? st.at : Rows<4>(st.l1.d).at, st.l0.n,
                         side_joined(st) ? st.outer[st.nouter - 1] : Loop{1, 0, 0});
#endif
    return false;
}

// Whether a program streams (its steps' nt set): `registers`, only if every step streams from registers.
bool streams(Step* steps, int nsteps, const char* dst, bool registers = false) {
    double lone = 0, rough = 0, lines = 0;
    for (int s = 0; s < nsteps; ++s) steps[s].nt = false;
    for (int s = 0; s < nsteps; ++s) {
        Step& st = steps[s];
        if (registers && st.rows && !from_registers(st)) return false;
        if (!st.rows || !st.l1.n || !st.l0.n) continue;
        const double step_lines = (double)st.rows * st.row_cost / kLine;
        lines += step_lines;
        st.nt = streams_whole(st, dst);
        if (st.nt) {
            lone += lone_partial_lines(st, dst);
        } else {
            rough += step_lines;
        }
    }
    return lines > 0 && rough * 32 <= lines && lone * 2 <= lines;
}

RowsFn pick(const Step& st, bool stream) {
    return stream ? pick_stream<true>(st) : pick_stream<false>(st);
}

// ------------------------------------------------------------------ jobs

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

// floor(total * p / parts) without overflow and without __int128 (which MSVC lacks), for 0 <= p <= parts.
inline int64_t share(int64_t total, int64_t p, int64_t parts) {
    return total / parts * p + total % parts * p / parts;
}

// Output bytes a piece of a program of several steps takes from every step in turn (see run_piece).
constexpr int64_t kBandCost = 256 << 10;
// A thread's part of a job is cut into up to kPiecesPerPart pieces of at least kPieceCost bytes of output,
// taken in turn (see take_pieces).
constexpr int64_t kPiecesPerPart = 4;
constexpr int64_t kPieceCost = 128 << 10;

// Piece p of `count` of the job: the share p / count of every step's rows. A program of several steps
// (windows and the fills of their padding, which write pieces of the same lines) takes its share in bands
// of about kBandCost, each band taking its rows of every step in turn, so that the steps' pieces of a line
// are written while it is in cache; step after step, each a pass over the whole output, fetched the lines
// once per step (5-D BatchToSpace with crops 0.78x -> 0.62x the copy floor; SpaceToBatch of 62 x 126
// images with pads 1.31x -> 0.98x; same process, in turns). One step stays one range: no run of its
// rows is cut at a band's edge.
void run_piece(const Job& job, int64_t p, int64_t count) {
    const int64_t bands = job.nsteps == 1 ? 1 : std::max<int64_t>(1, job.total / count / kBandCost);
    for (int64_t k = 0; k < bands; ++k)
        for (int s = 0; s < job.nsteps; ++s) {
            const Step& st = job.steps[s];
            const int64_t lo = share(st.rows, p, count), n = share(st.rows, p + 1, count) - lo;
            const int64_t r0 = lo + share(n, k, bands), r1 = lo + share(n, k + 1, bands);
            if (r0 < r1) pick(st, job.stream && st.nt)(st, job.src, job.dst, r0, r1);
        }
}

// ------------------------------------------------------------------ the thread pool
// Workers spin a little (about 50 us) after a job, so back-to-back calls skip
// the wake-up, then sleep on a condition variable; one job runs at a time
// (callers queue on call_lock, with the GIL released). A forked child starts
// with no workers: the atfork handler resets the pool, and it grows again on
// the child's first call.

struct alignas(64) Counter {  // a line of its own: the threads taking pieces do not pass one line to and fro
    std::atomic<int> v{0};
};

struct Pool {
    pthread_mutex_t call_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t go = PTHREAD_COND_INITIALIZER;
    pthread_cond_t done = PTHREAD_COND_INITIALIZER;
    int workers = 0;  // started, numbered 1..workers
    std::atomic<uint64_t> generation{0};  // bumped (under lock) after job and state are stored
    // The job's generation (from bit 17), whether it is closed to workers (bit 16), and how many workers
    // are in it (the low bits): a worker joins by one compare-and-swap, only while the job is open, and
    // the caller closes it once every piece is taken, then waits for those in it to leave.
    std::atomic<uint64_t> state{kClosed};
    std::atomic<const Job*> job{nullptr};
    Counter next[kMaxThreads];  // per part: its next piece not yet taken (reset by each job)
    static constexpr uint64_t kClosed = 1 << 16, kInside = kClosed - 1;
};

constexpr int kSpins = 4000;

inline void relax() {
#if DM_HAVE_STREAM
    _mm_pause();
#endif
}

Pool pool;

// Part p's pieces in turn, then, once they are all taken, what is left of the other parts: a thread that
// is not running (its core taken by another process, or not yet awake) leaves the rest of its part to the
// threads that are, instead of holding the call up by all of it. SpaceToDepth of 8 MiB with another
// process spinning on one of the two cores, same process, in turns, 200 calls each, three runs: median
// 747-991 us -> 595-687 us; with nothing else running, the suite's cases within noise.
void take_pieces(const Job& job, int p) {
    const int64_t count = (int64_t)job.parts * job.pieces;
    for (int d = 0; d < job.parts; ++d) {
        const int q = (p + d) % job.parts;
        for (int k; (k = pool.next[q].v.fetch_add(1, std::memory_order_relaxed)) < job.pieces;)
            run_piece(job, (int64_t)q * job.pieces + k, count);
    }
    if (job.stream) fence();
}

struct WorkerArg {
    int index;
    uint64_t seen;  // the generation when it was started: it takes jobs after that one
};

void* worker_main(void* raw) {
    const int index = static_cast<WorkerArg*>(raw)->index;
    uint64_t seen = static_cast<WorkerArg*>(raw)->seen;
    delete static_cast<WorkerArg*>(raw);
    for (;;) {
        for (int k = 0; k < kSpins && pool.generation.load(std::memory_order_acquire) == seen; ++k) relax();
        if (pool.generation.load(std::memory_order_acquire) == seen) {
            pthread_mutex_lock(&pool.lock);
            while (pool.generation.load(std::memory_order_acquire) == seen) pthread_cond_wait(&pool.go, &pool.lock);
            pthread_mutex_unlock(&pool.lock);
        }
        seen = pool.generation.load(std::memory_order_acquire);
        // A closed job may end (and its Job go) at any time: it is never read. An open one waits for the
        // workers that joined it, so it is the job stored now (maybe a later one than `seen`).
        uint64_t state = pool.state.load(std::memory_order_acquire);
        bool joined = false;
        while (!(state & Pool::kClosed) && !joined)
            joined = pool.state.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel, std::memory_order_acquire);
        if (!joined) continue;
        const Job* job = pool.job.load(std::memory_order_acquire);
        seen = std::max(seen, job->generation);
        if (index < job->parts) take_pieces(*job, index);
        state = pool.state.fetch_sub(1, std::memory_order_acq_rel) - 1;
        if ((state & Pool::kClosed) && !(state & Pool::kInside)) {  // the caller waits for the last one out
            pthread_mutex_lock(&pool.lock);
            pthread_cond_signal(&pool.done);
            pthread_mutex_unlock(&pool.lock);
        }
    }
    return nullptr;
}

void reset_after_fork() {
    // The child has one thread: the workers (and any job) stayed in the parent.
    new (&pool) Pool();
}

bool grow(int wanted) {
    static bool atfork = false;
    if (!atfork) {
        if (pthread_atfork(nullptr, nullptr, reset_after_fork) != 0) return false;
        atfork = true;
    }
    while (pool.workers < wanted) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_t thread;
        pthread_mutex_lock(&pool.lock);
        WorkerArg* arg = new WorkerArg{pool.workers + 1, pool.generation.load()};
        int rc = pthread_create(&thread, &attr, worker_main, arg);
        if (rc == 0) pool.workers += 1;
        pthread_mutex_unlock(&pool.lock);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
            delete arg;
            return false;
        }
    }
    return true;
}

void run_job(Job& job, int threads) {
    const int64_t bytes = job.total;
    int parts = (int)std::min<int64_t>(threads, std::max<int64_t>(1, bytes / kBytesPerPart));
    if (parts <= 1) {
        job.parts = 1;
        run_piece(job, 0, 1);
        if (job.stream) fence();
        return;
    }
    pthread_mutex_lock(&pool.call_lock);
    if (!grow(parts - 1)) parts = std::max(1, std::min(parts, pool.workers + 1));
    job.parts = parts;
    job.pieces = (int)std::max<int64_t>(1, std::min<int64_t>(kPiecesPerPart, bytes / parts / kPieceCost));
    for (int q = 0; q < parts; ++q) pool.next[q].v.store(0, std::memory_order_relaxed);
    if (parts > 1) {
        pthread_mutex_lock(&pool.lock);
        job.generation = pool.generation.load() + 1;
        pool.job.store(&job, std::memory_order_release);
        pool.state.store(job.generation << 17, std::memory_order_release);  // open, no worker in it
        pool.generation.store(job.generation, std::memory_order_release);
        pthread_cond_broadcast(&pool.go);
        pthread_mutex_unlock(&pool.lock);
    }
    take_pieces(job, 0);
    if (parts > 1) {  // every piece is taken: close the job, then wait for the workers inside to finish theirs
        const uint64_t state = pool.state.fetch_or(Pool::kClosed, std::memory_order_acq_rel);
        if (state & Pool::kInside) {
            for (int k = 0; k < kSpins && (pool.state.load(std::memory_order_acquire) & Pool::kInside); ++k) relax();
            pthread_mutex_lock(&pool.lock);
            while (pool.state.load(std::memory_order_acquire) & Pool::kInside) pthread_cond_wait(&pool.done, &pool.lock);
            pthread_mutex_unlock(&pool.lock);
        }
        pool.job.store(nullptr, std::memory_order_release);
    }
    pthread_mutex_unlock(&pool.call_lock);
}

// ------------------------------------------------------------------ Python

bool parse(const int64_t* p, Py_ssize_t n, Step* steps, int nsteps, int64_t* total) {
    Py_ssize_t at = 1;
    int64_t cost = 0;
    for (int s = 0; s < nsteps; ++s) {
        if (at + 8 > n) return false;
        Step& st = steps[s];
        st.pattern = (int)p[at];
        st.word = (int)p[at + 1];
        st.block = (int)p[at + 2];
        st.lo = p[at + 3];
        st.hi = p[at + 4];
        st.src0 = p[at + 5];
        st.dst0 = p[at + 6];
        const int64_t nloops = p[at + 7];
        at += 8;
        if (st.pattern < 0 || st.pattern > SCATTER_WINDOW || nloops < 2 || nloops > kMaxLoops || at + 3 * nloops > n) return false;
        if (st.word != 1 && st.word != 2 && st.word != 4 && st.word != 8 && st.word != 16 &&
            !(st.word == 32 && st.pattern == GATHER_WINDOW))
            return false;
        if ((st.pattern == GATHER || st.pattern == SCATTER) &&
            (st.block < 2 || st.block > 4 || st.lo < 0 || (st.lo && st.block % st.lo))) return false;
        const Loop* loops = reinterpret_cast<const Loop*>(p + at);
        at += 3 * nloops;
        st.nouter = (int)nloops - 2;
        st.outer = loops;
        st.l1 = loops[nloops - 2];
        st.l0 = loops[nloops - 1];
        st.rows = 1;
        for (int k = 0; k < st.nouter; ++k) {
            if (loops[k].n < 0) return false;
            st.rows *= loops[k].n;
        }
        if (st.l1.n < 0 || st.l0.n < 0) return false;
        st.row_cost = std::max<int64_t>(1, st.l1.n * st.l0.n * st.word);
        st.first = st.last = 0;
        st.nt = false;
        st.reads_on = false;
        st.scratch = nullptr;
        st.carry = nullptr;
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
        cost += st.rows * st.row_cost;
    }
    *total = cost;
    return at == n;
}

PyObject* py_run(PyObject*, PyObject* args) {
    Py_buffer program;
    unsigned long long src, dst;
    int threads, stream;  // stream: 0 plain, 1 where every step streams from registers, 2 where the steps can
    if (!PyArg_ParseTuple(args, "y*KKii", &program, &src, &dst, &threads, &stream)) return nullptr;
    const int64_t* p = static_cast<const int64_t*>(program.buf);
    const Py_ssize_t n = program.len / (Py_ssize_t)sizeof(int64_t);
    if (n < 1 || p[0] < 0 || p[0] > kMaxSteps) {
        PyBuffer_Release(&program);
        PyErr_SetString(PyExc_ValueError, "datamove._native.run: a malformed program");
        return nullptr;
    }
    const int nsteps = (int)p[0];
    Step* steps = new (std::nothrow) Step[nsteps ? nsteps : 1];
    int64_t total = 0;
    if (steps == nullptr || !parse(p, n, steps, nsteps, &total)) {
        delete[] steps;
        PyBuffer_Release(&program);
        if (steps == nullptr) return PyErr_NoMemory();
        PyErr_SetString(PyExc_ValueError, "datamove._native.run: a malformed program");
        return nullptr;
    }
    Job job{0, steps, nsteps, total, reinterpret_cast<char*>(src), reinterpret_cast<char*>(dst),
            stream != 0 && DM_HAVE_STREAM && streams(steps, nsteps, reinterpret_cast<char*>(dst), stream == 1), 1};
    threads = std::max(1, std::min(threads, kMaxThreads));
    Py_BEGIN_ALLOW_THREADS run_job(job, threads);
    Py_END_ALLOW_THREADS delete[] steps;
    PyBuffer_Release(&program);
    Py_RETURN_NONE;
}

// The size of the last-level cache instance cpu0 shares, from sysfs (0 when unknown): not sysconf's
// figure, which on AMD EPYC adds up every CCX's L3 (384 MiB where a core reaches 32 MiB).
long sysfs_last_level_cache() {
    long best_level = 0, best_size = 0;
    for (int index = 0; index < 16; ++index) {
        char path[96], text[64];
        long level = 0, size = 0;
        bool unified_or_data = false;
        for (int field = 0; field < 3; ++field) {
            static const char* names[3] = {"level", "type", "size"};
            std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/%s", index, names[field]);
            FILE* f = std::fopen(path, "r");
            if (f == nullptr) return best_size;  // no more indexes (or no sysfs)
            const bool got = std::fgets(text, sizeof text, f) != nullptr;
            std::fclose(f);
            if (!got) break;
            if (field == 0) level = std::strtol(text, nullptr, 10);
            if (field == 1) unified_or_data = std::strncmp(text, "Unified", 7) == 0 || std::strncmp(text, "Data", 4) == 0;
            if (field == 2) {
                char* end = nullptr;
                size = std::strtol(text, &end, 10);
                if (end && *end == 'K') size <<= 10;
                else if (end && *end == 'M') size <<= 20;
                else if (end && *end == 'G') size <<= 30;
            }
        }
        if (unified_or_data && (level > best_level || (level == best_level && size > best_size))) {
            best_level = level;
            best_size = size;
        }
    }
    return best_size;
}

PyObject* py_cache_bytes(PyObject*, PyObject*) {
    long size = sysfs_last_level_cache();
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (size <= 0) size = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (size <= 0) size = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    return PyLong_FromLong(size > 0 ? size : 0);
}

PyObject* py_workers(PyObject*, PyObject*) { return PyLong_FromLong(pool.workers); }

PyObject* py_streams(PyObject*, PyObject* args) {
    Py_buffer program;
    unsigned long long dst;
    int registers = 0;
    if (!PyArg_ParseTuple(args, "y*K|p", &program, &dst, &registers)) return nullptr;
    const int64_t* p = static_cast<const int64_t*>(program.buf);
    const Py_ssize_t n = program.len / (Py_ssize_t)sizeof(int64_t);
    Step* steps = (n >= 1 && p[0] >= 0 && p[0] <= kMaxSteps) ? new (std::nothrow) Step[p[0] ? p[0] : 1] : nullptr;
    int64_t total = 0;
    const bool ok = steps != nullptr && parse(p, n, steps, (int)p[0], &total);
    const bool result = ok && DM_HAVE_STREAM && streams(steps, (int)p[0], reinterpret_cast<char*>(dst), registers != 0);
    delete[] steps;
    PyBuffer_Release(&program);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "datamove._native.streams: a malformed program");
        return nullptr;
    }
    return PyBool_FromLong(result);
}

// The lowest address of an array's elements (its data pointer moved back along negative strides), from
// the buffer protocol without a format, so any dtype: a tenth of what NumPy's __array_interface__ costs
// in Python, twice a call (0.2 us against 2.2 us).
PyObject* py_lowest(PyObject*, PyObject* array) {
    Py_buffer view;
    if (PyObject_GetBuffer(array, &view, PyBUF_STRIDES) != 0) return nullptr;
    char* low = static_cast<char*>(view.buf);
    for (int k = 0; k < view.ndim; ++k)
        if (view.strides[k] < 0 && view.shape[k] > 0) low += (view.shape[k] - 1) * view.strides[k];
    PyBuffer_Release(&view);
    return PyLong_FromVoidPtr(low);
}

PyMethodDef methods[] = {
    {"lowest", py_lowest, METH_O, "lowest(array): the lowest address of the array's elements (buffer protocol)."},
    {"run", py_run, METH_VARARGS,
     "run(program, src_address, dst_address, threads, stream): execute a lowered program (see the file's header); "
     "stream: 0 plain stores, 1 streaming where every step streams from registers, 2 streaming where the steps can."},
    {"cache_bytes", py_cache_bytes, METH_NOARGS,
     "The size in bytes of the last-level cache instance cpu0 shares (sysfs, else sysconf), or 0 when unknown."},
    {"workers", py_workers, METH_NOARGS, "The pool's started worker threads in this process (0 in a new fork)."},
    {"streams", py_streams, METH_VARARGS,
     "streams(program, dst_address, registers=False): whether run() with stream=2 (registers: 1) streams this "
     "program's stores (every piece whole)."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", "datamove's compiled CPU core.", -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit__native(void) {
    PyObject* m = PyModule_Create(&module);
    if (m == nullptr) return nullptr;
    if (PyModule_AddIntConstant(m, "HAVE_STREAM", DM_HAVE_STREAM) < 0) return nullptr;
#if DM_HAVE_AVX512
    const int lines = kAvx512, narrow = kAvx512Bytes;
#else
    const int lines = 0, narrow = 0;
#endif
    // gather_lines runs on this CPU (4- and 8-byte words), and gather_narrow_lines (1- and 2-byte words)
    if (PyModule_AddIntConstant(m, "WHOLE_LINES", lines) < 0) return nullptr;
    if (PyModule_AddIntConstant(m, "WHOLE_NARROW_LINES", narrow) < 0) return nullptr;
    return m;
}

// The tiles' SIMD bodies: a block tile's B rows in registers (SSE2, SSSE3), short runs of pixels.

#pragma once

#include "common.hpp"

namespace dm {

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
inline int64_t gather_unpack(const char* in, char* const* o, int64_t n) {
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
inline int64_t scatter_unpack(const char* const* in, char* out, int64_t n) {
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
inline const bool kSsse3 = kIsa >= IsaSsse3;

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
__attribute__((target("ssse3"))) inline int64_t gather3_narrow(const char* in, char* o0, char* o1, char* o2, int64_t n) {
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
__attribute__((target("ssse3"))) inline int64_t scatter3_narrow(const char* i0, const char* i1, const char* i2, char* out, int64_t n) {
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
inline int64_t gather_simd(const T* in, T* const* o, int64_t n) {  // (o: B rows)
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
inline int64_t scatter_simd(const T* const* in, T* out, int64_t n) {  // (in: B rows)
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
DM_INLINE void gather_rows(const T* __restrict src, T* __restrict dst, int64_t a, int64_t b, const Rows<B>& rows, int64_t n) {
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
DM_INLINE void scatter_rows(const T* __restrict src, T* __restrict dst, int64_t a, int64_t b, const Rows<B>& rows, int64_t n) {
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

#if DM_HAVE_AVX512
// The byte permute that interleaves G tiles of R rows of N words of W bytes, each row's pieces sm bytes
// apart in its input (permute_rows; pixel_rows: R = N = 1, W = P), made in `perm` (see Permute).
inline void permute_of(Permute* perm, int64_t W, int64_t N, int64_t R, int64_t sm, int64_t G) {
    const int64_t key = ((sm * 64 + W) * 64 + N) * 8 + R + 1;
    if (perm->key == key) return;
    const int64_t P = N * W * R;
    for (int j = 0; j < 4; ++j) perm->rows[j] = 0;
    for (int64_t k = 0; k < 64; ++k) {
        const int64_t q = k / P, u = k % P / W, e = k % W, i = u / R, j = u % R;  // tile, word, byte, position, row
        perm->at[k] = (uint8_t)(k < G * P ? q * sm + i * W + e : 0);
        if (k < G * P) perm->rows[j] |= 1ull << k;
    }
    perm->key = key;
}

// The first n bytes of a vector, as a mask (none for n <= 0, all from 64): pixel_rows, permute_rows.
inline uint64_t first_bytes(int64_t n) {
    return n >= 64 ? ~0ull : n <= 0 ? 0ull : (1ull << n) - 1;
}

// Tiles of R = 2 to 4 rows of N words of W bytes (a tile P = N * W * R bytes, at most 32), interleaved into
// one run in d: out[m * P + (i * R + j) * W + e] <- byte e of word i of row j of tile m, from
// s + off[j] + m * sm + i * W + e. Channels-last BatchToSpace (N = 1: a pixel from each of R batch items
// in turn, contiguous_run) and SpaceToDepth/DepthToSpace depth_first of pixels of a few uint8 or float16
// channels (SCATTER tiles). G tiles at a time: a load of each row's G pieces (masked to the bytes read, so
// nothing past them is read), a byte permute (VBMI) of each into its places merged under its mask, one
// masked store. False where fewer than 2 tiles fit a vector. Tile by tile, channels-last uint8 RGB, 64
// MiB: BatchToSpace with crops 4.8x the copy floor, SpaceToDepth and DepthToSpace depth_first 1.8-2.3x and
// 2.75-3.3x.
DM_NARROW DM_NOINLINE inline bool permute_rows(char* d, const char* s, int64_t W, int64_t N, int64_t R, const int64_t* off,
                                                 int64_t sm, int64_t run, Permute* perm) {
    const int64_t row = N * W, P = row * R;
    if (!perm || sm < 0 || W < 1 || N < 1 || R < 2 || R > 4 || P > 32) return false;
    const int64_t G = std::min<int64_t>(64 / P, sm > 0 ? (64 - row) / sm + 1 : 64);
    if (G < 2) return false;
    permute_of(perm, W, N, R, sm, G);
    const __m512i idx = _mm512_loadu_si512(perm->at);
    const __mmask64 of1 = perm->rows[1], of2 = perm->rows[2], of3 = perm->rows[3];
    const auto group = [&](int64_t m, int64_t g) DM_NARROW __attribute__((always_inline)) {  // tiles [m, m + g)
        const __mmask64 read = first_bytes((g - 1) * sm + row);
        const char* p = s + m * sm;
        __m512i v = _mm512_permutexvar_epi8(idx, _mm512_maskz_loadu_epi8(read, p + off[0]));
        v = _mm512_mask_permutexvar_epi8(v, of1, idx, _mm512_maskz_loadu_epi8(read, p + off[1]));
        if (R > 2) v = _mm512_mask_permutexvar_epi8(v, of2, idx, _mm512_maskz_loadu_epi8(read, p + off[2]));
        if (R > 3) v = _mm512_mask_permutexvar_epi8(v, of3, idx, _mm512_maskz_loadu_epi8(read, p + off[3]));
        _mm512_mask_storeu_epi8(d + m * P, first_bytes(g * P), v);
    };
    int64_t m = 0;
    for (; m + G <= run; m += G) group(m, G);
    if (m < run) group(m, run - m);
    return true;
}
#endif

#if DM_HAVE_AVX512
// A GATHER step's tiles of narrow words as units of output (gather_units): the R side rows (the loop just
// outside the loop the units go on in, up to 4; else 1) of a unit's tiles fill U bytes of dst densely, a
// unit S bytes on from the last in each of R input rows; byte k of a vector of G units comes from byte
// at[k] of its row's load (rows[]: which row), each load reading only its row's bytes (reads[]).
struct Units {
    int64_t U, S, R, G, top;  // top: the end of the bytes a row gives a unit
    uint8_t at[64];
    uint64_t rows[4], reads[4];
};

// The Units of a step, or false where its tiles are not such units (channels-last SpaceToDepth
// depth_first of a few uint8 or float16 channels: a unit is an output pixel, its block rows' pieces R
// input rows apart).
inline bool units_of(const Step& st, Units* un) {
    const int64_t W = st.word, B = st.block, n = st.l0.n;
    if (st.pattern != GATHER || W > 2 || B < 2 || B > 4 || st.nouter < 1 || n < 1 || !kAvx512Bytes) return false;
    const Loop inner = st.outer[st.nouter - 1];
    const int64_t U = inner.d * W, S = inner.s * W;
    if (U < 2 || U > 64 || S < 1 || inner.n < 2) return false;
    for (int side = 1; side >= 0; --side) {  // the loop outside as R side rows, else none
        const Loop next = side && st.nouter >= 2 ? st.outer[st.nouter - 2] : Loop{1, 0, 0};
        const int64_t R = next.n;
        if (R < 1 || R > 4 || R * B * n * W != U) continue;
        int8_t row[64];
        int64_t at[64], top = 0;
        std::fill(row, row + 64, (int8_t)-1);
        bool ok = true;
        for (int64_t r = 0; r < R && ok; ++r)
            for (int64_t j = 0; j < B && ok; ++j)
                for (int64_t i = 0; i < n && ok; ++i)
                    for (int64_t e = 0; e < W && ok; ++e) {
                        const int64_t out = (r * next.d + st.at[j] + i * st.l0.d) * W + e, in = (j * st.l1.s + i * st.l0.s) * W + e;
                        ok = out >= 0 && out < U && row[out] < 0 && in >= 0 && in < S;
                        if (ok) row[out] = (int8_t)r, at[out] = in, top = std::max(top, in + 1);
                    }
        if (!ok || top > 64) continue;
        int64_t G = 64 / U;
        while (G > 1 && (G - 1) * S + top > 64) --G;
        un->U = U, un->S = S, un->R = R, un->G = G, un->top = top;
        for (int r = 0; r < 4; ++r) un->rows[r] = un->reads[r] = 0;
        for (int64_t k = 0; k < 64; ++k) {
            const int64_t g = k / U, c = k % U, byte = g * S + at[c];
            un->at[k] = (uint8_t)(g < G ? byte : 0);
            if (g < G) un->rows[row[c]] |= 1ull << k, un->reads[row[c]] |= 1ull << byte;
        }
        return true;
    }
    return false;
}

// `units` units into d from the R rows at s + off[r] (gather_unit_rows): G a vector, a load of each row's
// bytes for them, a byte permute (VBMI) of each merged under its mask, one store. Whole 64-byte loads and
// stores while they stay inside the rows' bytes and the units' output (each store's bytes past its G
// units are written again by the next), masked ones at the end (reading only the bytes used). Masked all
// along, 14.8 ms on one thread for 48 MiB of uint8 RGB with 3 x 3 blocks; this way 9.4-13.5 ms (three
// runs, the machine noisy). Every row gives a unit the same bytes (their offsets do not depend on the
// row), so one `top` bounds every row's whole loads. Tile by tile,
// channels-last uint8 RGB SpaceToDepth depth_first, 48 MiB, took 6.1-6.4x the copy floor (3 x 3 and 4
// x 4 blocks).
DM_NARROW DM_NOINLINE inline void gather_units(char* d, const char* s, const int64_t* off, const Units& un, int64_t units) {
    const __m512i idx = _mm512_loadu_si512(un.at);
    const int64_t U = un.U, S = un.S, R = un.R, G = un.G;
    // groups [0, whole) load and store whole vectors: their loads end by the last unit's last byte read,
    // their stores by the units' end
    const int64_t reads = (units - 1) * S + un.top - 64, writes = units * U - 64;
    const int64_t whole = reads < 0 || writes < 0 ? 0 : std::min(reads / S, writes / U) + 1;
    int64_t m = 0;
    for (; m < whole && m < units; m += G) {
        const char* p = s + m * S;
        __m512i v = _mm512_permutexvar_epi8(idx, _mm512_loadu_si512(p + off[0]));
        for (int64_t r = 1; r < R; ++r) v = _mm512_mask_permutexvar_epi8(v, un.rows[r], idx, _mm512_loadu_si512(p + off[r]));
        _mm512_storeu_si512(d + m * U, v);
    }
    for (; m < units; m += G) {
        const int64_t g = std::min(G, units - m);
        const uint64_t within = g < G ? first_bytes(g * S) : ~0ull;
        const char* p = s + m * S;
        __m512i v = _mm512_permutexvar_epi8(idx, _mm512_maskz_loadu_epi8(un.reads[0] & within, p + off[0]));
        for (int64_t r = 1; r < R; ++r)
            v = _mm512_mask_permutexvar_epi8(v, un.rows[r], idx, _mm512_maskz_loadu_epi8(un.reads[r] & within, p + off[r]));
        _mm512_mask_storeu_epi8(d + m * U, first_bytes(g * U), v);
    }
}
#endif

#if DM_HAVE_AVX512
// Vectors stored at `p` bytes into a line (a multiple of 4), a whole line at a time: each line of dst is
// the end of the vector before it and the start of its own (one permute). A run's first line takes its
// start only, and its last its end only, both stored plainly (masked). chained_lines, strided_lines,
// table_lines, scatter_run_lines.
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

// A streamed run of small_scatter tiles whose rows all lie in one input stream (DepthToSpace depth_first
// NHWC: a pixel's channels), a whole output line at a time: the 16 / (N * B) tiles of a line read their
// words from two 64-byte loads (tile t's row j, position i: lane t * sm + at[j] + i), one permute puts
// them in place, one 64-byte streaming store writes the line. It takes the tiles [*lead, end) that
// write whole lines and returns end (0 where the lanes do not fit or no tile starts a line); the caller
// stores the others with scatter_run_of, outside this function: legacy SSE code run with the upper
// halves of the vector registers in use (before this function's vzeroupper) ran 2x slower.
// Where no tile starts a line (NumPy's own out=, 16 bytes into one, with 32-byte tiles), the lines are
// the vectors shifted (Shifted: one more permute a line, the run's first and last partial lines stored
// plainly), tiles [0, end): DepthToSpace depth_first NHWC of 16 channels, 64 MiB, 16-byte streaming
// stores 1.02-1.06x the copy floor, shifted lines 0.84-0.87x (same process, in turns).
// 16-byte stores, as scatter_run_of makes them, ran 8 channels into 2 at 1.13-1.18x the copy floor.
// The second load is masked to the lanes used: whole, it read past an input ending at an unreadable
// page (test_no_read_past_the_input); masked, 0.87-0.92x against 0.84-0.88x whole (in turns).
template <int B, int N>
__attribute__((target("avx512f"))) DM_NOINLINE int64_t scatter_run_lines(const float* s, float* d, const int64_t* at, int64_t run,
                                                                          int64_t sm, int64_t dm, int64_t* lead) {
    constexpr int T = 16 / (N * B);  // tiles a line
    const int64_t gap = (kLine - (int64_t)(reinterpret_cast<uintptr_t>(d) & (kLine - 1))) & (kLine - 1);  // bytes to a line
    const bool shift = gap % (dm * 4) != 0;  // (no tile starts a line)
    if (!kAvx512 || dm != N * B || sm < 0 || (shift && (reinterpret_cast<uintptr_t>(d) % 4 || run * dm * 4 < kLineStoresFrom))) return 0;
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
    if (shift) {  // each group of T tiles' vector lies sh.p bytes into a line
        const Shifted sh = shifted(reinterpret_cast<const char*>(d));
        char* o = reinterpret_cast<char*>(d) - sh.p;
        __m512i prev = _mm512_setzero_si512();
        int64_t m = 0;
        for (; m + T <= run; m += T, o += kLine) {
            const float* p = s + m * sm;
            _mm_prefetch(reinterpret_cast<const char*>(p) + 4096, _MM_HINT_T0);
            const __m512 x = _mm512_loadu_ps(p), y = _mm512_maskz_loadu_ps(second, p + 16);
            const __m512i v = _mm512_castps_si512(_mm512_permutex2var_ps(x, idx, y));
            if (m) {
                shifted_line(o, sh, prev, v);
            } else {
                shifted_first(o, sh, v);
            }
            prev = v;
        }
        shifted_last(o, sh, prev);
        *lead = 0;
        return m;
    }
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

#if DM_HAVE_AVX512
// A run of SCATTER tiles of narrow words by permute_rows: from run_rows' own instance for such steps
// (its I, chosen by pick), not from scatter_run (see run_rows).
template <typename T, int B>
DM_NOINLINE bool interleaved_run(const T* src, T* dst, int64_t a, int64_t b, int64_t run, const Loop& inner, const Step& st) {
    const int64_t W = sizeof(T), off[4] = {st.at[0] * W, st.at[1] * W, st.at[2] * W, st.at[3] * W};
    return permute_rows(reinterpret_cast<char*>(dst + b), reinterpret_cast<const char*>(src + a), W, st.l0.n, B, off, inner.s * W,
                           run, st.perm);
}
#endif

#if DM_HAVE_STREAM
// Tiles [m0, m1) of a run of small_scatter tiles, 16 bytes a store. A function of its own, kept out of
// run_rows: once the compiler inlined it there (after a kernel was added elsewhere in the file), the run
// loop's values crowded its own out of the registers. On the 2-core AMD EPYC (AVX2), 64 MiB, one thread,
// same process, in turns, against the build before (where it stood in scatter_run's lambda, not inlined):
// channels-last DepthToSpace depth_first 8 channels into 2 2.40x -> 1.44x the copy floor, 16 into 4
// 1.44x -> 1.29x, the suite's other small scatters within 0.04.
template <int B, bool NT>
DM_NOINLINE void small_scatter_tiles(const float* s, float* d, const Step& st, const Loop& inner, int64_t m0, int64_t m1) {
    if (st.l0.n == 2) {
        scatter_run_of<B, 2, NT>(s + m0 * inner.s, d + m0 * inner.d, st.at, m1 - m0, inner.s, inner.d);
    } else {
        scatter_run_of<B, 4, NT>(s + m0 * inner.s, d + m0 * inner.d, st.at, m1 - m0, inner.s, inner.d);
    }
}

// Tiles [m0, m1) of a run of small_scatter tiles, contiguous (inner.d == n * B), stored plainly into `buf`:
// the part of a line that a streamed run starts or ends in, which the thread's Carry joins with the run
// before or after it (scatter_run).
template <int B>
DM_NOINLINE void held_scatter_tiles(const float* s, char* buf, const Step& st, const Loop& inner, int64_t m0, int64_t m1) {
    float* o = reinterpret_cast<float*>(buf);
    if (st.l0.n == 2) {
        scatter_run_of<B, 2, false>(s + m0 * inner.s, o, st.at, m1 - m0, inner.s, inner.d);
    } else {
        scatter_run_of<B, 4, false>(s + m0 * inner.s, o, st.at, m1 - m0, inner.s, inner.d);
    }
}
#endif

// A run of `run` small_scatter tiles `inner` apart; false where the step is not one (or, streamed, its
// stores are not on 16 bytes: streams_whole streams such steps only where they are). Narrow words: see
// permute_rows and narrow_scatter_run (plain stores only: streams_whole never streams them).
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
    auto tiles = [&](int64_t m0, int64_t m1) { small_scatter_tiles<B, NT>(s, d, st, inner, m0, m1); };
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
    // The lines a run starts and ends in part-way (rows of output that go on from each other, a run each:
    // DepthToSpace depth_first NHWC) go out whole through the carry. Streamed as they were, each such line
    // was written in two parts with a run's whole lines between them (the lines first, then the tiles
    // before and after them), and the CPU's write-combining sent it to memory as two partial writes (see
    // Carry). 8 channels into 2, 16 bytes into a line, 2-core Intel Xeon, same process, in turns: rows of
    // 64 pixels in the L2 92-95 -> 63-64 ns a KiB (61 on a line); 64 MiB 1.20-1.23x -> 1.13-1.15x the copy floor.
    if constexpr (NT) {
        Carry* const carry = st.carry;
        const int64_t bytes = inner.d * 4;  // a tile's (contiguous where the lines were taken)
        char* const d0 = reinterpret_cast<char*>(d);
        if (carry && lead > 0 && lead < end && carry->goes_on(d0) && carry->to + lead * bytes == kLine) {
            held_scatter_tiles<B>(s, carry->buf + carry->to, st, inner, 0, lead);
            carry->stream_whole();
            lead = 0;
        }
        if (carry && lead < end && end < run && !(reinterpret_cast<uintptr_t>(d0 + end * bytes) & (kLine - 1))) {
            held_scatter_tiles<B>(s, carry->start(d0 + end * bytes, (run - end) * bytes), st, inner, end, run);
            end = run;
        }
    }
    tiles(0, lead);
    tiles(end, run);
    return true;
#else
    (void)src, (void)dst, (void)a, (void)b, (void)run, (void)inner, (void)st;
    return false;
#endif
}


}  // namespace dm

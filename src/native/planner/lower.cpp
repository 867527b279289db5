// lower_program (plan.hpp): a plan over two layouts as the core's program (tests/lowering: the Python
// twin it was ported from, strided.py and __init__'s _split, _windowed and program), int64 for int64.
//
// Each function below mirrors the Python one it names, tie-breaks included: a stable sort descending for
// sorted(..., reverse=True), the first of equal maxima and minima for max() and min(), loops compared by
// value where Python's `in` does. Python's ints do not overflow: every product and sum that could is
// checked (Lowering::mul, add), and a lowering that would overflow is refused (false: the NumPy engine
// runs it). Loops live in fixed arrays (a view has at most kMaxDims dims; no step exceeds kCap loops).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "common.hpp"
#include "plan.hpp"

namespace dm::planner {

namespace {

// (the thresholds, kMinRows ... kRereadBytes, are plan.hpp's)
constexpr int64_t kWidest = 16;  // the native engine's widest word

// The most dims of a view taken here, and the most loops of a nest: a view's dims, the item's loop, and at
// most the loops that runs_together, _split's rows and chunks add (6) fit.
constexpr int kMaxDims = 24;
constexpr int kCap = 32;
// runs_together's search for a divisor of a loop's count: counts over this (2^44) are refused rather than
// searched (a loop spanning that many positions of input a whole line apart exceeds any memory).
constexpr int64_t kMaxDivisorCount = int64_t(1) << 44;

struct Loop {
    int64_t n, s, d;  // count, src stride, dst stride
    int64_t at(int side) const { return side == 1 ? s : d; }
    bool operator==(const Loop& o) const { return n == o.n && s == o.s && d == o.d; }
};

struct Loops {
    int size = 0;
    Loop v[kCap];
    Loops() = default;
    Loops(const Loops& o) : size(o.size) { std::copy(o.v, o.v + o.size, v); }  // (the loops held only)
    Loops& operator=(const Loops& o) {
        size = o.size;
        std::copy(o.v, o.v + o.size, v);
        return *this;
    }
    void push(const Loop& l) {
        if (size < kCap) v[size++] = l;  // (never full: kMaxDims bounds every nest)
    }
    Loop& operator[](int k) { return v[k]; }
    const Loop& operator[](int k) const { return v[k]; }
    void erase(int k) {
        for (int m = k + 1; m < size; ++m) v[m - 1] = v[m];
        --size;
    }
};

inline int64_t iabs(int64_t x) { return x < 0 ? -x : x; }  // (no value here is INT64_MIN: see Lowering)

enum Name { N_CONTIGUOUS, N_GATHER, N_SCATTER, N_GATHER2, N_SCATTER2, N_STRIDED, N_FILL };

int pattern_id(int name) {
    switch (name) {
        case N_GATHER: return GATHER;
        case N_SCATTER: return SCATTER;
        case N_STRIDED: return STRIDED;
        case N_FILL: return FILL;
        default: return CONTIGUOUS;
    }
}

// strided.BLOCKS
inline bool is_block(int64_t b) { return b == kTileBlocks[0] || b == kTileBlocks[1] || b == kTileBlocks[2]; }

struct Nest {  // strided.LoopNest
    int64_t word = 1, src_start = 0, dst_start = 0;
    Loops loops;
    int pattern = N_STRIDED;
    int64_t block = 0;
};

struct WindowNest {  // strided.WindowNest
    int64_t word = 1, src_start = 0, dst_start = 0;
    Loops loops;
    int pattern = GATHER_WINDOW;
    int64_t block = 0, lo = 0, hi = 0;
};

// Stable insertion sort, descending by (|l[side]|, |l[3 - side]|): sorted(..., reverse=True) keeps equal
// keys in their order.
void following(int side, Loops* loops) {
    const int other = 3 - side;
    for (int k = 1; k < loops->size; ++k) {
        const Loop x = (*loops)[k];
        const int64_t a = iabs(x.at(side)), b = iabs(x.at(other));
        int m = k;
        while (m > 0) {
            const Loop& y = (*loops)[m - 1];
            const int64_t ya = iabs(y.at(side)), yb = iabs(y.at(other));
            if (!(ya < a || (ya == a && yb < b))) break;  // y's key >= x's: x stays after it
            (*loops)[m] = y;
            --m;
        }
        (*loops)[m] = x;
    }
}

// The views' axes name the arrays' (each checked where it is lowered: a view of a plan's other path is
// never read), their counts are not negative, and no value is INT64_MIN.
bool valid_layout(const Layout& a) {
    if (a.shape.size() != a.strides.size() || a.itemsize < 1) return false;
    for (size_t k = 0; k < a.shape.size(); ++k)
        if (a.shape[k] < 0 || a.strides[k] == INT64_MIN) return false;
    return true;
}

bool valid_view(const View& v, const Layout& a) {
    if (v.dims.size() > (size_t)kMaxDims) return false;
    for (int64_t x : v.start)
        if (x == INT64_MIN) return false;
    const int64_t rank = (int64_t)a.shape.size();
    for (const Dim& d : v.dims)
        if (d.axis < 0 || d.axis >= rank || d.count < 0 || d.step == INT64_MIN) return false;
    return true;
}

bool valid_window(const Window& w, const Layout& data, const Layout& out) {
    if (!valid_view(w.src, data) || !valid_view(w.dst, out) || (w.space != 0 && w.space != 1)) return false;
    const int64_t m = (int64_t)std::min(w.src.dims.size(), w.dst.dims.size());
    return w.trailing >= 0 && w.trailing <= m - 2;  // the window's two dims: 2 <= cut <= m
}

struct Lowering {
    const Plan& plan;
    const Layout& data;
    const Layout& out;
    int stream;
    std::vector<int64_t>* program;
    bool ok = true;
    int64_t nsteps = 0;

    // Checked arithmetic: every value stays within +-INT64_MAX (INT64_MIN never occurs), else ok = false.
    int64_t mul(int64_t a, int64_t b) {
        const int64_t small = int64_t(1) << 31;
        if (a > -small && a < small && b > -small && b < small) return a * b;
        if (a == 0 || b == 0) return 0;
        const uint64_t ua = a < 0 ? uint64_t(0) - uint64_t(a) : uint64_t(a);
        const uint64_t ub = b < 0 ? uint64_t(0) - uint64_t(b) : uint64_t(b);
        if (ua > uint64_t(INT64_MAX) / ub) return ok = false, 0;
        return a * b;
    }
    int64_t add(int64_t a, int64_t b) {
        if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < -INT64_MAX - b)) return ok = false, 0;
        return a + b;
    }

    // strided._lowest_offset
    int64_t lowest_offset(const Layout& a) {
        int64_t low = 0;
        const size_t rank = std::min(a.shape.size(), a.strides.size());
        for (size_t k = 0; k < rank; ++k)
            if (a.strides[k] < 0) low = add(low, mul(a.shape[k] - 1, a.strides[k]));
        return low;
    }

    // strided._byte_loops: the view's start in bytes and its dims as (count, byte stride) in `n` and `s`.
    int64_t byte_loops(const Layout& a, const View& view, int64_t* counts, int64_t* strides) {
        int64_t start = -lowest_offset(a);
        const size_t k = std::min(view.start.size(), a.strides.size());
        for (size_t i = 0; i < k; ++i) start = add(start, mul(view.start[i], a.strides[i]));
        for (size_t j = 0; j < view.dims.size(); ++j) {
            const Dim& dim = view.dims[j];
            counts[j] = dim.count;
            strides[j] = mul(dim.step, a.strides[(size_t)dim.axis]);
        }
        return start;
    }

    // strided._merge: merge loops contiguous on every side, the first outer loop that another continues
    // into the first such, repeatedly; count-1 loops dropped.
    void merge(Loops* loops) {
        Loops& l = *loops;
        int kept = 0;
        for (int k = 0; k < l.size; ++k)
            if (l[k].n != 1) l[kept++] = l[k];
        l.size = kept;
        int64_t es[kCap], ed[kCap];
        while (l.size > 1) {
            for (int k = 0; k < l.size; ++k) es[k] = mul(l[k].s, l[k].n), ed[k] = mul(l[k].d, l[k].n);
            if (!ok) return;
            int i = 0, j = -1;
            for (; i < l.size && j < 0; ++i)
                for (int k = 0; k < l.size; ++k)
                    if (k != i && es[k] == l[i].s && ed[k] == l[i].d) {
                        j = k;
                        break;
                    }
            if (j < 0) return;
            --i;
            l[j].n = mul(l[j].n, l[i].n);
            l.erase(i);
        }
    }

    // strided.runs_together: the loops around a gather tile of n positions, with the loops between two
    // that both go on with the tile's rows moved outside them (as much of the outer as REREAD_BYTES allow).
    void runs_together(Loops* outer, int64_t n, int64_t word) {
        const Loops& o = *outer;
        if (n < kLine && n * word < kLine) return;  // (n < kLine: no overflow)
        for (int r = 0; r < o.size; ++r) {
            const Loop run = o[r];
            if (run.d != n) continue;
            for (int q = 0; q < r - 1; ++q) {
                const Loop at = o[q];
                if (at.d != mul(n, run.n)) continue;
                bool below = true;
                for (int b = q + 1; b < r; ++b) below = below && iabs(o[b].s) < iabs(at.s);
                if (!below) continue;
                const int64_t most = kRereadBytes / std::max<int64_t>(1, mul(iabs(at.s), word));
                const int64_t inner = largest_divisor(at.n, most);
                if (!ok) return;
                if (inner < 2) continue;
                Loops moved;
                for (int k = 0; k < q; ++k) moved.push(o[k]);
                if (inner < at.n) moved.push(Loop{at.n / inner, mul(at.s, inner), mul(at.d, inner)});
                for (int k = q + 1; k < r; ++k) moved.push(o[k]);
                moved.push(Loop{inner, at.s, at.d});
                for (int k = r; k < o.size; ++k) moved.push(o[k]);
                *outer = moved;
                return;
            }
            break;
        }
    }

    // The largest divisor of count up to most, or 1 where there is none (count 0, most under 1): Python's
    // max over the set of divisors up to isqrt(count) and their cofactors, with default 1.
    int64_t largest_divisor(int64_t count, int64_t most) {
        if (count < 2 || most < 2) return 1;
        if (count <= most) return count;
        if (count > kMaxDivisorCount) return ok = false, 1;
        int64_t r = (int64_t)std::sqrt((double)count);
        while (r > 0 && r * r > count) --r;
        while ((r + 1) * (r + 1) <= count) ++r;
        // cofactors count / k >= r, the largest first (k from the least with count / k <= most)
        for (int64_t k = count / most + (count % most != 0); k <= r; ++k)
            if (count % k == 0) return count / k;
        for (int64_t k = std::min(most, r); k > 1; --k)
            if (count % k == 0) return k;
        return 1;
    }

    // strided.schedule: order the loops and name the inner tile.
    void schedule(const Loops& loops, bool fill, int64_t word, Nest* nest) {
        Loops& res = nest->loops;
        res.size = 0;
        nest->block = 0;
        if (loops.size == 0) {
            nest->pattern = N_CONTIGUOUS;
            return;
        }
        const int size = loops.size;
        if (!fill) {
            // every block tile, the one writing the longest pieces (up to 64 words) winning, the first of them
            int best = -1;
            int64_t best_key = 0, best_block = 0;
            int bi = -1, bj = -1, bj2 = -1;
            auto consider = [&](int64_t key, int pattern, int64_t block, int i, int j, int j2) {
                key = std::min<int64_t>(key, kPieceWords);
                if (best < 0 || key > best_key) best = pattern, best_key = key, best_block = block, bi = i, bj = j, bj2 = j2;
            };
            for (int j = 0; j < size; ++j) {
                const Loop& lj = loops[j];
                const int64_t b = lj.n;
                if (!is_block(b) || !(lj.s == 1 || lj.d == 1)) continue;
                for (int i = 0; i < size; ++i) {
                    if (i == j) continue;
                    const Loop& li = loops[i];
                    if (lj.s == 1 && li.s == b && li.d == 1) consider(li.n, N_GATHER, b, i, j, -1);
                    if (lj.d == 1 && li.d == b && li.s == 1) consider(li.n >= kPieceWords ? kPieceWords : li.n * b, N_SCATTER, b, i, j, -1);
                }
            }
            for (int j1 = 0; j1 < size; ++j1) {
                const Loop& l1 = loops[j1];
                if (l1.s != 1 && l1.d != 1) continue;
                for (int j2 = 0; j2 < size; ++j2) {
                    const Loop& l2 = loops[j2];
                    if (j2 == j1 || l1.n < 1 || l1.n > 4 || l2.n < 1 || l2.n > 4) continue;
                    const int64_t block = l1.n * l2.n;
                    if (!is_block(block)) continue;
                    const bool gather2 = l1.s == 1 && l2.s == l1.n, scatter2 = l1.d == 1 && l2.d == l1.n;
                    if (!(gather2 || scatter2)) continue;
                    for (int i = 0; i < size; ++i) {
                        if (i == j1 || i == j2) continue;
                        const Loop& li = loops[i];
                        if (gather2 && li.s == block && li.d == 1) consider(li.n, N_GATHER2, block, i, j1, j2);
                        if (scatter2 && li.d == block && li.s == 1)
                            consider(li.n >= kPieceWords ? kPieceWords : li.n * block, N_SCATTER2, block, i, j1, j2);
                    }
                }
            }
            if (best >= 0) {
                for (int k = 0; k < size; ++k)
                    if (k != bi && k != bj && k != bj2) res.push(loops[k]);
                following(best == N_GATHER || best == N_GATHER2 ? 1 : 2, &res);
                if (best == N_GATHER) runs_together(&res, loops[bi].n, word);
                if (bj2 >= 0) res.push(loops[bj2]);
                res.push(loops[bj]);
                res.push(loops[bi]);
                nest->pattern = best, nest->block = best_block;
                return;
            }
        }
        int side = fill ? 2 : 1;
        int inner = -1;
        for (int k = 0; k < size; ++k)
            if (loops[k].d == 1 && (fill || loops[k].s == 1) && (inner < 0 || loops[k].n > loops[inner].n)) inner = k;
        if (inner >= 0) {
            const int64_t n = loops[inner].n;
            int64_t jump1 = -1, jump2 = -1;
            for (int k = 0; k < size; ++k) {
                if (k == inner) continue;
                res.push(loops[k]);
                if (loops[k].s == n) jump1 = std::max(jump1, iabs(loops[k].d));
                if (loops[k].d == n) jump2 = std::max(jump2, iabs(loops[k].s));
            }
            side = !fill && n < kPieceWords && jump1 > jump2 ? 1 : 2;
            following(side, &res);
            res.push(loops[inner]);
            nest->pattern = N_CONTIGUOUS;
            return;
        }
        int64_t key0 = 0, key1 = 0;
        for (int k = 0; k < size; ++k) {
            const int64_t a = std::min(iabs(loops[k].at(side)), iabs(loops[k].d)), b = -loops[k].n;
            if (inner < 0 || a < key0 || (a == key0 && b < key1)) inner = k, key0 = a, key1 = b;
        }
        for (int k = 0; k < size; ++k)
            if (k != inner) res.push(loops[k]);
        following(2, &res);
        res.push(loops[inner]);
        nest->pattern = N_STRIDED;
    }

    // strided._finish and _word: the widest word dividing every stride but the item's run, the starts, the
    // addresses and the run; the loops in words, scheduled.
    void finish(const Loops& loops, const int64_t* starts, int nstarts, const uint64_t* addresses, int naddresses,
                bool fill, int64_t widest, Nest* nest) {
        const int64_t u = fill ? 0 : 1;
        int64_t run = 1;
        for (int k = 0; k < loops.size; ++k)
            if (loops[k].s == u && loops[k].d == 1) {
                run = loops[k].n;
                break;
            }
        uint64_t bits = uint64_t(run);  // a word divides the gcd of them all: the low bits of each are 0
        for (int k = 0; k < loops.size; ++k)
            if (!(loops[k].s == u && loops[k].d == 1)) bits |= uint64_t(loops[k].s) | uint64_t(loops[k].d);
        for (int k = 0; k < nstarts; ++k) bits |= uint64_t(starts[k]);
        for (int k = 0; k < naddresses; ++k) bits |= addresses[k];
        int64_t word = 1;
        for (int64_t w = 16; w >= 2; w /= 2)
            if (w <= widest && (bits & uint64_t(w - 1)) == 0) {
                word = w;
                break;
            }
        Loops words;
        for (int k = 0; k < loops.size; ++k) {
            const Loop& l = loops[k];
            if (l.s == u && l.d == 1) {
                if (run / word > 1) words.push(Loop{run / word, u, 1});
            } else {
                words.push(Loop{l.n, floordiv(l.s, word), floordiv(l.d, word)});
            }
        }
        nest->word = word;
        schedule(words, fill, word, nest);
    }

    // strided.lower (widest 16, aligned to both addresses)
    void lower(const View& src, const View& dst, Nest* nest) {
        if (!valid_view(src, data) || !valid_view(dst, out)) return void(ok = false);
        int64_t sn[kMaxDims], ss[kMaxDims], dn[kMaxDims], ds[kMaxDims];
        const int64_t src_start = byte_loops(data, src, sn, ss), dst_start = byte_loops(out, dst, dn, ds);
        const int m = (int)std::min(src.dims.size(), dst.dims.size());
        Loops loops;
        for (int k = 0; k < m; ++k) loops.push(Loop{sn[k], ss[k], ds[k]});
        loops.push(Loop{data.itemsize, 1, 1});
        merge(&loops);
        const int64_t starts[2] = {src_start, dst_start};
        const uint64_t addresses[2] = {data.address, out.address};
        finish(loops, starts, 2, addresses, 2, false, kWidest, nest);
        nest->src_start = floordiv(src_start, nest->word), nest->dst_start = floordiv(dst_start, nest->word);
    }

    // strided.lower_fill
    void lower_fill(const View& view, Nest* nest) {
        if (!valid_view(view, out)) return void(ok = false);
        int64_t n[kMaxDims], s[kMaxDims];
        const int64_t start = byte_loops(out, view, n, s);
        Loops loops;
        for (size_t k = 0; k < view.dims.size(); ++k) loops.push(Loop{n[k], 0, s[k]});
        loops.push(Loop{out.itemsize, 0, 1});
        merge(&loops);
        finish(loops, &start, 1, &out.address, 1, true, kWidest, nest);
        nest->pattern = N_FILL, nest->block = 0;
        nest->src_start = 0, nest->dst_start = floordiv(start, nest->word);
    }

    // strided.lower_window; false where the kernels cannot take the window.
    bool lower_window(const Window& window, WindowNest* nest) {
        if (!valid_window(window, data, out)) return ok = false;
        int64_t sn[kMaxDims], ss[kMaxDims], dn[kMaxDims], ds[kMaxDims];
        const int64_t src_start = byte_loops(data, window.src, sn, ss), dst_start = byte_loops(out, window.dst, dn, ds);
        const int m = (int)std::min(window.src.dims.size(), window.dst.dims.size());
        const int64_t cut = (int64_t)m - window.trailing;  // (checked: 2 <= cut <= m)
        Loop blocks{sn[cut - 2], ss[cut - 2], ds[cut - 2]}, offsets{sn[cut - 1], ss[cut - 1], ds[cut - 1]};
        Loops rest;
        for (int k = 0; k < m; ++k)
            if (k < cut - 2 || k >= cut) rest.push(Loop{sn[k], ss[k], ds[k]});
        rest.push(Loop{data.itemsize, 1, 1});
        merge(&rest);
        if (!ok) return false;
        int64_t word = 1;
        for (int k = 0; k < rest.size; ++k)
            if (rest[k].s == 1 && rest[k].d == 1) {
                word = rest[k].n;
                break;
            }
        const int side = window.space == 0 ? 1 : 2;
        if (!step_word(word, GATHER_WINDOW) || offsets.at(side) != word ||
            (window.space != 0 && word > kMaxWord))
            return false;
        Loops words;
        uint64_t bits = uint64_t(src_start) | uint64_t(dst_start);
        for (int k = 0; k < rest.size; ++k)
            if (!(rest[k].s == 1 && rest[k].d == 1)) words.push(rest[k]), bits |= uint64_t(rest[k].s) | uint64_t(rest[k].d);
        bits |= uint64_t(blocks.s) | uint64_t(blocks.d) | uint64_t(offsets.s) | uint64_t(offsets.d);
        if (bits & uint64_t(word - 1)) return false;
        const uint64_t align = uint64_t(std::min<int64_t>(word, 16) - 1);
        if ((data.address & align) || (out.address & align)) return false;
        for (int k = 0; k < words.size; ++k) words[k].s = floordiv(words[k].s, word), words[k].d = floordiv(words[k].d, word);
        blocks.s = floordiv(blocks.s, word), blocks.d = floordiv(blocks.d, word);
        offsets.s = floordiv(offsets.s, word), offsets.d = floordiv(offsets.d, word);
        merge(&words);
        following(side, &words);
        words.push(offsets);
        words.push(blocks);
        nest->word = word;
        nest->src_start = floordiv(src_start, word), nest->dst_start = floordiv(dst_start, word);
        nest->loops = words;
        nest->pattern = window.space == 0 ? GATHER_WINDOW : SCATTER_WINDOW;
        nest->block = is_block(offsets.n) ? offsets.n : 0;
        nest->lo = window.lo, nest->hi = window.hi;
        return ok;
    }

    // strided.fan_out_first: a scatter tile's loops with the loops that fan its reads out moved outermost,
    // where its input rows are 1 KiB or more and its output rows lie on whole lines (`start` and `span`
    // only modulo a line: unsigned arithmetic wraps modulo 2^64, a multiple of it).
    void fan_out_first(Loops* nest, int64_t word, uint64_t start, uint64_t span) {
        Loops& l = *nest;
        if (l.size < 2) return;
        const int outer = l.size - 2;
        const Loop& row = l[l.size - 1];
        const int64_t run = row.n;  // (a row's src words where its stride is 1)
        if (row.s != 1 || (run < kFanOutBytes && run * word < kFanOutBytes)) return;
        const uint64_t line = uint64_t(kLine) - 1;
        if ((start & line) || (span & line)) return;
        for (int k = 0; k < outer; ++k)
            if ((uint64_t(l[k].d) * uint64_t(word)) & line) return;
        for (int k = outer - 1; k >= 0; --k)
            if (l[k].s == run) {
                std::rotate(l.v, l.v + k + 1, l.v + outer);
                return;
            }
    }

    // engines.native.engine._step
    void step(int pattern, int64_t word, int64_t block, int64_t lo, int64_t hi, int64_t src, int64_t dst, const Loop* loops, int n) {
        std::vector<int64_t>& p = *program;
        const int pad = n < 2 ? 2 - n : 0;
        p.insert(p.end(), {(int64_t)pattern, word, block, lo, hi, src, dst, (int64_t)(n + pad)});
        for (int k = 0; k < pad; ++k) p.insert(p.end(), {1, 0, 0});
        for (int k = 0; k < n; ++k) p.insert(p.end(), {loops[k].n, loops[k].s, loops[k].d});
        ++nsteps;
    }

    // tests/lowering's _split: a nest's steps, its tile cut where its rows are too few for the threads.
    void split(int pattern, int64_t word, int64_t block, int64_t src_start, int64_t dst_start, const Loops& in) {
        Loops loops = in;
        int64_t lo = 0, hi = 0;
        if ((pattern == N_GATHER2 || pattern == N_SCATTER2) && loops.size >= 3) {
            const Loop j2 = loops[loops.size - 3], j1 = loops[loops.size - 2], i = loops[loops.size - 1];
            const int side = pattern == N_GATHER2 ? 2 : 1;
            pattern = pattern == N_GATHER2 ? N_GATHER : N_SCATTER, lo = j1.n, hi = j2.at(side);
            loops.size -= 3;
            loops.push(Loop{block, j1.s, j1.d});
            loops.push(i);
        }
        if (loops.size < 2) {
            const int pad = 2 - loops.size;
            for (int k = loops.size - 1; k >= 0; --k) loops[k + pad] = loops[k];
            for (int k = 0; k < pad; ++k) loops[k] = Loop{1, 0, 0};
            loops.size = 2;
        }
        const int id = pattern_id(pattern);
        const int outer = loops.size - 2;
        int64_t rows = 1;
        for (int k = 0; k < outer; ++k) rows = mul(rows, loops[k].n);
        const Loop l1 = loops[outer], l0 = loops[outer + 1];
        const int64_t n1 = l1.n, s1 = l1.s, d1 = l1.d, n0 = l0.n, s0 = l0.s, d0 = l0.d;
        struct Piece {
            int64_t src, dst;
            Loops loops;
            int64_t count;
        };
        Piece nests[2];
        int npieces = 1;
        nests[0].src = src_start, nests[0].dst = dst_start, nests[0].loops = loops, nests[0].count = rows;
        if (rows < kMinRows && (pattern == N_CONTIGUOUS || pattern == N_FILL || pattern == N_STRIDED) && n1 > 1 &&
            mul(mul(mul(rows, n1), n0), word) >= kSharedBytes) {
            int64_t per = pattern != N_STRIDED ? 1 : std::max<int64_t>(1, floordiv(mul(n1, rows), kMinRows));
            if (pattern == N_STRIDED && d1 == n0 && d0 == 1 && (n0 % 16 == 0 || 16 % n0 == 0)) per = add(per, 15) & ~int64_t(15);
            if (per < n1) {
                const int64_t whole = n1 / per, rest = n1 % per;  // (n1 > per >= 1)
                Loops& first = nests[0].loops;
                first.size = outer;
                first.push(Loop{whole, mul(per, s1), mul(per, d1)});
                first.push(Loop{per, s1, d1});
                first.push(l0);
                nests[0].count = mul(rows, whole);
                if (rest) {
                    Piece& second = nests[npieces++];
                    second.src = add(src_start, mul(mul(whole, per), s1));
                    second.dst = add(dst_start, mul(mul(whole, per), d1));
                    second.loops = loops;
                    second.loops.size = outer;
                    second.loops.push(Loop{rest, s1, d1});
                    second.loops.push(l0);
                    second.count = rows;
                }
            }
        }
        if (!ok) return;
        for (int p = 0; p < npieces; ++p) {
            const Piece& piece = nests[p];
            const Loops& nest = piece.loops;
            // chunks of _CHUNK_WORDS, or fewer words (whole lines, from _CHUNK_BYTES)
            int64_t size = add(-floordiv(-mul(n0, piece.count), kMinRows), 63) & ~int64_t(63);
            size = std::min(kChunkWords, std::max(size, kMinChunkBytes / word));
            if (!ok) return;
            if (piece.count >= kMinRows || n0 < 2 * size) {
                step(id, word, block, lo, hi, piece.src, piece.dst, nest.v, nest.size);
                continue;
            }
            const int64_t chunks = n0 / size, rest = n0 % size;  // (n0 >= 2 * size > 0)
            const Loop chunk{chunks, mul(size, s0), mul(size, d0)};
            Loops cut;
            for (int k = 0; k < nest.size - 2; ++k) cut.push(nest[k]);
            cut.push(chunk);
            cut.push(nest[nest.size - 2]);
            cut.push(Loop{size, s0, d0});
            step(id, word, block, lo, hi, piece.src, piece.dst, cut.v, cut.size);
            if (rest) {
                cut.size = 0;
                for (int k = 0; k < nest.size - 1; ++k) cut.push(nest[k]);
                cut.push(Loop{rest, s0, d0});
                step(id, word, block, lo, hi, add(piece.src, mul(chunks, chunk.s)), add(piece.dst, mul(chunks, chunk.d)), cut.v,
                     cut.size);
            }
        }
    }

    // engines.native.engine._windowed; false where a window cannot be lowered.
    bool windowed() {
        for (const Window& window : plan.windows) {
            WindowNest nest;
            if (!lower_window(window, &nest)) return false;
            Loops& loops = nest.loops;
            if (stream == 2 && nest.pattern == SCATTER_WINDOW) {
                const int64_t lo = std::max<int64_t>(nest.lo, 0);
                const int64_t hi = std::min(nest.hi, mul(loops[loops.size - 1].n, nest.block ? nest.block : loops[loops.size - 2].n));
                const uint64_t start = out.address + (uint64_t(nest.dst_start) + uint64_t(lo)) * uint64_t(nest.word);
                fan_out_first(&loops, nest.word, start, (uint64_t(hi) - uint64_t(lo)) * uint64_t(nest.word));
            }
            step(nest.pattern, nest.word, nest.block, nest.lo, nest.hi, nest.src_start, nest.dst_start, loops.v, loops.size);
        }
        for (const View& view : plan.window_fills) fills(view);
        return ok;
    }

    void fills(const View& view) {
        Nest fill;
        lower_fill(view, &fill);
        if (ok) split(N_FILL, fill.word, 0, 0, fill.dst_start, fill.loops);
    }

    void copies() {
        for (const auto& [src, dst] : plan.copies) {
            Nest copy;
            lower(src, dst, &copy);
            if (!ok) return;
            if (stream == 2 && copy.pattern == N_SCATTER) {
                Loops& l = copy.loops;
                const uint64_t word = uint64_t(copy.word);
                fan_out_first(&l, copy.word, out.address + uint64_t(copy.dst_start) * word,
                              uint64_t(l[l.size - 1].n) * uint64_t(copy.block) * word);
            }
            split(copy.pattern, copy.word, copy.block, copy.src_start, copy.dst_start, copy.loops);
        }
        for (const View& view : plan.fills) fills(view);
    }
};

}  // namespace

bool lower_program(const Plan& plan, const Layout& data, const Layout& out, int stream, std::vector<int64_t>* program) {
    program->clear();
    if (!valid_layout(data) || !valid_layout(out)) return false;
    program->reserve(64 + 32 * (plan.copies.size() + plan.fills.size() + plan.windows.size() + plan.window_fills.size()));
    program->push_back(0);
    if (plan.source >= 0) {  // SpaceToBatch and BatchToSpace of small images: units from tables
        std::vector<std::vector<int64_t>> steps;
        if (lower_units(plan, data, out, &steps)) {
            (*program)[0] = (int64_t)steps.size();
            for (const auto& s : steps) program->insert(program->end(), s.begin(), s.end());
            return true;
        }
    }
    Lowering lowering{plan, data, out, stream, program};
    if (!plan.windows.empty()) {
        if (lowering.windowed()) {
            (*program)[0] = lowering.nsteps;
            return true;
        }
        if (!lowering.ok) return false;
        program->resize(1);
        lowering.nsteps = 0;
    }
    lowering.copies();
    if (!lowering.ok) return false;
    (*program)[0] = lowering.nsteps;
    return true;
}

}  // namespace dm::planner

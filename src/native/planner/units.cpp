// lower_units (plan.hpp): SpaceToBatch and BatchToSpace of small images as units from tables
// (tests/lowering/units.py, ported line for line: the same candidates in the same order, the same checks,
// the same step, bit for bit).
//
// The output is a run of units, an image (or one channel plane of it) after another, laid out densely in
// `out`; a table per part (SpaceToBatch: per block offset) says where each word of a unit comes from in the
// input, or kZeroWord for a pad. The tables are written straight into the step, each entry at its word's
// place in memory. Every product and sum that a layout or a plan could push past int64 is checked first:
// where one would, no step is made (such layouts reach past any memory).

#include <cstdint>
#include <limits>
#include <vector>

#include "common.hpp"
#include "plan.hpp"

namespace dm::planner {

namespace {

// (kSmallUnitWords, kTableCost and kWindowRowBytes are plan.hpp's)
constexpr int64_t kHeadWords = 17;  // a UNITS step's head, before its tables
// Offsets, extents and their sums stay within this: the sum of two never overflows.
constexpr int64_t kBig = int64_t(1) << 62;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

// a * b into *r; false where it overflows int64.
bool mul(int64_t a, int64_t b, int64_t* r) {
    if (a > 0) {
        if (b > 0 ? a > kMax / b : b < kMin / a) return false;
    } else if (a < 0) {
        if (b > 0 ? a < kMin / b : b < kMax / a) return false;
    }
    *r = a * b;
    return true;
}
// a + b into *r; false where it overflows int64.
bool add(int64_t a, int64_t b, int64_t* r) {
    if (b > 0 ? a > kMax - b : a < kMin - b) return false;
    *r = a + b;
    return true;
}
uint64_t uabs(int64_t v) { return v < 0 ? uint64_t(0) - uint64_t(v) : uint64_t(v); }

// The product of v[from:] (all >= 0): 0 where one is 0, else cap + 1 where it passes cap.
int64_t product(const std::vector<int64_t>& v, size_t from, int64_t cap) {
    for (size_t k = from; k < v.size(); ++k)
        if (v[k] == 0) return 0;
    int64_t p = 1;
    for (size_t k = from; k < v.size(); ++k) {
        if (v[k] > cap / p) return cap + 1;  // (p * v[k] > cap)
        p *= v[k];
    }
    return p;
}

// sum((n - 1) * |s|) over axes from `from` with n > 1: every offset sum(i_k * s_k) lies within it of 0;
// false where it passes kBig.
bool extent(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, size_t from, int64_t* e) {
    *e = 0;
    for (size_t k = from; k < shape.size(); ++k) {
        if (shape[k] <= 1) continue;
        const uint64_t s = uabs(strides[k]);
        if (s > uint64_t(kBig)) return false;
        int64_t t;
        if (!mul(shape[k] - 1, (int64_t)s, &t) || !add(*e, t, e) || *e > kBig) return false;
    }
    return true;
}

// datamove.engines.loops.lowest_offset: sum((n - 1) * s) over axes with s < 0 (an empty axis too, as there).
bool lowest_offset(const Layout& a, int64_t* low) {
    *low = 0;
    for (size_t k = 0; k < a.shape.size(); ++k) {
        if (a.strides[k] >= 0) continue;
        int64_t t;
        if (!mul(a.shape[k] - 1, a.strides[k], &t) || !add(*low, t, low)) return false;
    }
    return true;
}

// Calls row(j0, idx) for each row (the last axis) of the C-order index space `dims` (m >= 1 axes, each
// >= 1): j0 the row's first flat index, idx its indices on the axes before the last.
template <class F>
void for_rows(const int64_t* dims, size_t m, std::vector<int64_t>* idx, F&& row) {
    idx->assign(m, 0);
    const int64_t inner = dims[m - 1];
    for (int64_t j0 = 0;; j0 += inner) {
        row(j0, idx->data());
        size_t k = m - 1;
        for (; k > 0; --k) {
            if (++(*idx)[k - 1] < dims[k - 1]) break;
            (*idx)[k - 1] = 0;
        }
        if (k == 0) return;
    }
}

// Where a unit's word j (counted in C order over the unit's axes) lies in memory from the unit's lowest word:
// j itself where the unit is laid out in C order, else from the offsets array.
struct InOrder {
    int64_t operator()(int64_t j) const { return j; }
};
struct Placed {
    const int64_t* at;
    int64_t operator()(int64_t j) const { return at[j]; }
};

// What the tables of a unit read: the unit's axes (the output's `first`.., `m` of them, their lengths
// `dims`), the op's parameters and the input's shape and strides (in items).
struct Unit {
    size_t first, m, rank;
    const int64_t* dims;
    int64_t words;
    const int64_t *block, *begin, *in_shape, *ss;
};

// The larger of `most` and |v|, v unless kZeroWord (datamove's np.abs(tables[tables != ZERO]).max()).
inline int64_t larger(int64_t most, int64_t v) { return v == kZeroWord ? most : std::max(most, v < 0 ? -v : v); }

// SpaceToBatch: per block offset b (row-major over block[1:]), each output word's input offset, the spec's
// out[(b, n), q] = data[n, q * B + b - PB], or kZeroWord outside the input; each part's table `words` apart.
// *most: the largest |entry| but kZeroWord's. False where an offset could pass kBig.
template <class Place>
bool space_to_batch_tables(const Unit& u, int64_t parts, Place place, int64_t* tables, std::vector<int64_t>* idx,
                           int64_t* most) {
    for (size_t k = 0; k < u.m; ++k) {  // x = q * B + b - PB within kBig for every q and b
        const size_t a = u.first + k;
        int64_t span;
        if (u.begin[a] < -kBig / 2 || u.begin[a] > kBig / 2 || !mul(u.dims[k], u.block[a], &span) || span > kBig / 2)
            return false;
    }
    std::vector<int64_t> b(u.rank, 0);
    const size_t last = u.rank - 1;
    const int64_t inner = u.dims[u.m - 1], B = u.block[last], in_n = u.in_shape[last], s = u.ss[last];
    int64_t largest = 0;
    for (int64_t p = 0; p < parts; ++p) {
        for (int64_t rem = p, a = (int64_t)last; a >= 1; --a) b[a] = rem % u.block[a], rem /= u.block[a];
        int64_t* const table = tables + p * u.words;
        // x = x0 + q * B on the row's axis: inside the input for q_lo <= q < q_hi
        const int64_t x0 = b[last] - u.begin[last];
        const int64_t q_lo = x0 >= 0 ? 0 : std::min(inner, (B - 1 - x0) / B);
        const int64_t q_hi = std::max(q_lo, in_n - x0 <= 0 ? 0 : std::min(inner, (in_n - x0 + B - 1) / B));
        for_rows(u.dims, u.m, idx, [&](int64_t j0, const int64_t* at) {
            int64_t base = 0;
            bool inside = true;
            for (size_t k = 0; k + 1 < u.m && inside; ++k) {
                const size_t a = u.first + k;
                const int64_t x = at[k] * u.block[a] + b[a] - u.begin[a];
                inside = x >= 0 && x < u.in_shape[a];
                if (inside) base += x * u.ss[a];  // (within the data's extent)
            }
            const int64_t lo = inside ? q_lo : inner, hi = inside ? q_hi : inner;
            for (int64_t q = 0; q < lo; ++q) table[place(j0 + q)] = kZeroWord;
            int64_t x = x0 + lo * B;
            for (int64_t q = lo; q < hi; ++q, x += B) table[place(j0 + q)] = base + x * s;
            for (int64_t q = hi; q < inner; ++q) table[place(j0 + q)] = kZeroWord;
            if (hi > lo) {  // the row's entries in a line: the largest |entry| at an end, but kZeroWord's
                const int64_t v_lo = base + (x0 + lo * B) * s, v_hi = base + (x0 + (hi - 1) * B) * s;
                if (v_lo != kZeroWord && v_hi != kZeroWord) {  // (one inside is left out, as smaller)
                    largest = larger(larger(largest, v_lo), v_hi);
                } else {
                    for (int64_t q = lo; q < hi; ++q) largest = larger(largest, table[place(j0 + q)]);
                }
            }
        });
    }
    *most = largest;
    return true;
}

// BatchToSpace: each output word's input offset from block offset 0's image, the spec's
// out[n, p - CB] = data[(b, n), q] for p = q * B + b, b counting the block offsets row-major, `group_step`
// (out.shape[0] images) apart. *most as above; false where an offset could pass kBig.
template <class Place>
bool batch_to_space_tables(const Unit& u, int64_t images, Place place, int64_t* tables, std::vector<int64_t>* idx,
                           int64_t* most) {
    int64_t bound = 0, groups = 1;
    for (size_t k = 0; k < u.m; ++k) {
        const size_t a = u.first + k;
        int64_t hi, t1, t2;
        if (!add(u.dims[k], u.begin[a], &hi) || u.begin[a] < -kBig || hi > kBig) return false;
        if (!mul(floordiv(u.begin[a], u.block[a]), u.ss[a], &t1) || !mul(floordiv(hi, u.block[a]), u.ss[a], &t2)) return false;
        const uint64_t t = std::max(uabs(t1), uabs(t2));
        if (t > (uint64_t)kBig || !add(bound, (int64_t)t, &bound) || bound > kBig) return false;
        groups *= u.block[a];
    }
    int64_t group_step, t;
    if (!mul(images, u.ss[0], &group_step) || !mul(groups - 1, group_step, &t) || uabs(t) > (uint64_t)kBig ||
        !add(bound, (int64_t)uabs(t), &bound) || bound > kBig)
        return false;
    const size_t last = u.rank - 1;
    const int64_t inner = u.dims[u.m - 1], B = u.block[last], s = u.ss[last];
    const int64_t q0 = floordiv(u.begin[last], B), b0 = floormod(u.begin[last], B);
    int64_t largest = 0;
    for_rows(u.dims, u.m, idx, [&](int64_t j0, const int64_t* at) {
        int64_t base = 0, group = 0;
        for (size_t k = 0; k + 1 < u.m; ++k) {
            const size_t a = u.first + k;
            const int64_t pos = at[k] + u.begin[a];
            base += floordiv(pos, u.block[a]) * u.ss[a];
            group = group * u.block[a] + floormod(pos, u.block[a]);
        }
        base += group * B * group_step;
        int64_t row_largest = largest;  // (locals: through the references they would be stored at every word)
        for (int64_t q = 0, qq = q0, bb = b0; q < inner; ++q) {
            const int64_t v = base + qq * s + bb * group_step;
            tables[place(j0 + q)] = v;
            row_largest = larger(row_largest, v);
            if (++bb == B) bb = 0, ++qq;
        }
        largest = row_largest;
    });
    *most = largest;
    return true;
}

}  // namespace

bool lower_units(const Plan& plan, const Layout& data, const Layout& out, std::vector<std::vector<int64_t>>* steps) {
    if (plan.source != BATCH_TO_SPACE && plan.source != SPACE_TO_BATCH) return false;
    const bool s2b = plan.source == SPACE_TO_BATCH;
    if (s2b && plan.fills.empty() && plan.window_fills.empty()) return false;
    const size_t rank = data.shape.size();
    const std::vector<int64_t>&block = plan.block, &begin = plan.begin, &end = plan.end;
    if (data.strides.size() != rank || out.shape.size() != rank || out.strides.size() != rank ||
        block.size() != rank || begin.size() != rank || end.size() != rank)
        return false;
    const int64_t item = data.itemsize;
    if (!unit_item(item) || rank < 3) return false;
    for (size_t k = 0; k < rank; ++k)
        if (data.strides[k] % item || out.strides[k] % item || data.shape[k] < 0 || out.shape[k] < 0 ||
            data.shape[k] > kBig / 4 || out.shape[k] > kBig / 4)  // (lengths no memory holds: a guard)
            return false;
    int64_t groups = 1;  // prod(block), each >= 1 (no more than kMaxParts + 1 counted)
    for (const int64_t b : block) {
        if (b < 1) return false;
        groups = b > kMaxParts ? kMaxParts + 1 : std::min(groups * b, kMaxParts + 1);
    }
    if (groups > kMaxParts) return false;
    // The output's innermost axis (the first of the smallest |stride| among those over 1 long): the windows'
    // rows where it is blocked or padded (long rows keep them), else pixels (channels-last).
    int64_t rows = -1;
    uint64_t least_stride = 0;
    for (size_t a = 0; a < rank; ++a)
        if (out.shape[a] > 1 && (rows < 0 || uabs(out.strides[a]) < least_stride)) rows = (int64_t)a, least_stride = uabs(out.strides[a]);
    if (rows < 0) return false;
    const bool spatial = block[rows] > 1 || begin[rows] != 0 || end[rows] != 0;
    if (spatial && (out.shape[rows] >= kWindowRowBytes || out.shape[rows] * item >= kWindowRowBytes)) return false;
    if (!s2b) {
        bool cropped = false;
        for (size_t k = 0; k < rank; ++k) cropped = cropped || begin[k] != 0 || end[k] != 0;
        if (spatial || !cropped) return false;
    }
    std::vector<int64_t> ss(rank), ds(rank);  // the strides in items
    for (size_t k = 0; k < rank; ++k) ss[k] = data.strides[k] / item, ds[k] = out.strides[k] / item;
    // Guards: every offset within either array, and where the steps start, stay far from overflow.
    int64_t data_extent, out_extent, data_low, out_low;
    if (!extent(data.shape, ss, 0, &data_extent) || !extent(out.shape, ds, 0, &out_extent) ||
        !lowest_offset(data, &data_low) || !lowest_offset(out, &out_low) || data_low == kMin || out_low == kMin)
        return false;
    const int64_t start_src = floordiv(-data_low, item), start_dst = floordiv(-out_low, item);
    const int64_t images = s2b ? data.shape[0] : out.shape[0];  // the space tensor's batch: the units' loop
    const int64_t out_bytes = product(out.shape, 0, kBig / 8) * item;  // out.nbytes (capped: only compared)

    struct Candidate {
        int64_t least, most;
        size_t first;
    };
    const Candidate candidates[4] = {{1, kSmallUnitWords, 1},
                                     {1, kSmallUnitWords, 2},
                                     {kSmallUnitWords + 1, kUnitsWords, 1},
                                     {kSmallUnitWords + 1, kUnitsWords, 2}};
    std::vector<int64_t> offsets, idx;
    std::vector<uint8_t> seen;
    for (const Candidate& c : candidates) {
        const size_t first = c.first;
        if (first == 2 && (block[1] != 1 || begin[1] != 0 || end[1] != 0 || rank < 4)) continue;
        const int64_t unit = product(out.shape, first, c.most);
        if (unit < c.least || unit > c.most) continue;
        int64_t count, src_step, dst_step;
        if (first == 1) {
            count = images, src_step = ss[0], dst_step = ds[0];
        } else {  // the batch and the second axis as one loop
            const int64_t channels = data.shape[1];
            int64_t s, d;
            if (!mul(channels, ss[1], &s) || s != ss[0] || !mul(channels, ds[1], &d) || d != ds[0]) continue;
            if (!mul(images, channels, &count)) return false;
            src_step = ss[1], dst_step = ds[1];
        }
        if (dst_step != unit) continue;
        // The unit's words in out: every offset from its lowest once, the next unit right after it. In C
        // order (each axis of more than one word at its C-order stride) word j lies at j; else `offsets`
        // holds each word's offset, a counting pass checks them, and they become places from the lowest.
        const size_t m = rank - first;
        const int64_t* const dims = out.shape.data() + first;
        bool in_order = true;
        for (int64_t k = (int64_t)rank - 1, words = 1; k >= (int64_t)first; words *= out.shape[k--])
            in_order = in_order && (out.shape[k] == 1 || ds[k] == words);
        int64_t low = 0;
        if (!in_order) {
            offsets.resize((size_t)unit);
            low = kMax;
            const int64_t inner = dims[m - 1], inner_step = ds[rank - 1];
            for_rows(dims, m, &idx, [&](int64_t j0, const int64_t* at) {
                int64_t base = 0;
                for (size_t k = 0; k + 1 < m; ++k) base += at[k] * ds[first + k];
                int64_t* const o = offsets.data() + j0;
                low = std::min(low, std::min(base, base + (inner - 1) * inner_step));  // (a row's lowest at an end)
                for (int64_t q = 0; q < inner; ++q, base += inner_step) o[q] = base;
            });
            seen.assign((size_t)unit, 0);
            bool dense = true;
            for (int64_t j = 0; j < unit && dense; ++j) {
                const int64_t d = offsets[j] - low;
                if (d >= unit || seen[d]) dense = false;
                else seen[d] = 1, offsets[j] = d;
            }
            if (!dense) continue;
        }
        int64_t parts = 1, part_step = 0;
        if (s2b) {
            parts = groups;
            if (!mul(images, ds[0], &part_step)) return false;
            if (parts * unit > kUnitsEntries || kTableCost * parts * unit > out_bytes + kTableSlack) continue;
        }
        // Where the tables read on (the core's table reads on into the next units): any reach from
        // kTableReach fails below whatever the tables hold.
        if (uabs(src_step) >= (uint64_t)kTableReach) return false;
        const int64_t reach = ((kLine / item) + unit - 1) / unit * (src_step < 0 ? -src_step : src_step);

        std::vector<int64_t> step((size_t)(kHeadWords + parts * unit));
        int64_t* const tables = step.data() + kHeadWords;
        const Unit u{first, m, rank, dims, unit, block.data(), begin.data(), data.shape.data(), ss.data()};
        int64_t most = 0;  // the largest |entry| but kZeroWord's
        const bool made = s2b ? (in_order ? space_to_batch_tables(u, parts, InOrder{}, tables, &idx, &most)
                                          : space_to_batch_tables(u, parts, Placed{offsets.data()}, tables, &idx, &most))
                              : (in_order ? batch_to_space_tables(u, images, InOrder{}, tables, &idx, &most)
                                          : batch_to_space_tables(u, images, Placed{offsets.data()}, tables, &idx, &most));
        if (!made || most + reach >= kTableReach) return false;
        const int64_t head[kHeadWords] = {UNITS,    item, 0,     0,     0,         start_src, start_dst + low, 3, count,
                                          src_step, unit, parts, 0,     part_step, unit,      0,               1};
        std::copy(head, head + kHeadWords, step.begin());
        steps->push_back(std::move(step));
        return true;
    }
    return false;
}

}  // namespace dm::planner

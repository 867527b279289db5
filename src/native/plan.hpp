// The core's planner: a call (the operation, its resolved parameters, the arrays' layouts) made into the
// program the kernels run (common.hpp's format), in C++, so that a new shape costs microseconds.
//
// Three stages, one file each in planner/ (planner.cpp compiles them as one):
//   views.cpp   plan_views: the output as strided views of the input (datamove.plans.views' Plan: copies, fills,
//               windows, window fills, the source); from the op's shapes and parameters only.
//   lower.cpp   lower_program: those views over two concrete layouts as the program's steps (merged dims,
//               widest word, loop order, tile kind, tiles cut for the threads; tests/lowering/strided.py
//               and tests/lowering's _split/_windowed/program, the Python twin).
//   units.cpp   lower_units: SpaceToBatch and BatchToSpace of small images as units from tables
//               (tests/lowering/units.py), which lower_program tries first.
// The Python side validates (datamove.shapes, the one place for the rules) before any of this runs.

#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace dm::planner {

enum Op { BATCH_TO_SPACE = 0, SPACE_TO_BATCH = 1, SPACE_TO_DEPTH = 2, DEPTH_TO_SPACE = 3 };

// The planner's measured thresholds (each one's measurement is where the Python twin, which reads them from
// the core's exports, uses it: datamove.engines.native.engine, strided, units).
// A nest whose rows are fewer than kMinRows has its tile cut for the threads: into chunks of kChunkWords
// words, or fewer, none under kMinChunkBytes; steps under kSharedBytes are left whole (tests/lowering's _split).
constexpr int64_t kMinRows = 64;
constexpr int64_t kChunkWords = int64_t(1) << 14;
constexpr int64_t kMinChunkBytes = int64_t(16) << 10;
constexpr int64_t kSharedBytes = int64_t(512) << 10;
// The input the loops that runs_together moves out may span (strided.REREAD_BYTES).
constexpr int64_t kRereadBytes = int64_t(1) << 20;
// Units of up to kSmallUnitWords words are tried first; the lowering's bytes per table word; output rows
// from kWindowRowBytes keep the windows (units.SMALL_UNIT_WORDS, TABLE_COST, ROW_BYTES).
constexpr int64_t kSmallUnitWords = 4096;
constexpr int64_t kTableCost = 24;
constexpr int64_t kWindowRowBytes = 256;
// The bytes a UNITS step's tables may take past the output's own (units.TABLE_SLACK).
constexpr int64_t kTableSlack = int64_t(1) << 20;
// The tile blocks (rows of a gather or scatter tile): strided.BLOCKS.
constexpr int64_t kTileBlocks[] = {2, 3, 4};
// Block tiles writing pieces of this many words or more write as well as longer ones: the longest up to it
// wins (strided.schedule, core_format.PIECE_WORDS); contiguous runs shorter than it follow their block loop's side.
constexpr int64_t kPieceWords = 64;
// Scatter tiles whose input rows are this many bytes or more read one block row at a time when streamed
// (strided.fan_out_first's FAN_OUT_BYTES).
constexpr int64_t kFanOutBytes = 1024;
enum Mode { BLOCKS_FIRST = 0, DEPTH_FIRST = 1 };

// A validated call's op and parameters (datamove.shapes has checked every rule).
struct Call {
    int op = SPACE_TO_DEPTH;
    std::vector<int64_t> in_shape, out_shape;
    std::vector<int64_t> block, begin, end;  // BatchToSpace / SpaceToBatch: block_shape, crops or pads
    int mode = BLOCKS_FIRST;                 // SpaceToDepth / DepthToSpace
    int64_t block_size = 1;
};

// Element k of a view's index space is array[start + sum_j k_j * step_j along axis_j] (datamove.plans.views.View).
struct Dim {
    int64_t axis, count, step;
    bool operator==(const Dim& o) const { return axis == o.axis && count == o.count && step == o.step; }
};
struct View {
    std::vector<int64_t> start;  // one per array axis
    std::vector<Dim> dims;
};
// datamove.plans.views.Window: a copy over whole blocks of the window axis keeping positions lo <= t < hi.
struct Window {
    View src, dst;
    int64_t lo = 0, hi = 0;
    int space = 0;  // 0: "src" (SpaceToBatch), 1: "dst" (BatchToSpace)
    int64_t trailing = 0;
};
// datamove.plans.views.Plan.
struct Plan {
    std::vector<int64_t> in_shape, out_shape;
    std::vector<std::pair<View, View>> copies;
    std::vector<View> fills;
    std::vector<Window> windows;
    std::vector<View> window_fills;
    int source = -1;  // -1: none; else BATCH_TO_SPACE or SPACE_TO_BATCH with block, begin, end below
    std::vector<int64_t> block, begin, end;
};

// An array as the lowering sees it: its shape, its strides in bytes, its item's bytes, and its lowest
// address (the data pointer moved back along negative strides).
struct Layout {
    std::vector<int64_t> shape, strides;
    int64_t itemsize = 1;
    uint64_t address = 0;
};

// The plan of a call (datamove.plans.views.<op>). False where it would be too large to plan here (more than
// 65536 views: views.cpp's kMaxViews; a rank over 16) or is malformed: the caller runs it on the NumPy engine.
bool plan_views(const Call& call, Plan* plan);
// The program of a plan over data and out (datamove.engines.native.engine.program's bytes, as int64s):
// `stream` is engines.native.engine.streamed()'s (0, 1, 2). False where the lowering cannot take it.
bool lower_program(const Plan& plan, const Layout& data, const Layout& out, int stream, std::vector<int64_t>* program);
// The steps of a plan as units from tables (tests/lowering/units.py's lower_units), appended to `steps` (each
// step's int64s, one vector a step); false where it takes none (then nothing is appended).
bool lower_units(const Plan& plan, const Layout& data, const Layout& out, std::vector<std::vector<int64_t>>* steps);

// Python's floor division and modulo (C++'s / and % truncate toward zero).
inline int64_t floordiv(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline int64_t floormod(int64_t a, int64_t b) { return a - floordiv(a, b) * b; }

// A plan as flat int64s, for the tests that hold it to datamove.plans.views' (tests/planner_cases.py writes the
// same from Python):
//   in_rank, in_shape..., out_rank, out_shape...,
//   ncopies, (view src, view dst)..., nfills, view..., nwindows, (view src, view dst, lo, hi, space,
//   trailing)..., nwindow_fills, view..., source, [rank, block..., begin..., end...] where source >= 0
// a view: nstart, start..., ndims, (axis, count, step)...
inline void encode_view(const View& v, std::vector<int64_t>* out) {
    out->push_back((int64_t)v.start.size());
    out->insert(out->end(), v.start.begin(), v.start.end());
    out->push_back((int64_t)v.dims.size());
    for (const Dim& d : v.dims) out->insert(out->end(), {d.axis, d.count, d.step});
}

inline void encode(const Plan& p, std::vector<int64_t>* out) {
    out->push_back((int64_t)p.in_shape.size());
    out->insert(out->end(), p.in_shape.begin(), p.in_shape.end());
    out->push_back((int64_t)p.out_shape.size());
    out->insert(out->end(), p.out_shape.begin(), p.out_shape.end());
    out->push_back((int64_t)p.copies.size());
    for (const auto& [s, d] : p.copies) encode_view(s, out), encode_view(d, out);
    out->push_back((int64_t)p.fills.size());
    for (const View& v : p.fills) encode_view(v, out);
    out->push_back((int64_t)p.windows.size());
    for (const Window& w : p.windows) {
        encode_view(w.src, out), encode_view(w.dst, out);
        out->insert(out->end(), {w.lo, w.hi, (int64_t)w.space, w.trailing});
    }
    out->push_back((int64_t)p.window_fills.size());
    for (const View& v : p.window_fills) encode_view(v, out);
    out->push_back(p.source);
    if (p.source >= 0) {
        out->push_back((int64_t)p.block.size());
        out->insert(out->end(), p.block.begin(), p.block.end());
        out->insert(out->end(), p.begin.begin(), p.begin.end());
        out->insert(out->end(), p.end.begin(), p.end.end());
    }
}

// The reverse of encode; false where `n` int64s at `p` are not a whole plan (counts bounded by `n`).
class Reader {
   public:
    Reader(const int64_t* p, int64_t n) : p_(p), n_(n) {}
    bool ok() const { return ok_; }
    bool done() const { return ok_ && at_ == n_; }
    int64_t next() {
        if (at_ >= n_) return ok_ = false, 0;
        return p_[at_++];
    }
    int64_t count() {  // a length: it cannot exceed what is left
        const int64_t c = next();
        if (c < 0 || c > n_ - at_) ok_ = false;
        return ok_ ? c : 0;
    }
    void ints(std::vector<int64_t>* v, int64_t k) {
        for (int64_t i = 0; i < k && ok_; ++i) v->push_back(next());
    }
    void view(View* v) {
        ints(&v->start, count());
        const int64_t k = count();
        for (int64_t i = 0; i < k && ok_; ++i) {
            const int64_t a = next(), c = next(), s = next();
            v->dims.push_back(Dim{a, c, s});
        }
    }

   private:
    const int64_t* p_;
    int64_t n_, at_ = 0;
    bool ok_ = true;
};

inline bool decode(const int64_t* p, int64_t n, Plan* plan) {
    Reader r(p, n);
    r.ints(&plan->in_shape, r.count());
    r.ints(&plan->out_shape, r.count());
    for (int64_t i = 0, k = r.count(); i < k && r.ok(); ++i) {
        plan->copies.emplace_back();
        r.view(&plan->copies.back().first), r.view(&plan->copies.back().second);
    }
    for (int64_t i = 0, k = r.count(); i < k && r.ok(); ++i) plan->fills.emplace_back(), r.view(&plan->fills.back());
    for (int64_t i = 0, k = r.count(); i < k && r.ok(); ++i) {
        plan->windows.emplace_back();
        Window& w = plan->windows.back();
        r.view(&w.src), r.view(&w.dst);
        w.lo = r.next(), w.hi = r.next(), w.space = (int)r.next(), w.trailing = r.next();
    }
    for (int64_t i = 0, k = r.count(); i < k && r.ok(); ++i) plan->window_fills.emplace_back(), r.view(&plan->window_fills.back());
    plan->source = (int)r.next();
    if (plan->source >= 0) {
        const int64_t rank = r.count();
        r.ints(&plan->block, rank), r.ints(&plan->begin, rank), r.ints(&plan->end, rank);
    }
    return r.done();
}

}  // namespace dm::planner

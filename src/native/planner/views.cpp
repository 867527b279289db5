// plan_views (plan.hpp): the output of a call as strided views of its input, datamove.plans.views ported line for
// line, so that the plan here is the plan there, bit for bit (tests/test_planner.py holds it to it): the same
// copies in the same order, the same fills, windows and window fills, the same source.
//
// The work is bounded before any view is made: each axis's pieces are counted first (at most three per axis
// for a valid call, six where a fill's two outside ranges meet), the plan's views counted from them, and a
// plan of more than kMaxViews views is refused (false: the NumPy engine runs it). Nothing here reads past a vector or
// divides by zero whatever the call: lengths, the op and the mode are checked, blocks must be 1 or more.

#include <cstddef>
#include <utility>
#include <vector>

#include "plan.hpp"

namespace dm::planner {

namespace {

// The most views (copies + fills + windows + window fills) planned here, and the highest rank. As many views
// as a program has steps (common.hpp's kMaxSteps): a plan of more could not be lowered whole anyway. (4096
// before: a 12-D SpaceToBatch with pads of 6,142 views went to a Python lowering that took 0.1 s.)
constexpr int64_t kMaxViews = int64_t(1) << 16;
constexpr size_t kMaxRank = 16;

// Python's int arithmetic where a call that passed no validation could overflow int64: wrapped (defined
// behaviour) instead of undefined; a valid call's values never come near.
inline int64_t add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
inline int64_t sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
inline int64_t mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

// Python's % for block >= 1, wrapped like the above (plan.hpp's floormod multiplies back unwrapped).
inline int64_t mod(int64_t a, int64_t block) { return sub(a, mul(floordiv(a, block), block)); }

// datamove.plans.views._Piece: positions f = d * block + b, d in [d0, d0 + d_count), b in [b0, b0 + b_count), at
// offset + (d - d0) * block + (b - b0) from the range's start.
struct Piece {
    int64_t d0, d_count, b0, b_count, offset;
    bool empty() const { return d_count == 0 || b_count == 0; }
};

// One axis's choices of pieces: _pieces' (at most three) or two of them end to end (a fill's outside).
struct Pieces {
    Piece p[6];
    int n;  // set by pieces() (no initializer: the arrays of them below stay uninitialized past the rank)
    void push(const Piece& piece) { p[n++] = piece; }
    void append(const Pieces& o) {
        for (int k = 0; k < o.n; ++k) push(o.p[k]);
    }
    int64_t nonempty() const {
        int64_t c = 0;
        for (int k = 0; k < n; ++k) c += !p[k].empty();
        return c;
    }
};

// datamove.plans.views._pieces: [lo, hi) as at most three rectangles in (d, b): head, full rows, tail.
Pieces pieces(int64_t lo, int64_t hi, int64_t block) {
    Pieces out;
    out.n = 0;
    int64_t f = lo;
    if (f < hi && mod(f, block) != 0) {
        const int64_t d = floordiv(f, block), b = mod(f, block);
        const int64_t row_end = mul(add(d, 1), block);
        const int64_t end = hi < row_end ? hi : row_end;
        out.push(Piece{d, 1, b, sub(end, f), sub(f, lo)});
        f = end;
    }
    const int64_t rows = floordiv(sub(hi, f), block);
    if (rows != 0) {
        out.push(Piece{floordiv(f, block), rows, 0, block, sub(f, lo)});
        f = add(f, mul(rows, block));
    }
    if (f < hi) out.push(Piece{floordiv(f, block), 1, 0, sub(hi, f), sub(f, lo)});
    return out;
}

// A count of views, saturated past the bound (so that products of many axes cannot overflow).
inline int64_t times(int64_t a, int64_t b) {
    if (a > kMaxViews || b > kMaxViews) return kMaxViews + 1;
    return a * b > kMaxViews ? kMaxViews + 1 : a * b;
}

// How many combinations itertools.product(*choices) yields that the planner keeps (no empty piece; none
// where the batch is empty).
int64_t combos(const Pieces* const* choices, size_t axes, int64_t batch) {
    if (batch == 0) return 0;
    int64_t c = 1;
    for (size_t k = 0; k < axes; ++k) c = times(c, choices[k]->nonempty());
    return c;
}

// Calls visit(combo) for each combination of one piece per axis, itertools.product's order (the last axis
// fastest), skipping those with an empty piece and all of them where the batch is empty.
template <class Visit>
void each_combo(const Pieces* const* choices, size_t axes, int64_t batch, const Piece** combo, Visit&& visit) {
    if (batch == 0) return;
    for (size_t k = 0; k < axes; ++k)
        if (choices[k]->n == 0) return;
    int at[kMaxRank];
    for (size_t k = 0; k < axes; ++k) at[k] = 0;
    for (;;) {
        bool empty = false;
        for (size_t k = 0; k < axes; ++k) {
            combo[k] = &choices[k]->p[at[k]];
            empty |= combo[k]->empty();
        }
        if (!empty) visit();
        size_t k = axes;
        while (k > 0 && ++at[k - 1] == choices[k - 1]->n) at[--k] = 0;
        if (k == 0) return;
    }
}

// The batch tensor's view of a combination (datamove.plans.views._space_batch_views' batch view, and a
// SpaceToBatch fill): start d0 per axis, the block offsets folded into the batch axis.
View batch_view(size_t rank, int64_t batch, const int64_t* steps, const Piece* const* combo) {
    int64_t start[kMaxRank];
    Dim dims[2 * kMaxRank];
    start[0] = 0, dims[0] = Dim{0, batch, 1};
    for (size_t i = 1; i < rank; ++i) {
        const Piece& piece = *combo[i - 1];
        start[i] = piece.d0;
        start[0] = add(start[0], mul(piece.b0, steps[i - 1]));
        dims[2 * i - 1] = Dim{(int64_t)i, piece.d_count, 1};
        dims[2 * i] = Dim{0, piece.b_count, steps[i - 1]};
    }
    return View{std::vector<int64_t>(start, start + rank), std::vector<Dim>(dims, dims + 2 * rank - 1)};
}

// The space tensor's view of a combination (datamove.plans.views._space_batch_views' space view).
View space_view(size_t rank, int64_t batch, const int64_t* block, const Piece* const* combo) {
    int64_t start[kMaxRank];
    Dim dims[2 * kMaxRank];
    start[0] = 0, dims[0] = Dim{0, batch, 1};
    for (size_t i = 1; i < rank; ++i) {
        const Piece& piece = *combo[i - 1];
        start[i] = piece.offset;
        dims[2 * i - 1] = Dim{(int64_t)i, piece.d_count, block[i]};
        dims[2 * i] = Dim{(int64_t)i, piece.b_count, 1};
    }
    return View{std::vector<int64_t>(start, start + rank), std::vector<Dim>(dims, dims + 2 * rank - 1)};
}

// What both space ops share: the call's rank, the batch, the steps of the block offsets along the batch
// axis (datamove.plans.views._batch_steps), the pieces of the kept region per axis, the region itself.
struct SpaceCall {
    size_t rank;
    int64_t batch;
    const int64_t* block;
    int64_t steps[kMaxRank];
    std::vector<Pieces> region_pieces;  // (on the heap: a thread may have a stack of 32 KiB, Python's least)
    const Pieces* region[kMaxRank];  // &region_pieces[k], as each_combo takes them
    int64_t lo[kMaxRank], hi[kMaxRank];  // the region [lo, hi) of axis i at [i - 1]
};

// datamove.plans.views._windows' window axis, or 0 where the op has no windows; `counts` the whole blocks per
// axis (at [i - 1]). Sets pieces_out to the choices of the windows' combinations: the region's pieces but
// on the window axis, its whole blocks (in *whole).
size_t window_axis(const SpaceCall& c, const int64_t* counts, const Pieces** pieces_out, Pieces* whole) {
    size_t axis = 0;
    for (size_t i = 1; i < c.rank; ++i)
        if (c.block[i] > 1) axis = i;
    if (axis == 0 || c.batch == 0) return 0;
    for (size_t i = axis + 1; i < c.rank; ++i)
        if (c.lo[i - 1] != 0 || c.hi[i - 1] != counts[i - 1]) return 0;
    const int64_t lo = c.lo[axis - 1], hi = c.hi[axis - 1];
    if (counts[axis - 1] == 0 || hi <= lo) return 0;
    for (size_t i = 1; i < c.rank; ++i) pieces_out[i - 1] = c.region[i - 1];
    whole->n = 0;
    whole->push(Piece{0, counts[axis - 1], 0, c.block[axis], sub(0, lo)});
    pieces_out[axis - 1] = whole;
    return axis;
}

bool space_call(const Call& call, int64_t batch, SpaceCall* c) {
    const size_t rank = call.out_shape.size();
    if (rank < 1 || rank > kMaxRank || call.in_shape.size() != rank || call.block.size() != rank ||
        call.begin.size() != rank || call.end.size() != rank)
        return false;
    for (size_t i = 1; i < rank; ++i)
        if (call.block[i] < 1) return false;
    c->rank = rank, c->batch = batch, c->block = call.block.data();
    c->region_pieces.resize(rank);
    int64_t inner = batch;
    for (size_t i = rank - 1; i >= 1; --i) c->steps[i - 1] = inner, inner = mul(inner, call.block[i]);
    return true;
}

void set_source(const Call& call, Plan* plan) {
    plan->in_shape = call.in_shape, plan->out_shape = call.out_shape;
    plan->source = call.op;
    plan->block = call.block, plan->begin = call.begin, plan->end = call.end;
}

// datamove.plans.views.batch_to_space.
bool batch_to_space(const Call& call, Plan* plan) {
    SpaceCall c;
    if (!space_call(call, call.out_shape.empty() ? 0 : call.out_shape[0], &c)) return false;
    const size_t axes = c.rank - 1;
    for (size_t i = 1; i < c.rank; ++i) {
        c.lo[i - 1] = call.begin[i], c.hi[i - 1] = add(call.begin[i], call.out_shape[i]);
        c.region_pieces[i - 1] = pieces(c.lo[i - 1], c.hi[i - 1], call.block[i]);
        c.region[i - 1] = &c.region_pieces[i - 1];
    }
    const Pieces* window_pieces[kMaxRank];
    Pieces window_whole;
    const size_t axis = window_axis(c, call.in_shape.data() + 1, window_pieces, &window_whole);
    const int64_t ncopies = combos(c.region, axes, c.batch);
    const int64_t nwindows = axis ? combos(window_pieces, axes, c.batch) : 0;
    if (ncopies + nwindows > kMaxViews) return false;

    set_source(call, plan);
    const Piece* combo[kMaxRank];
    plan->copies.reserve((size_t)ncopies);
    each_combo(c.region, axes, c.batch, combo, [&] {
        plan->copies.emplace_back(batch_view(c.rank, c.batch, c.steps, combo), space_view(c.rank, c.batch, c.block, combo));
    });
    if (axis) {
        plan->windows.reserve((size_t)nwindows);
        const int64_t lo = c.lo[axis - 1], hi = c.hi[axis - 1], trailing = 2 * (int64_t)(c.rank - 1 - axis);
        each_combo(window_pieces, axes, c.batch, combo, [&] {
            plan->windows.push_back(Window{batch_view(c.rank, c.batch, c.steps, combo),
                                           space_view(c.rank, c.batch, c.block, combo), lo, hi, 1, trailing});
        });
    }
    return true;
}

// datamove.plans.views.space_to_batch.
bool space_to_batch(const Call& call, Plan* plan) {
    SpaceCall c;
    if (!space_call(call, call.in_shape.empty() ? 0 : call.in_shape[0], &c)) return false;
    const size_t rank = c.rank, axes = rank - 1;
    for (size_t i = 1; i < rank; ++i) {
        c.lo[i - 1] = call.begin[i], c.hi[i - 1] = add(call.begin[i], call.in_shape[i]);
        c.region_pieces[i - 1] = pieces(c.lo[i - 1], c.hi[i - 1], call.block[i]);
        c.region[i - 1] = &c.region_pieces[i - 1];
    }
    // The padding: a slab per axis where that axis lies outside the region, those before inside, those
    // after anywhere (their whole length, at [i - 1]).
    std::vector<Pieces> whole(rank), outside(rank);  // (on the heap, as SpaceCall's pieces)
    for (size_t i = 1; i < rank; ++i) {
        const int64_t full_length = mul(call.out_shape[i], call.block[i]);
        whole[i - 1] = pieces(0, full_length, call.block[i]);
        outside[i - 1] = pieces(0, c.lo[i - 1], call.block[i]);
        outside[i - 1].append(pieces(c.hi[i - 1], full_length, call.block[i]));
    }
    const Pieces* window_pieces[kMaxRank];
    Pieces window_whole;
    const size_t axis = window_axis(c, call.out_shape.data() + 1, window_pieces, &window_whole);

    // Count before making anything.
    const int64_t ncopies = combos(c.region, axes, c.batch);
    int64_t nfills = 0, nwindow_fills = 0;
    int64_t fills_of[kMaxRank];
    for (size_t a = 1; a < rank; ++a) {
        int64_t n = c.batch == 0 ? 0 : 1;
        for (size_t i = 1; i < a; ++i) n = times(n, c.region_pieces[i - 1].nonempty());
        n = times(n, outside[a - 1].nonempty());
        for (size_t j = a + 1; j < rank; ++j) n = times(n, whole[j - 1].nonempty());
        fills_of[a] = n;
        nfills = times(1, nfills + n);
    }
    const int64_t nwindows = axis ? combos(window_pieces, axes, c.batch) : 0;
    if (nwindows > 0)
        for (size_t a = 1; a < rank; ++a)
            if (a != axis) nwindow_fills = times(1, nwindow_fills + fills_of[a]);
    if (ncopies + nfills + nwindows + nwindow_fills > kMaxViews) return false;

    set_source(call, plan);
    const Piece* combo[kMaxRank];
    plan->copies.reserve((size_t)ncopies);
    each_combo(c.region, axes, c.batch, combo, [&] {
        plan->copies.emplace_back(space_view(rank, c.batch, c.block, combo), batch_view(rank, c.batch, c.steps, combo));
    });
    plan->fills.reserve((size_t)nfills);
    plan->window_fills.reserve((size_t)nwindow_fills);
    const Pieces* choices[kMaxRank];
    for (size_t a = 1; a < rank; ++a) {
        if (fills_of[a] == 0) continue;  // (each_combo would find none)
        for (size_t i = 1; i < rank; ++i)
            choices[i - 1] = i < a ? c.region[i - 1] : i == a ? &outside[i - 1] : &whole[i - 1];
        each_combo(choices, axes, c.batch, combo, [&] {
            plan->fills.push_back(batch_view(rank, c.batch, c.steps, combo));
            if (nwindows > 0 && a != axis) plan->window_fills.push_back(plan->fills.back());
        });
    }
    if (nwindows > 0) {
        plan->windows.reserve((size_t)nwindows);
        const int64_t lo = c.lo[axis - 1], hi = c.hi[axis - 1], trailing = 2 * (int64_t)(rank - 1 - axis);
        each_combo(window_pieces, axes, c.batch, combo, [&] {
            plan->windows.push_back(Window{space_view(rank, c.batch, c.block, combo),
                                           batch_view(rank, c.batch, c.steps, combo), lo, hi, 0, trailing});
        });
    }
    return true;
}

// datamove.plans.views._depth_views and the two depth ops: the space tensor (SpaceToDepth's input, DepthToSpace's
// output) split D_i -> (q_i, b_i), the depth axis (b_1, ..., b_K, c) for blocks_first, (c, b_1, ..., b_K)
// for depth_first; one copy, none where the space tensor is empty.
bool depth_op(const Call& call, Plan* plan) {
    const bool s2d = call.op == SPACE_TO_DEPTH;
    const std::vector<int64_t>& space = s2d ? call.in_shape : call.out_shape;
    const std::vector<int64_t>& depth = s2d ? call.out_shape : call.in_shape;
    const size_t rank = space.size();
    if (rank < 2 || depth.size() != rank || call.block_size < 1 || (call.mode != BLOCKS_FIRST && call.mode != DEPTH_FIRST))
        return false;
    plan->in_shape = call.in_shape, plan->out_shape = call.out_shape;
    plan->source = -1;
    for (size_t i = 0; i < rank; ++i)
        if (space[i] == 0) return true;
    const size_t spatial = rank - 2;
    const int64_t channels = space[1], size = call.block_size;
    // The depth axis's steps: the channel's (1 for blocks_first, block_size ** spatial for depth_first), and
    // block offset b_k's, block_size ** (spatial - 1 - k), times the channels for blocks_first.
    int64_t power = 1;
    for (size_t k = 0; k < spatial; ++k) power = mul(power, size);
    const int64_t channel_step = call.mode == BLOCKS_FIRST ? 1 : power;
    int64_t block_step = call.mode == BLOCKS_FIRST ? channels : 1;  // b_K's; b_k's from it, last to first

    View sv, dv;
    sv.start.assign(rank, 0), dv.start.assign(rank, 0);
    sv.dims.reserve(2 * rank - 1), dv.dims.reserve(2 * rank - 1);
    sv.dims.push_back(Dim{0, space[0], 1}), dv.dims.push_back(Dim{0, space[0], 1});
    if (call.mode == DEPTH_FIRST) sv.dims.push_back(Dim{1, channels, 1}), dv.dims.push_back(Dim{1, channels, channel_step});
    const size_t blocks_at = dv.dims.size();
    for (size_t k = 0; k < spatial; ++k) sv.dims.push_back(Dim{(int64_t)(2 + k), size, 1}), dv.dims.push_back(Dim{1, size, 0});
    for (size_t k = spatial; k-- > 0;) dv.dims[blocks_at + k].step = block_step, block_step = mul(block_step, size);
    if (call.mode == BLOCKS_FIRST) sv.dims.push_back(Dim{1, channels, 1}), dv.dims.push_back(Dim{1, channels, channel_step});
    for (size_t k = 0; k < spatial; ++k) {
        sv.dims.push_back(Dim{(int64_t)(2 + k), depth[2 + k], size});
        dv.dims.push_back(Dim{(int64_t)(2 + k), depth[2 + k], 1});
    }
    plan->copies.reserve(1);
    if (s2d)
        plan->copies.emplace_back(std::move(sv), std::move(dv));
    else
        plan->copies.emplace_back(std::move(dv), std::move(sv));
    return true;
}

}  // namespace

bool plan_views(const Call& call, Plan* plan) {
    switch (call.op) {
        case BATCH_TO_SPACE:
            return batch_to_space(call, plan);
        case SPACE_TO_BATCH:
            return space_to_batch(call, plan);
        case SPACE_TO_DEPTH:
        case DEPTH_TO_SPACE:
            return depth_op(call, plan);
        default:
            return false;
    }
}

}  // namespace dm::planner

// Calls in one C call: repeated calls, from the table behind _native.repeated, a call's first call of a
// layout into a new array or an out= (_native.first: validated by datamove.ops, then allocated, planned,
// lowered and run here, its program kept for the repeats), and handles that run a kept call from an input
// given by address (_native.handle/at: PyTorch CPU tensors). module.cpp lists the functions.
//
// A NumPy call that repeats goes through Python once per layout: datamove.ops validates it, its recipe
// (datamove.dispatch.recipes) plans it, and engines.native.engine.Planned lowers and runs its program, then hands that
// program here (`remember`). The next call of the same op, parameters, engine, input layout and dtype (the
// Python recipe's key), into an output of the same alignment, strides and stream mode (Planned's program
// key), is found here by `repeated` and run without a Python frame between datamove.ops and the copy.
// Anything else (another type, a parameter given in another form, a layout not remembered, an out= that
// overlaps the input or is read-only) is a miss: None, nothing written, and the Python path goes on,
// which validates and raises as before. A miss leaves no Python error set.
//
// The table is touched with the GIL held only; a program in use is held by the run (shared_ptr), so a
// table cleared by another thread during a run (the GIL released) frees nothing under it.

namespace {

// ---- the settings a repeated call reads at each call, where Python keeps them (repeat_setup) ----
// NumPy's PyArray_NewFromDescr (its C API's slot 94, unchanged since NumPy 1.0): a new result allocated
// without np.empty's argument parsing. Steals a reference to the dtype.
using NewFromDescr = PyObject* (*)(PyTypeObject*, PyObject*, int, const Py_ssize_t*, const Py_ssize_t*, void*, int,
                                   PyObject*);
constexpr int kNewFromDescrSlot = 94;

struct Settings {
    PyObject* ndarray = nullptr;  // numpy.ndarray: exact instances only
    bool fields_read = false;     // whether arrays' fields read as NumPy lays them out (checked by repeat_setup)
    PyObject* empty = nullptr;    // numpy.empty: a result it would allocate is allocated by new_from_descr
    NewFromDescr new_from_descr = nullptr;  // (null: np.empty is called; repeat_setup checked it)
    PyObject* threads = nullptr;  // datamove.engines.native.threads.__dict__: "_threads" (set_num_threads')
    PyObject* engine = nullptr;   // datamove.engines.native.engine.__dict__: STREAM_BYTES, REGISTER_STREAM_BYTES, RUN_MODES
    PyObject *s_dtype, *s_shape, *s_threads, *s_get_num_threads, *s_stream_bytes, *s_register_bytes, *s_run_modes, *s_loaded, *s_core_plans;
    // the names a call's strings are held to (interned: a literal in the caller's code is the same object)
    PyObject *s_space_to_depth, *s_depth_to_space, *s_batch_to_space, *s_space_to_batch;
    PyObject *s_blocks_first, *s_depth_first, *s_auto, *s_native, *s_channels_first;
} settings;

// ---- NumPy's array object, read without NumPy's headers (the core builds without them) ----
// An exact numpy.ndarray begins as NumPy's C API lays it out (PyArrayObject_fields in ndarraytypes.h). The
// API's macros (PyArray_DATA, PyArray_DIMS, PyArray_FLAGS...) compile to these very reads in every extension
// built against NumPy since 1.7, which is what keeps the layout fixed; repeat_setup checks it against the
// buffer protocol's view of probe arrays, and where it does not hold every repeat misses. A buffer view
// (PyObject_GetBuffer and its release) cost about 0.1 us of a 4 KiB repeat's 1.7.
struct ArrayFields {
    PyObject_HEAD
    char* data;
    int nd;
    Py_ssize_t* dimensions;
    Py_ssize_t* strides;
    PyObject* base;
    PyObject* descr;  // the dtype object
    int flags;
};
constexpr int kWriteable = 0x0400;  // NPY_ARRAY_WRITEABLE
// NumPy's warn-on-write flag (NPY_ARRAY_WARN_ON_WRITE, 1 << 31: a view NumPy deprecates writing to): the
// Python path's, which warns
constexpr unsigned kWarnOnWrite = 1u << 31;

const ArrayFields* fields(PyObject* array) { return reinterpret_cast<const ArrayFields*>(array); }

// A view of an exact ndarray from its fields, as PyObject_GetBuffer(PyBUF_STRIDES) gives it, with no
// release needed (obj null); itemsize and len are set once the dtype's item size is known (set_itemsize).
void view_from_fields(PyObject* array, Py_buffer* view) {
    const ArrayFields* a = fields(array);
    *view = Py_buffer{};
    view->buf = a->data;
    view->ndim = a->nd;
    view->shape = a->dimensions;
    view->strides = a->strides;
    view->readonly = (a->flags & kWriteable) == 0 || (static_cast<unsigned>(a->flags) & kWarnOnWrite) != 0;
}

void set_itemsize(Py_buffer* view, Py_ssize_t itemsize) {
    Py_ssize_t len = itemsize;
    for (int k = 0; k < view->ndim; ++k) len *= view->shape[k];
    view->itemsize = itemsize, view->len = len;
}

bool same_str(PyObject* given, PyObject* name) {
    if (given == name) return true;
    if (!PyUnicode_CheckExact(given)) return false;
    const int cmp = PyUnicode_Compare(given, name);  // (never fails on two str)
    return cmp == 0;
}

// ---- the key: the Python recipe's (op, parameters, engine, shape, strides, dtype) as int64 words ----
constexpr int kMaxRank = 16;
constexpr int kKeyWords = 8 + 5 * kMaxRank;

struct Key {
    std::array<int64_t, kKeyWords> words;
    int n = 0;
    bool push(int64_t w) {
        if (n == kKeyWords) return false;
        words[n++] = w;
        return true;
    }
    bool operator==(const Key& other) const { return n == other.n && std::equal(words.begin(), words.begin() + n, other.words.begin()); }
};

struct KeyHash {
    size_t operator()(const Key& key) const {
        uint64_t h = 1469598103934665603ull;  // FNV-1a over the words
        for (int k = 0; k < key.n; ++k) h = (h ^ (uint64_t)key.words[k]) * 1099511628211ull;
        return (size_t)h;
    }
};

// An exact int (not bool, not a NumPy integer: those are the Python path's) as an int64.
bool exact_int(PyObject* value, int64_t* out) {
    if (!PyLong_CheckExact(value)) return false;
    int overflow = 0;
    *out = PyLong_AsLongLongAndOverflow(value, &overflow);
    return overflow == 0 && !(*out == -1 && PyErr_Occurred());
}

// A list or tuple of exact ints, pushed after its length (and kept in `values`).
bool push_ints(PyObject* seq, Key* key, std::vector<int64_t>* values) {
    if (!PyList_CheckExact(seq) && !PyTuple_CheckExact(seq)) return false;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > kMaxRank || !key->push(n)) return false;
    PyObject** items = PySequence_Fast_ITEMS(seq);
    values->clear();
    for (Py_ssize_t k = 0; k < n; ++k) {
        int64_t v;
        if (!exact_int(items[k], &v) || !key->push(v)) return false;
        values->push_back(v);
    }
    return true;
}

// A call's op and parameters, as datamove.ops passes them: (op, mode, block_size, data_format) for the
// depth ops (channels first only: channels last is a view change the Python path makes), (op, block_shape,
// begin, end) for the space ops; then the engine ("auto" or "native"). The planner's call from them too
// (plan.hpp's ids: the key's words).
bool push_call(PyObject* op, PyObject* a, PyObject* b, PyObject* c, PyObject* engine, Key* key,
               dm::planner::Call* call) {
    using namespace dm::planner;
    if (same_str(op, settings.s_space_to_depth)) call->op = SPACE_TO_DEPTH;
    else if (same_str(op, settings.s_depth_to_space)) call->op = DEPTH_TO_SPACE;
    else if (same_str(op, settings.s_batch_to_space)) call->op = BATCH_TO_SPACE;
    else if (same_str(op, settings.s_space_to_batch)) call->op = SPACE_TO_BATCH;
    else return false;
    int64_t engine_id;
    if (same_str(engine, settings.s_auto)) engine_id = 0;
    else if (same_str(engine, settings.s_native)) engine_id = 1;
    else return false;
    key->push(call->op), key->push(engine_id);
    if (call->op == SPACE_TO_DEPTH || call->op == DEPTH_TO_SPACE) {
        if (same_str(a, settings.s_blocks_first)) call->mode = BLOCKS_FIRST;
        else if (same_str(a, settings.s_depth_first)) call->mode = DEPTH_FIRST;
        else return false;
        int64_t block;
        if (!same_str(c, settings.s_channels_first) || !exact_int(b, &block)) return false;
        call->block_size = block;
        return key->push(call->mode) && key->push(block);
    }
    return push_ints(a, key, &call->block) && push_ints(b, key, &call->begin) && push_ints(c, key, &call->end);
}

// An array's layout (rank, shape, strides in bytes) and its dtype object's identity (held by the entry).
bool push_layout(const Py_buffer& view, PyObject* dtype, Key* key) {
    if (view.ndim > kMaxRank || !key->push(view.ndim)) return false;
    for (int k = 0; k < view.ndim; ++k)
        if (!key->push(view.shape[k]) || !key->push(view.strides[k])) return false;
    return key->push(reinterpret_cast<intptr_t>(dtype));
}

// ---- the table ----
// A program parsed once for the layouts it was kept for (parse() checks it against their extents, which a
// key's layouts share) and run mode: its steps, their cost, and whether its stores go around the cache
// (streams(), which reads out's address modulo 64, also the key's). Its tables too (UNITS steps given with
// theirs, or steps merged into one of units: small images), made as run_program makes them at each run;
// they depend on the program alone (offsets from the arrays' lowest addresses), and the merged one is kept
// at its own size (a thread's table is 16 KiB). BatchToSpace with crops of [4, 4, 8, 8] float32 into out=:
// 4.7 us a repeat, 37% of it merge_units, when each repeat went through run_program. `steps` empty: a
// program run() refuses (with its error), or memory short for its tables.
struct Prepared {
    std::vector<Step> steps;
    int64_t total = 0;
    bool stream = false;
    int run_mode = 0;
    Table* merged = nullptr;  // steps[0]'s, where steps were merged (compact_table)
    bool given = false;       // the steps' given tables made (given_tables): freed with it
    Prepared() = default;
    Prepared(const Prepared&) = delete;
    Prepared& operator=(const Prepared&) = delete;
    ~Prepared() {
        free_chosen(steps.data(), (int)steps.size());
        if (given) free_given_tables(steps.data(), (int)steps.size());
        if (merged != nullptr) free_compact_table(merged);
    }
};

struct Program {
    int src_align, dst_align, stream;
    std::vector<int64_t> out_strides;  // out's strides in bytes (a new result's: C order)
    std::shared_ptr<const std::vector<int64_t>> code;
    std::shared_ptr<const Prepared> prepared;  // (made at its first repeat)
};

std::shared_ptr<const Prepared> prepare(const std::vector<int64_t>& code, const Extent& src, const Extent& dst,
                                        int run_mode) {
    auto prepared = std::make_shared<Prepared>();
    prepared->run_mode = run_mode;
    const int64_t* p = code.data();
    const int64_t n = (int64_t)code.size();
    if (n < 1 || p[0] < 1 || p[0] > kMaxSteps) return prepared;
    std::vector<Step> steps((size_t)p[0]);
    int nsteps = (int)p[0];
    int64_t total = 0;
    if (!parse(p, n, steps.data(), nsteps, &total, src.bytes, dst.bytes)) return prepared;  // (run() says why)
    if (!given_tables(steps.data(), nsteps)) {
        free_given_tables(steps.data(), nsteps);
        return prepared;
    }
    Table* table = nullptr;
    if (merge_units(steps.data(), &nsteps, &table)) {  // (never with given tables: merge_units takes no UNITS step)
        prepared->merged = compact_table(table);
        free_table(table);
        if (prepared->merged == nullptr) return prepared;  // (run_program: its own table, or no memory)
        steps[0].table = prepared->merged;
    }
    steps.resize((size_t)nsteps);
    prepared->stream = run_mode != 0 && DM_HAVE_STREAM && streams(steps.data(), nsteps, dst.low, run_mode == 1);
    choose(steps.data(), nsteps, prepared->stream, dst.low, true);  // (its tables kept with it: no fill at a repeat)
    prepared->total = total;
    prepared->steps = std::move(steps);
    prepared->given = true;
    return prepared;
}

struct Entry {
    PyObject* dtype = nullptr;      // the input's (and so the output's) dtype, held
    PyObject* out_shape = nullptr;  // a tuple, what `allocate` takes
    PyObject* allocate = nullptr;   // the recipe's allocator of a new result: np.empty or outputs.allocate
    std::vector<Py_ssize_t> out_dims;
    int64_t out_bytes = 0;
    Py_ssize_t itemsize = 0;
    bool direct = false;  // allocate is np.empty: its results made by settings.new_from_descr
    dm::planner::Call call;  // its op and parameters: the planner's, for an output of another alignment
    std::vector<Program> programs;
    Entry() = default;
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;
    ~Entry() { Py_XDECREF(dtype), Py_XDECREF(out_shape), Py_XDECREF(allocate); }
};

// Layouts remembered (the recipes' bound, datamove.dispatch.recipes.RECIPES), and programs one of them keeps
// (engines.native.engine.Planned.MAX_PROGRAMS): past either, the table or the entry starts again empty.
constexpr size_t kMaxEntries = 1024;
// Runs of a cost below this many bytes keep the GIL (as NumPy's own small copies do): releasing and taking
// it back cost about 0.1 us of a 4 KiB SpaceToDepth's 1.2 us in the core; they run on the caller's thread
// alone whatever the thread count (run_job's parts: one below kBytesPerPart).
constexpr int64_t kHeldBytes = 64 << 10;
constexpr size_t kMaxPrograms = 32;

// (shared: a repeat holds its entry while np.empty or outputs.allocate runs, during which another thread
// may empty the table)
std::unordered_map<Key, std::shared_ptr<Entry>, KeyHash>* table = nullptr;

// The stream mode and run mode of an output of `bytes`, as engines.native.engine.Planned reads them at each call
// (its module's STREAM_BYTES, REGISTER_STREAM_BYTES and RUN_MODES: a test may set them); false where one
// is not what it should be.
bool stream_of(int64_t bytes, int* stream, int* run_mode) {
    PyObject* streamed = PyDict_GetItemWithError(settings.engine, settings.s_stream_bytes);
    PyObject* registers = PyDict_GetItemWithError(settings.engine, settings.s_register_bytes);
    PyObject* modes = PyDict_GetItemWithError(settings.engine, settings.s_run_modes);
    if (PyErr_Occurred()) PyErr_Clear();
    int64_t stream_from, register_from;
    if (streamed == nullptr || registers == nullptr || modes == nullptr || !exact_int(streamed, &stream_from) ||
        !exact_int(registers, &register_from) || !PyTuple_CheckExact(modes) || PyTuple_GET_SIZE(modes) != 3)
        return false;
    *stream = bytes >= stream_from ? 2 : bytes >= register_from ? 1 : 0;
    int64_t mode;
    if (!exact_int(PyTuple_GET_ITEM(modes, *stream), &mode)) return false;
    *run_mode = (int)mode;
    return true;
}

// The thread count set_num_threads set (datamove.engines.native.threads._threads; asked of get_num_threads, which sets it,
// where no call has yet); 0 where it cannot be read.
int threads_now() {
    PyObject* n = PyDict_GetItemWithError(settings.threads, settings.s_threads);
    if (n == nullptr) PyErr_Clear();
    int64_t value;
    if (n == Py_None) {
        PyObject* ask = PyDict_GetItemWithError(settings.threads, settings.s_get_num_threads);
        PyObject* asked = ask != nullptr ? PyObject_CallNoArgs(ask) : nullptr;
        const bool read = asked != nullptr && exact_int(asked, &value) && value >= 1;
        Py_XDECREF(asked);
        if (PyErr_Occurred()) PyErr_Clear();
        return read ? (int)std::min<int64_t>(value, kMaxThreads) : 0;
    }
    return n != nullptr && exact_int(n, &value) && value >= 1 ? (int)std::min<int64_t>(value, kMaxThreads) : 0;
}

// Whether this module is the core engines.native.engine runs (a test may put another level's, or a recording, there).
bool loaded(PyObject* self) {
    PyObject* core = PyDict_GetItemWithError(settings.engine, settings.s_loaded);
    if (core == nullptr) PyErr_Clear();
    return core == self;
}

int align_of(const Py_buffer& view) { return (int)(reinterpret_cast<uintptr_t>(extent_of(view).low) & 63); }

bool same_strides(const std::vector<int64_t>& strides, const Py_buffer& view) {
    if ((int)strides.size() != view.ndim) return false;
    for (int k = 0; k < view.ndim; ++k)
        if (strides[k] != view.strides[k]) return false;
    return true;
}

// `code` kept for these arrays' alignments, out's strides and a stream mode (an entry's programs past
// kMaxPrograms: it starts again empty).
Program* keep(Entry& entry, const Py_buffer& src, const Py_buffer& dst, int stream,
              std::shared_ptr<const std::vector<int64_t>> code) {
    if (entry.programs.size() >= kMaxPrograms) entry.programs.clear();
    entry.programs.push_back(Program{align_of(src), align_of(dst), stream,
                                     std::vector<int64_t>(dst.strides, dst.strides + dst.ndim), std::move(code), nullptr});
    return &entry.programs.back();
}

// The program an entry keeps for these arrays' alignments, out's strides and a stream mode (null: none).
Program* kept_for(Entry& entry, const Py_buffer& src, const Py_buffer& dst, int stream) {
    const int src_align = align_of(src), dst_align = align_of(dst);
    for (Program& known : entry.programs)
        if (known.src_align == src_align && known.dst_align == dst_align && known.stream == stream &&
            same_strides(known.out_strides, dst))
            return &known;
    return nullptr;
}

// A buffer's view of an object, or false with no error set.
bool view_of(PyObject* array, Py_buffer* view, int flags) {
    if (PyObject_GetBuffer(array, view, flags) == 0) return true;
    PyErr_Clear();
    return false;
}

// The dtype object of an exact ndarray (a new reference), or null with no error set.
PyObject* dtype_of(PyObject* array) {
    PyObject* dtype = PyObject_GetAttr(array, settings.s_dtype);
    if (dtype == nullptr) PyErr_Clear();
    return dtype;
}

// The program of a kept call at an alignment or stream mode not kept yet (a new result's address varies
// from call to call): planned and lowered here as engines.native.engine.program_of would
// (the core's planner, where engines.native.engine.CORE_PLANS says so), and kept; null where the planner takes none.
struct Held;
Program* planned(Entry& entry, const Held& held, int stream);

struct Held {  // the views of a call's arrays, read from their fields (view_from_fields: nothing to release)
    Py_buffer src{}, dst{};
};

Program* planned(Entry& entry, const Held& held, int stream) {
    PyObject* plans = PyDict_GetItemWithError(settings.engine, settings.s_core_plans);
    if (plans != Py_True) {
        if (plans == nullptr) PyErr_Clear();
        return nullptr;
    }
    dm::planner::Layout src, dst;
    dm::planner::layout_from(held.src, &src), dm::planner::layout_from(held.dst, &dst);
    std::vector<int64_t> program;
    if (!dm::planner::program_of(&entry.call, src, dst, stream, &program)) return nullptr;
    return keep(entry, held.src, held.dst, stream, std::make_shared<const std::vector<int64_t>>(std::move(program)));
}

// A new C-contiguous result for an entry: by NumPy's own allocator where np.empty would make it (the
// same array, without parsing np.empty's arguments), else by the recipe's; null with the error set.
PyObject* allocate(const Entry& entry) {
    if (entry.direct) {
        Py_INCREF(entry.dtype);  // (stolen)
        return settings.new_from_descr(reinterpret_cast<PyTypeObject*>(settings.ndarray), entry.dtype,
                                       (int)entry.out_dims.size(), entry.out_dims.data(), nullptr, nullptr, 0, nullptr);
    }
    PyObject* shape_dtype[2] = {entry.out_shape, entry.dtype};
    return PyObject_Vectorcall(entry.allocate, shape_dtype, 2, nullptr);
}

// Whether two arrays' views (item sizes set) share no byte: an out= a repeat or a first call writes while
// reading data.
bool apart(const Py_buffer& a_view, const Py_buffer& b_view) {
    const Extent a = extent_of(a_view), b = extent_of(b_view);
    return a.low + a.bytes <= b.low || b.low + b.bytes <= a.low;
}

// A kept entry's call from held.src (its view set: data's, or a handle's layout at an address) into `out` (an
// exact ndarray, or None: a new result, allocate()'d): the result, None for a miss (nothing written, no error
// set), or null with the error set (np.empty's MemoryError, a run that failed).
PyObject* repeat_into(const std::shared_ptr<Entry>& held_entry, Held& held, PyObject* out) {
    Entry& entry = *held_entry;  // (held by the caller: the table may be emptied while this runs)
    set_itemsize(&held.src, entry.itemsize);
    int stream, run_mode;
    const int threads = threads_now();
    if (threads == 0 || !stream_of(entry.out_bytes, &stream, &run_mode)) Py_RETURN_NONE;
    PyObject* result;
    if (out == Py_None) {
        result = allocate(entry);
        if (result == nullptr) return nullptr;  // (np.empty's MemoryError: the Python path would raise it too)
    } else {
        if (fields(out)->descr != entry.dtype) Py_RETURN_NONE;
        result = Py_NewRef(out);
    }
    view_from_fields(result, &held.dst);
    set_itemsize(&held.dst, entry.itemsize);
    bool fits = !held.dst.readonly && held.dst.ndim == (int)entry.out_dims.size();
    for (int k = 0; fits && k < held.dst.ndim; ++k) fits = held.dst.shape[k] == entry.out_dims[k];
    // out= sharing no byte with data (else the Python path copies data first)
    if (fits && out != Py_None) fits = apart(held.src, held.dst);
    Program* program = fits ? kept_for(entry, held.src, held.dst, stream) : nullptr;
    if (program == nullptr && fits) {
        // out='s strides must be those of a program kept: the Python path's checks (an out whose elements
        // overlap is refused there) have passed for them; only the alignment or the stream mode is new
        bool known = false;
        for (const Program& kept : entry.programs) known = known || same_strides(kept.out_strides, held.dst);
        if (known) program = planned(entry, held, stream);
    }
    if (program == nullptr) {
        Py_DECREF(result);
        Py_RETURN_NONE;
    }
    const Extent src = extent_of(held.src), dst = extent_of(held.dst);
    if (program->prepared == nullptr || program->prepared->run_mode != run_mode)
        program->prepared = prepare(*program->code, src, dst, run_mode);
    // (held by this run: the table may be emptied while it runs without the GIL)
    const std::shared_ptr<const Prepared> prepared = program->prepared;
    const std::shared_ptr<const std::vector<int64_t>> code = program->code;
    if (prepared->steps.empty()) {  // a program run() refuses (with its error), or memory short for its tables
        PyObject* ran = run_program(code->data(), (Py_ssize_t)code->size(), held.src, held.dst, threads, run_mode);
        if (ran == nullptr) return Py_DECREF(result), nullptr;
        Py_DECREF(ran);
        return result;
    }
    Job job{0, prepared->steps.data(), (int)prepared->steps.size(), prepared->total, src.low, dst.low, prepared->stream, 1};
    if (prepared->total < kHeldBytes) {  // (a few microseconds at most, on this thread alone: the GIL kept)
        run_job(job, 1);
        return result;
    }
    Py_BEGIN_ALLOW_THREADS run_job(job, threads);
    Py_END_ALLOW_THREADS return result;
}

// repeated(op, data, a, b, c, out, engine) -> the result, or None (a miss): see the top of this file.
PyObject* py_repeated(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "datamove._native.repeated takes 7 arguments");
        return nullptr;
    }
    PyObject *data = args[1], *out = args[5];
    if (table == nullptr || table->empty() || !settings.fields_read || (PyObject*)Py_TYPE(data) != settings.ndarray ||
        (out != Py_None && (PyObject*)Py_TYPE(out) != settings.ndarray) || !loaded(self))
        Py_RETURN_NONE;
    Key key;
    Held held;
    dm::planner::Call call;
    view_from_fields(data, &held.src);
    PyObject* dtype = fields(data)->descr;  // (borrowed: data holds it)
    if (!push_call(args[0], args[2], args[3], args[4], args[6], &key, &call) || !push_layout(held.src, dtype, &key))
        Py_RETURN_NONE;
    auto found = table->find(key);
    if (found == table->end()) Py_RETURN_NONE;
    const std::shared_ptr<Entry> entry = found->second;
    return repeat_into(entry, held, out);
}

// ---- handles: a kept call of arrays that are no ndarrays (PyTorch CPU tensors, by address) ----
// A handle holds a remembered call's entry and the input layout it was remembered for; at(handle, address)
// runs it from the input at that address into a new result, as repeated() would from an ndarray of that
// layout. datamove.dispatch.recipes makes one for a small CPU tensor's repeats: a tensor's data_ptr() is 0.2 us,
// its NumPy view (x.numpy()) 2 us of a 4 KiB call.
constexpr const char* kHandleName = "datamove._native.handle";

struct Handle {
    std::shared_ptr<Entry> entry;
    std::vector<Py_ssize_t> shape, strides;  // the input's, strides in bytes
};

void free_handle(PyObject* capsule) {
    delete static_cast<Handle*>(PyCapsule_GetPointer(capsule, kHandleName));
}

// handle(op, data, a, b, c, engine) -> the handle of a call remembered for data's layout (an exact ndarray's,
// its arguments as repeated() takes them), or None where none is.
PyObject* py_handle(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "datamove._native.handle takes 6 arguments");
        return nullptr;
    }
    PyObject* data = args[1];
    if (table == nullptr || !settings.fields_read || (PyObject*)Py_TYPE(data) != settings.ndarray || !loaded(self))
        Py_RETURN_NONE;
    Key key;
    Held held;
    dm::planner::Call call;
    view_from_fields(data, &held.src);
    if (!push_call(args[0], args[2], args[3], args[4], args[5], &key, &call) ||
        !push_layout(held.src, fields(data)->descr, &key))
        Py_RETURN_NONE;
    auto found = table->find(key);
    if (found == table->end()) Py_RETURN_NONE;
    auto* handle = new (std::nothrow) Handle{found->second, {held.src.shape, held.src.shape + held.src.ndim},
                                             {held.src.strides, held.src.strides + held.src.ndim}};
    if (handle == nullptr) return PyErr_NoMemory();
    PyObject* capsule = PyCapsule_New(handle, kHandleName, free_handle);
    if (capsule == nullptr) delete handle;
    return capsule;
}

// at(handle, address) -> a new result (an ndarray), or None (nothing made): the handle's call from an input
// of its layout at `address` (the address of its first item). The caller vouches for that input: a
// private path of datamove.dispatch.recipes, whose key fixes the tensor's layout and dtype.
PyObject* py_at(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "datamove._native.at takes 2 arguments");
        return nullptr;
    }
    auto* handle = static_cast<Handle*>(PyCapsule_GetPointer(args[0], kHandleName));
    if (handle == nullptr) return nullptr;  // (not a handle: its TypeError)
    void* address = PyLong_AsVoidPtr(args[1]);
    if (address == nullptr) {
        if (PyErr_Occurred()) return nullptr;
        Py_RETURN_NONE;  // (no input there)
    }
    if (!loaded(self)) Py_RETURN_NONE;
    Held held;
    held.src.buf = address;
    held.src.ndim = (int)handle->shape.size();
    held.src.shape = handle->shape.data();
    held.src.strides = handle->strides.data();
    held.src.readonly = 1;
    const std::shared_ptr<Entry> entry = handle->entry;  // (a handle freed meanwhile by another thread frees no entry)
    return repeat_into(entry, held, Py_None);
}

// The entry of a call's key, made where there is none (past kMaxEntries the table starts again empty) for
// results of `out_shape` (a tuple of dst's dims) made by `allocate`; null where the key's entry is for
// results of another shape. (Shared: first() holds it across its run, the GIL released, while another
// thread may empty the table.)
std::shared_ptr<Entry> entry_for(const Key& key, dm::planner::Call&& call, PyObject* dtype, PyObject* out_shape,
                                 PyObject* allocate, const Py_buffer& dst, Py_ssize_t itemsize) {
    auto found = table->find(key);
    if (found == table->end()) {
        if (table->size() >= kMaxEntries) table->clear();
        auto entry = std::make_shared<Entry>();
        entry->dtype = Py_NewRef(dtype);
        entry->out_shape = Py_NewRef(out_shape);
        entry->allocate = Py_NewRef(allocate);
        entry->direct = allocate == settings.empty && settings.new_from_descr != nullptr;
        entry->itemsize = itemsize;
        entry->out_dims.assign(dst.shape, dst.shape + dst.ndim);
        entry->out_bytes = dst.len;
        entry->call = std::move(call);
        found = table->emplace(key, std::move(entry)).first;
    }
    const Entry& entry = *found->second;
    const bool same = (int)entry.out_dims.size() == dst.ndim && std::equal(entry.out_dims.begin(), entry.out_dims.end(), dst.shape);
    return same ? found->second : nullptr;
}

// The bytes of an item of an array of `dtype` that the core may move (its buffer's item size), or 0 for
// items it may not: objects (references, counted), or none of no bytes. Read from the array's buffer view
// the first time a dtype object is met, then remembered (a dtype held, up to kKnownDtypes of them: NumPy's
// builtin dtypes are one object each): a buffer view's format string cost about 1 us of a first call.
constexpr size_t kKnownDtypes = 64;
std::vector<std::pair<PyObject*, Py_ssize_t>> known_dtypes;

Py_ssize_t item_bytes(PyObject* array, PyObject* dtype) {
    for (const auto& [known, bytes] : known_dtypes)
        if (known == dtype) return bytes;
    Py_buffer view;
    if (!view_of(array, &view, PyBUF_STRIDES | PyBUF_FORMAT)) return 0;
    const bool moves = view.itemsize > 0 && view.format != nullptr && std::strchr(view.format, 'O') == nullptr;
    const Py_ssize_t bytes = moves ? view.itemsize : 0;
    PyBuffer_Release(&view);
    if (known_dtypes.size() < kKnownDtypes) known_dtypes.emplace_back(Py_NewRef(dtype), bytes);
    return bytes;
}

// first(op, data, a, b, c, out_shape, allocate, engine[, out]) -> a new result (or out), or None: see
// module.cpp's entry.
PyObject* py_first(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
    if (nargs != 8 && nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "datamove._native.first takes 8 or 9 arguments");
        return nullptr;
    }
    using namespace dm::planner;
    PyObject *op = args[0], *data = args[1], *out_shape = args[5], *allocate = args[6], *engine = args[7];
    PyObject* into = nargs == 9 && args[8] != Py_None ? args[8] : nullptr;  // out= (validated by datamove.ops)
    if (table == nullptr || !settings.fields_read || (PyObject*)Py_TYPE(data) != settings.ndarray ||
        !PyTuple_CheckExact(out_shape) || PyTuple_GET_SIZE(out_shape) > kMaxRank ||
        (allocate == Py_None && settings.new_from_descr == nullptr) ||
        (into != nullptr && (PyObject*)Py_TYPE(into) != settings.ndarray))
        Py_RETURN_NONE;
    PyObject* plans = PyDict_GetItemWithError(settings.engine, settings.s_core_plans);
    if (plans != Py_True) {  // (engines.native.engine.CORE_PLANS off: the core plans nothing)
        if (plans == nullptr) PyErr_Clear();
        Py_RETURN_NONE;
    }
    // the call's key, as repeated() reads it (the parameters as given; depth ops channels first, as ops hands them)
    Key key;
    Call call;
    Held held;
    view_from_fields(data, &held.src);
    PyObject* dtype = fields(data)->descr;
    if (!push_call(op, args[2], args[3], args[4], engine, &key, &call) || !push_layout(held.src, dtype, &key))
        Py_RETURN_NONE;
    // a call kept already is one whose repeat repeated() did not take (a result at an alignment it could not
    // plan for, another core in engines.native.engine): its recipe is made now, in Python (ops: False). Not so for
    // an out= whose strides no program of the call was kept for (repeated() takes only those): it is planned
    // here and kept beside them.
    if (into == nullptr && table->find(key) != table->end()) Py_RETURN_FALSE;
    std::array<Py_ssize_t, kMaxRank> dims;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(out_shape); ++k) {
        int64_t d;
        if (!exact_int(PyTuple_GET_ITEM(out_shape, k), &d) || d < 0) Py_RETURN_NONE;
        dims[k] = (Py_ssize_t)d;
    }
    const Py_ssize_t itemsize = item_bytes(data, dtype);
    if (itemsize == 0) Py_RETURN_NONE;
    PyObject* result;
    if (into != nullptr) {  // out=, as datamove.ops checked it: this shape and dtype, writable, apart from data
        Py_buffer view;
        view_from_fields(into, &view);
        bool fits = fields(into)->descr == dtype && !view.readonly && view.ndim == (int)PyTuple_GET_SIZE(out_shape);
        for (int k = 0; fits && k < view.ndim; ++k) fits = view.shape[k] == dims[k];
        if (fits) {
            set_itemsize(&view, itemsize), set_itemsize(&held.src, itemsize);
            fits = apart(held.src, view);
        }
        if (!fits) Py_RETURN_NONE;
        result = Py_NewRef(into);
    } else if (allocate == Py_None) {  // as np.empty makes it
        Py_INCREF(dtype);  // (stolen)
        result = settings.new_from_descr(reinterpret_cast<PyTypeObject*>(settings.ndarray), dtype,
                                         (int)PyTuple_GET_SIZE(out_shape), dims.data(), nullptr, nullptr, 0, nullptr);
    } else {
        PyObject* shape_dtype[2] = {out_shape, dtype};
        result = PyObject_Vectorcall(allocate, shape_dtype, 2, nullptr);
    }
    if (result == nullptr) return nullptr;  // (a MemoryError, as the Python path's allocation would raise)
    if ((PyObject*)Py_TYPE(result) != settings.ndarray || fields(result)->descr != dtype) {
        Py_DECREF(result);
        Py_RETURN_NONE;
    }
    view_from_fields(result, &held.dst);
    set_itemsize(&held.src, itemsize), set_itemsize(&held.dst, itemsize);
    // (held across the run, the GIL released: another thread may empty the table meanwhile)
    const std::shared_ptr<Entry> entry =
        entry_for(key, std::move(call), dtype, out_shape, allocate == Py_None ? settings.empty : allocate, held.dst, itemsize);
    if (held.dst.len == 0) return result;  // (nothing to move: the entry alone, which says the call was made)
    int stream, run_mode;
    const int threads = threads_now();
    if (threads == 0 || !stream_of(held.dst.len, &stream, &run_mode)) return Py_DECREF(result), Py_NewRef(Py_None);
    Layout src, dst;
    layout_from(held.src, &src), layout_from(held.dst, &dst);
    auto program = std::make_shared<std::vector<int64_t>>();
    if (entry == nullptr || !program_of(&entry->call, src, dst, stream, program.get()))
        return Py_DECREF(result), Py_NewRef(Py_None);
    PyObject* ran = run_program(program->data(), (Py_ssize_t)program->size(), held.src, held.dst, threads, run_mode);
    if (ran == nullptr) return Py_DECREF(result), nullptr;
    Py_DECREF(ran);
    // kept for the call's repeats, as a kept recipe's programs are (remember): its second call is then
    // repeated's, with no recipe made in Python
    if (kept_for(*entry, held.src, held.dst, stream) == nullptr) keep(*entry, held.src, held.dst, stream, std::move(program));
    return result;
}

// remember(op, a, b, c, engine, data, out, program, stream, allocate): `program`, lowered for `stream`,
// has just run `data` into `out` for this call (validated, its recipe kept): keep it for the call's repeats.
PyObject* py_remember(PyObject*, PyObject* args) {
    PyObject *op, *a, *b, *c, *engine, *data, *out, *allocate;
    Py_buffer program;
    int stream;
    if (!PyArg_ParseTuple(args, "OOOOOOOy*iO", &op, &a, &b, &c, &engine, &data, &out, &program, &stream, &allocate))
        return nullptr;
    struct Release {
        Py_buffer* view;
        ~Release() { PyBuffer_Release(view); }
    } release{&program};
    if (table == nullptr || !settings.fields_read || (PyObject*)Py_TYPE(data) != settings.ndarray ||
        (PyObject*)Py_TYPE(out) != settings.ndarray || !PyCallable_Check(allocate) || program.len % 8 != 0)
        Py_RETURN_FALSE;
    Key key;
    Held held;
    dm::planner::Call call;
    PyObject* dtype = fields(data)->descr;
    const Py_ssize_t itemsize = item_bytes(data, dtype);  // (0: items the core may not move, nothing kept)
    if (itemsize == 0) Py_RETURN_FALSE;
    // (the layouts read as repeated reads them: an array's own strides, which a buffer view may change where
    // they do not matter, on an axis of one item or in an empty array)
    view_from_fields(data, &held.src), view_from_fields(out, &held.dst);
    set_itemsize(&held.src, itemsize), set_itemsize(&held.dst, itemsize);
    if (fields(out)->descr != dtype || !push_call(op, a, b, c, engine, &key, &call) || !push_layout(held.src, dtype, &key))
        Py_RETURN_FALSE;
    PyObject* out_shape = PyObject_GetAttr(out, settings.s_shape);
    if (out_shape == nullptr) return nullptr;
    const std::shared_ptr<Entry> entry = entry_for(key, std::move(call), dtype, out_shape, allocate, held.dst, itemsize);
    Py_DECREF(out_shape);
    if (entry == nullptr) Py_RETURN_FALSE;  // (not the output this layout's call makes: nothing kept)
    if (kept_for(*entry, held.src, held.dst, stream) != nullptr) Py_RETURN_TRUE;
    const int64_t* words = static_cast<const int64_t*>(program.buf);
    keep(*entry, held.src, held.dst, stream, std::make_shared<const std::vector<int64_t>>(words, words + program.len / 8));
    Py_RETURN_TRUE;
}

// forget(): the table emptied (tests; a program kept is freed when its last run ends).
PyObject* py_forget(PyObject*, PyObject*) {
    if (table != nullptr) table->clear();
    Py_RETURN_NONE;
}

// Whether an exact ndarray's fields read as its buffer view and dtype say (see ArrayFields); no error set.
bool fields_agree(PyObject* array) {
    Py_buffer view;
    if (!view_of(array, &view, PyBUF_STRIDES)) return false;
    PyObject* dtype = dtype_of(array);
    Py_buffer read;
    view_from_fields(array, &read);
    bool agree = dtype != nullptr && dtype == fields(array)->descr && read.buf == view.buf && read.ndim == view.ndim &&
                 read.readonly == view.readonly;
    for (int k = 0; agree && k < view.ndim; ++k) agree = read.shape[k] == view.shape[k] && read.strides[k] == view.strides[k];
    Py_XDECREF(dtype);
    PyBuffer_Release(&view);
    return agree;
}

// NumPy's PyArray_NewFromDescr from its C API's table (the capsule numpy's _multiarray_umath exports as
// _ARRAY_API), where a result it makes is the one np.empty makes: a C-contiguous, writable array of its own
// of the dtype and shape asked; null (with no error set) where it is not, or not found.
NewFromDescr new_from_descr_of(PyObject* api, PyObject* empty, PyObject* dtype) {
    if (!PyCapsule_CheckExact(api)) return nullptr;
    void** slots = static_cast<void**>(PyCapsule_GetPointer(api, PyCapsule_GetName(api)));
    if (slots == nullptr) return PyErr_Clear(), nullptr;
    const auto made = reinterpret_cast<NewFromDescr>(slots[kNewFromDescrSlot]);
    if (made == nullptr) return nullptr;
    const Py_ssize_t dims[2] = {2, 3};
    Py_INCREF(dtype);
    PyObject* ours = made(reinterpret_cast<PyTypeObject*>(settings.ndarray), dtype, 2, dims, nullptr, nullptr, 0, nullptr);
    PyObject* shape = Py_BuildValue("(nn)", dims[0], dims[1]);
    PyObject* theirs = shape == nullptr ? nullptr : PyObject_CallFunctionObjArgs(empty, shape, dtype, nullptr);
    bool same = ours != nullptr && theirs != nullptr && Py_TYPE(ours) == Py_TYPE(theirs) &&
                (PyObject*)Py_TYPE(ours) == settings.ndarray && fields_agree(ours);
    if (same) {
        const ArrayFields *a = fields(ours), *b = fields(theirs);
        same = a->descr == b->descr && a->nd == 2 && a->base == nullptr && a->data != nullptr && a->flags == b->flags;
        for (int k = 0; same && k < 2; ++k) same = a->dimensions[k] == dims[k] && a->strides[k] == b->strides[k];
    }
    Py_XDECREF(ours), Py_XDECREF(theirs), Py_XDECREF(shape);
    if (PyErr_Occurred()) PyErr_Clear();
    return same ? made : nullptr;
}

// repeat_facts() -> (fields_read, direct): what repeat_setup found (for the tests and `datamove info`).
PyObject* py_repeat_facts(PyObject*, PyObject*) {
    return Py_BuildValue("(OO)", settings.fields_read ? Py_True : Py_False,
                         settings.new_from_descr != nullptr ? Py_True : Py_False);
}

// repeat_setup(ndarray, threads_dict, engine_dict, probes, empty, api): where the settings are read (once, at
// datamove's import), probe arrays (exact ndarrays, writable and read-only) to check that arrays' fields
// read as NumPy lays them out, np.empty, and NumPy's C API capsule (or None).
PyObject* py_repeat_setup(PyObject*, PyObject* args) {
    PyObject *ndarray, *threads, *engine, *probes, *empty, *api;
    if (!PyArg_ParseTuple(args, "O!O!O!O!OO", &PyType_Type, &ndarray, &PyDict_Type, &threads, &PyDict_Type, &engine,
                          &PyTuple_Type, &probes, &empty, &api))
        return nullptr;
    if (settings.ndarray == nullptr) {
        const std::array<std::pair<PyObject**, const char*>, 18> names{{
            {&settings.s_loaded, "_native"}, {&settings.s_core_plans, "CORE_PLANS"},
            {&settings.s_get_num_threads, "get_num_threads"},
            {&settings.s_dtype, "dtype"}, {&settings.s_shape, "shape"}, {&settings.s_threads, "_threads"},
            {&settings.s_stream_bytes, "STREAM_BYTES"}, {&settings.s_register_bytes, "REGISTER_STREAM_BYTES"},
            {&settings.s_run_modes, "RUN_MODES"}, {&settings.s_space_to_depth, "space_to_depth"},
            {&settings.s_depth_to_space, "depth_to_space"}, {&settings.s_batch_to_space, "batch_to_space"},
            {&settings.s_space_to_batch, "space_to_batch"}, {&settings.s_blocks_first, "blocks_first"},
            {&settings.s_depth_first, "depth_first"}, {&settings.s_auto, "auto"}, {&settings.s_native, "native"},
            {&settings.s_channels_first, "channels_first"},
        }};
        for (const auto& [slot, name] : names)
            if ((*slot = PyUnicode_InternFromString(name)) == nullptr) return nullptr;
        table = new (std::nothrow) std::unordered_map<Key, std::shared_ptr<Entry>, KeyHash>();
        if (table == nullptr) return PyErr_NoMemory();
    }
    Py_XSETREF(settings.ndarray, Py_NewRef(ndarray));
    Py_XSETREF(settings.threads, Py_NewRef(threads));
    Py_XSETREF(settings.engine, Py_NewRef(engine));
    Py_XSETREF(settings.empty, Py_NewRef(empty));
    // every probe's fields as its buffer view says, a writable one and a read-only one among them
    bool agree = PyTuple_GET_SIZE(probes) > 0, writable = false, readonly = false;
    for (Py_ssize_t k = 0; agree && k < PyTuple_GET_SIZE(probes); ++k) {
        PyObject* probe = PyTuple_GET_ITEM(probes, k);
        agree = (PyObject*)Py_TYPE(probe) == ndarray && fields_agree(probe);
        if (!agree) break;
        Py_buffer read;
        view_from_fields(probe, &read);
        readonly = readonly || read.readonly;
        writable = writable || !read.readonly;
    }
    settings.fields_read = agree && writable && readonly;
    settings.new_from_descr =
        settings.fields_read ? new_from_descr_of(api, empty, fields(PyTuple_GET_ITEM(probes, 0))->descr) : nullptr;
    table->clear();
    Py_RETURN_NONE;
}

}  // namespace

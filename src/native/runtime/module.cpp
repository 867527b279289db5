// datamove._native: the Python module (run, streams, cache_bytes, workers, lowest; repeated and first calls:
// repeat.cpp).

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <algorithm>
#include <cstring>
#include <array>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime.hpp"
#include "planner_py.hpp"
#include "platform.hpp"

namespace {

using namespace dm;

// An array's lowest address (its data pointer moved back along negative strides) and its extent: the
// bytes from there to the end of its highest item (0 for an empty array).
struct Extent {
    char* low;
    int64_t bytes;
};

Extent extent_of(const Py_buffer& view) {
    char* low = static_cast<char*>(view.buf);
    int64_t bytes = view.itemsize;
    bool empty = false;
    for (int k = 0; k < view.ndim; ++k) {
        empty = empty || view.shape[k] == 0;
        // (not named `far`: windows.h defines far and near away)
        const int64_t reach = view.shape[k] > 0 ? (view.shape[k] - 1) * (int64_t)view.strides[k] : 0;
        if (reach < 0) low += reach;
        bytes += reach < 0 ? -reach : reach;
    }
    return Extent{low, empty ? 0 : bytes};
}

PyObject* malformed() {
    PyErr_SetString(PyExc_ValueError, "datamove._native.run: a malformed program, or one reaching outside its arrays");
    return nullptr;
}

PyObject* run_program(const int64_t* p, Py_ssize_t n, const Py_buffer& src_view, const Py_buffer& dst_view, int threads,
                      int stream);

PyObject* py_run(PyObject*, PyObject* args) {
    Py_buffer program, src_view, dst_view;
    PyObject *src_array, *dst_array;
    int threads, stream;  // stream: 0 plain, 1 where every step streams from registers, 2 where the steps can
    if (!PyArg_ParseTuple(args, "y*OOii", &program, &src_array, &dst_array, &threads, &stream)) return nullptr;
    if (PyObject_GetBuffer(src_array, &src_view, PyBUF_STRIDES) != 0) {
        PyBuffer_Release(&program);
        return nullptr;
    }
    if (PyObject_GetBuffer(dst_array, &dst_view, PyBUF_STRIDES | PyBUF_WRITABLE) != 0) {
        PyBuffer_Release(&src_view);
        PyBuffer_Release(&program);
        return nullptr;
    }
    // (the views are held until the run ends: no array can be resized or freed under it)
    struct Release {
        Py_buffer *a, *b, *c;
        ~Release() { PyBuffer_Release(a), PyBuffer_Release(b), PyBuffer_Release(c); }
    } release{&program, &src_view, &dst_view};
    return run_program(static_cast<const int64_t*>(program.buf), program.len / (Py_ssize_t)sizeof(int64_t), src_view,
                       dst_view, threads, stream);
}

// call(op, block, begin, end, mode, block_size, data, out, threads, stream, run_stream) -> bool: a validated
// call (datamove.shapes has checked it; data's and out's shapes are its input's and output's) planned,
// lowered for `stream` (engines.native.engine.streamed()'s) and run with `run_stream` (run()'s stream) in one:
// a new shape's first call. False, having written nothing, where the planner takes none.
PyObject* py_call(PyObject*, PyObject* args) {
    if (PyTuple_GET_SIZE(args) != 11) {
        PyErr_SetString(PyExc_TypeError, "datamove._native.call takes 11 arguments");
        return nullptr;
    }
    PyObject* head = PyTuple_GetSlice(args, 0, 6);
    PyObject* tail = PyTuple_GetSlice(args, 6, 11);
    dm::planner::Call call;
    PyObject *src_array, *dst_array;
    int threads, stream, run_stream;
    const bool parsed = head != nullptr && tail != nullptr && dm::planner::call_of(head, &call) &&
                        PyArg_ParseTuple(tail, "OOiii", &src_array, &dst_array, &threads, &stream, &run_stream);
    Py_XDECREF(head), Py_XDECREF(tail);
    if (!parsed) return nullptr;
    Py_buffer src_view, dst_view;
    if (PyObject_GetBuffer(src_array, &src_view, PyBUF_STRIDES) != 0) return nullptr;
    if (PyObject_GetBuffer(dst_array, &dst_view, PyBUF_STRIDES | PyBUF_WRITABLE) != 0) {
        PyBuffer_Release(&src_view);
        return nullptr;
    }
    struct Release {
        Py_buffer *a, *b;
        ~Release() { PyBuffer_Release(a), PyBuffer_Release(b); }
    } release{&src_view, &dst_view};
    dm::planner::Layout src, dst;
    dm::planner::layout_from(src_view, &src), dm::planner::layout_from(dst_view, &dst);
    std::vector<int64_t> program;
    if (!dm::planner::program_of(&call, src, dst, stream, &program)) Py_RETURN_FALSE;
    PyObject* ran = run_program(program.data(), (Py_ssize_t)program.size(), src_view, dst_view, threads, run_stream);
    if (ran == nullptr) return nullptr;
    Py_DECREF(ran);
    Py_RETURN_TRUE;
}

// Runs a program (its n int64s) from the buffer src into dst, which the caller holds; None, or an error set.
PyObject* run_program(const int64_t* p, Py_ssize_t n, const Py_buffer& src_view, const Py_buffer& dst_view, int threads,
                      int stream) {
    const Extent src = extent_of(src_view), dst = extent_of(dst_view);
    if (n < 1 || p[0] < 0 || p[0] > kMaxSteps) return malformed();
    int nsteps = (int)p[0];
    Step* steps = new (std::nothrow) Step[nsteps ? nsteps : 1];
    if (steps == nullptr) return PyErr_NoMemory();
    int64_t total = 0;
    Table* table = nullptr;
    if (!parse(p, n, steps, nsteps, &total, src.bytes, dst.bytes)) {
        delete[] steps;
        return malformed();
    }
    if (!given_tables(steps, nsteps)) {
        free_given_tables(steps, nsteps);
        delete[] steps;
        return PyErr_NoMemory();
    }
    merge_units(steps, &nsteps, &table);
    Job job{0, steps, nsteps, total, src.low, dst.low,
            stream != 0 && DM_HAVE_STREAM && streams(steps, nsteps, dst.low, stream == 1), 1};
    choose(steps, nsteps, job.stream, dst.low);
    threads = std::max(1, std::min(threads, kMaxThreads));
    Py_BEGIN_ALLOW_THREADS run_job(job, threads);
    Py_END_ALLOW_THREADS free_table(table);
    free_given_tables(steps, nsteps);
    delete[] steps;
    Py_RETURN_NONE;
}

PyObject* py_cache_bytes(PyObject*, PyObject*) { return PyLong_FromLongLong(last_level_cache_bytes()); }

PyObject* py_workers(PyObject*, PyObject*) { return PyLong_FromLong(pool_workers()); }

// copy(src, dst, threads, stream): dst's bytes become src's (two C-contiguous buffers of one size) by a
// plain copy loop, 64 KiB rows shared among the threads as any job's, its stores streamed around the cache
// where `stream` asks and the CPU has them: the physical floor the bench holds every case to, beside
// np.copyto (which glibc's memcpy streams only above its own threshold).
PyObject* py_copy(PyObject*, PyObject* args) {
    Py_buffer src, dst;
    int threads, stream;
    if (!PyArg_ParseTuple(args, "y*w*ii", &src, &dst, &threads, &stream)) return nullptr;
    struct Release {
        Py_buffer *a, *b;
        ~Release() { PyBuffer_Release(a), PyBuffer_Release(b); }
    } release{&src, &dst};
    if (src.len != dst.len) {
        PyErr_Format(PyExc_ValueError, "datamove._native.copy: src has %zd bytes, dst %zd", src.len, dst.len);
        return nullptr;
    }
    constexpr int64_t kRow = 64 << 10;
    const int64_t rows = src.len / kRow, rest = src.len % kRow;
    // one CONTIGUOUS step of whole rows, one of the rest (see common.hpp)
    int64_t program[1 + 2 * 17] = {0};
    int64_t* at = program + 1;
    for (const auto& [count, size, start] : {std::array<int64_t, 3>{rows, kRow, 0}, std::array<int64_t, 3>{1, rest, rows * kRow}}) {
        if (count == 0 || size == 0) continue;
        const int64_t step[17] = {CONTIGUOUS, 1, 0, 0, 0, start, start, 3, count, size, size, 1, 0, 0, size, 1, 1};
        std::copy(step, step + 17, at);
        at += 17, ++program[0];
    }
    Step steps[2];
    int64_t total = 0;
    if (!parse(program, at - program, steps, (int)program[0], &total, src.len, dst.len)) {
        PyErr_SetString(PyExc_ValueError, "datamove._native.copy: a malformed copy");
        return nullptr;
    }
    for (int k = 0; k < (int)program[0]; ++k) steps[k].nt = stream != 0 && DM_HAVE_STREAM;
    Job job{0, steps, (int)program[0], total, static_cast<char*>(src.buf), static_cast<char*>(dst.buf),
            stream != 0 && DM_HAVE_STREAM, 1};
    choose(steps, (int)program[0], job.stream, job.dst);  // (CONTIGUOUS rows of 64 KiB: no table)
    threads = std::max(1, std::min(threads, kMaxThreads));
    Py_BEGIN_ALLOW_THREADS run_job(job, threads);
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

// A program read to answer a question about it (streams, kernels), not run: parsed against no arrays'
// bounds, its UNITS steps' tables made and its steps merged as run() makes them; freed with it.
struct Examined {
    Step* steps = nullptr;
    int nsteps = 0;
    Table* merged = nullptr;
    bool parsed = false, tables = false;
    explicit Examined(const Py_buffer& program) {
        const int64_t* p = static_cast<const int64_t*>(program.buf);
        const Py_ssize_t n = program.len / (Py_ssize_t)sizeof(int64_t);
        steps = (n >= 1 && p[0] >= 0 && p[0] <= kMaxSteps) ? new (std::nothrow) Step[p[0] ? p[0] : 1] : nullptr;
        nsteps = steps != nullptr ? (int)p[0] : 0;
        int64_t total = 0;
        parsed = steps != nullptr && parse(p, n, steps, nsteps, &total, INT64_MAX, INT64_MAX);
        tables = parsed && given_tables(steps, nsteps);
        if (tables) merge_units(steps, &nsteps, &merged);
    }
    ~Examined() {
        free_table(merged);
        if (parsed) free_given_tables(steps, nsteps);
        delete[] steps;
    }
    Examined(const Examined&) = delete;
    Examined& operator=(const Examined&) = delete;
    // Whether it can be asked about; else the error is set (`who`: the function, for the message).
    bool usable(const char* who) const {
        if (!parsed) PyErr_Format(PyExc_ValueError, "datamove._native.%s: a malformed program", who);
        else if (!tables) PyErr_NoMemory();
        return tables;
    }
};

PyObject* py_streams(PyObject*, PyObject* args) {
    Py_buffer program;
    unsigned long long dst;
    int registers = 0;
    if (!PyArg_ParseTuple(args, "y*K|p", &program, &dst, &registers)) return nullptr;
    bool result = false, usable;
    {
        Examined ex(program);
        usable = ex.usable("streams");
        result = usable && DM_HAVE_STREAM && streams(ex.steps, ex.nsteps, reinterpret_cast<char*>(dst), registers != 0);
    }
    PyBuffer_Release(&program);
    return usable ? PyBool_FromLong(result) : nullptr;
}

// The patterns' names, as PATTERNS maps them to their ids.
constexpr const char* kPatternNames[] = {"contiguous", "gather", "scatter", "strided", "fill", "gather_window", "scatter_window", "units"};
static_assert(sizeof(kPatternNames) / sizeof(*kPatternNames) == UNITS + 1, "a name for every pattern");

// kernels(program, dst_address, stream=0): the kernels choose() gives each step of a program as run()
// runs it (with its `stream` mode, into an output at that address): a list of (pattern, kernel, then,
// table), a step each (merged steps one UNITS step), the names kKernelNames'; table the outer mode (0-4)
// of the step's table of units, None where it has none.
PyObject* py_kernels(PyObject*, PyObject* args) {
    Py_buffer program;
    unsigned long long dst;
    int stream = 0;
    if (!PyArg_ParseTuple(args, "y*K|i", &program, &dst, &stream)) return nullptr;
    PyObject* result = nullptr;
    {
        Examined ex(program);
        if (ex.usable("kernels")) {
            char* const to = reinterpret_cast<char*>(dst);
            choose(ex.steps, ex.nsteps, stream != 0 && DM_HAVE_STREAM && streams(ex.steps, ex.nsteps, to, stream == 1), to);
            result = PyList_New(ex.nsteps);
            for (int s = 0; s < ex.nsteps && result != nullptr; ++s) {
                const Step& st = ex.steps[s];
                const int mode = table_mode(st);
                PyObject* outer = mode >= 0 ? PyLong_FromLong(mode) : (Py_INCREF(Py_None), Py_None);
                PyObject* item = outer ? Py_BuildValue("(sssN)", kPatternNames[st.pattern], kKernelNames[st.kernel],
                                                       kKernelNames[st.then], outer)
                                       : nullptr;
                if (item == nullptr) Py_CLEAR(result);
                else PyList_SET_ITEM(result, s, item);
            }
        }
    }
    PyBuffer_Release(&program);
    return result;
}

// The lowest address of an array's elements (its data pointer moved back along negative strides), from
// the buffer protocol without a format, so any dtype: a tenth of what NumPy's __array_interface__ costs
// in Python, twice a call (0.2 us against 2.2 us).
PyObject* py_lowest(PyObject*, PyObject* array) {
    Py_buffer view;
    if (PyObject_GetBuffer(array, &view, PyBUF_STRIDES) != 0) return nullptr;
    char* low = extent_of(view).low;
    PyBuffer_Release(&view);
    return PyLong_FromVoidPtr(low);
}

}  // namespace

#include "repeat.cpp"  // (after run_program, which it calls)

namespace {

PyMethodDef methods[] = {
    {"lowest", py_lowest, METH_O, "lowest(array): the lowest address of the array's elements (buffer protocol)."},
    {"run", py_run, METH_VARARGS,
     "run(program, src, dst, threads, stream): execute a lowered program (see common.hpp) from the array src into "
     "the writable array dst (any objects with the buffer protocol, its offsets from each one's lowest address), "
     "refusing one that reaches outside them; stream: 0 plain stores, 1 streaming where every step streams from "
     "registers, 2 streaming where the steps can."},
    {"cache_bytes", py_cache_bytes, METH_NOARGS,
     "The size in bytes of the last-level cache instance a core shares (Linux: sysfs, else sysconf; Windows: "
     "GetLogicalProcessorInformation; macOS: sysctl), or 0 when unknown."},
    {"workers", py_workers, METH_NOARGS, "The pool's started worker threads in this process (0 in a new fork)."},
    {"copy", py_copy, METH_VARARGS,
     "copy(src, dst, threads, stream): dst's bytes become src's (C-contiguous, one size) by a plain copy loop on "
     "the core's threads, its stores streamed around the cache where stream is true and the CPU has them."},
    {"kernels", py_kernels, METH_VARARGS,
     "kernels(program, dst_address, stream=0): the kernels each step of a program runs by, into an output at that "
     "address: a list of (pattern, kernel, then, table), a step each (PATTERNS and KERNELS name them; table: "
     "the outer mode of the step's table of units, or None)."},
    {"streams", py_streams, METH_VARARGS,
     "streams(program, dst_address, registers=False): whether run() with stream=2 (registers: 1) streams this "
     "program's stores (every piece whole)."},
    {"call", py_call, METH_VARARGS,
     "call(op, block, begin, end, mode, block_size, data, out, threads, stream, run_stream): a validated call "
     "planned, lowered (for stream) and run (with run_stream, as run() takes it) by the core in one; False, "
     "having written nothing, where its planner takes none."},
    {"program", dm::planner::py_program, METH_VARARGS,
     "program(op, block, begin, end, mode, block_size, data, out, stream): the program of a validated call over "
     "these arrays, planned and lowered by the core (plan.hpp), or None where its planner takes none."},
    {"plan_flat", dm::planner::py_plan_flat, METH_VARARGS,
     "plan_flat(op, in_shape, out_shape, block, begin, end, mode, block_size): the planner's plan of a call, "
     "encoded as plan.hpp says (None where it plans none): for the tests."},
    {"lower_flat", dm::planner::py_lower_flat, METH_VARARGS,
     "lower_flat(plan, data, out, stream): the planner's program of an encoded plan over two arrays (None where "
     "it lowers none): for the tests."},
    {"units_flat", dm::planner::py_units_flat, METH_VARARGS,
     "units_flat(plan, data, out): the planner's steps of units from tables for an encoded plan over two arrays, "
     "as a program (None where it takes none): for the tests."},
    {"repeated", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(py_repeated)), METH_FASTCALL,
     "repeated(op, data, a, b, c, out, engine): a call remembered (see remember), run in one: the result, or None "
     "(nothing written) for a call not remembered; (a, b, c) are (mode, block_size, data_format) or (block_shape, "
     "begin, end)."},
    {"first", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(py_first)), METH_FASTCALL,
     "first(op, data, a, b, c, out_shape, allocate, engine[, out]): a validated call of an exact ndarray, (a, b, "
     "c) as repeated() takes them (datamove.rules.shapes.static_depth_shape's or static_space_shape's out_shape), "
     "planned, lowered and run by the core into a new C-contiguous result (or into out, an ndarray datamove.ops "
     "has checked, sharing no memory with data) in one C call: a layout's first call, its program kept for "
     "repeated(). allocate makes the call's new results (None: as np.empty makes them). None, nothing made, "
     "where the planner takes none, engines.native.engine.CORE_PLANS is off or out is not of the result's shape and "
     "dtype, writable and apart from data; False, nothing made, where the call is kept already and no out is "
     "given (its repeat was not repeated()'s: its recipe's turn)."},
    {"handle", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(py_handle)), METH_FASTCALL,
     "handle(op, data, a, b, c, engine): the handle of a call remembered for data's layout (an exact ndarray; "
     "the arguments as repeated() takes them), for at(); None where none is remembered."},
    {"at", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(py_at)), METH_FASTCALL,
     "at(handle, address): the handle's call run from the input of its layout whose first item is at address "
     "(a PyTorch CPU tensor's data_ptr(), which the caller vouches for) into a new result, an ndarray; None, "
     "nothing made, where no program is kept or planned for it."},
    {"remember", py_remember, METH_VARARGS,
     "remember(op, a, b, c, engine, data, out, program, stream, allocate): keep the program that has just run "
     "this validated call of a kept recipe, for repeated(); allocate makes its new results."},
    {"forget", py_forget, METH_NOARGS, "forget(): every call remembered forgotten."},
    {"repeat_setup", py_repeat_setup, METH_VARARGS,
     "repeat_setup(ndarray, threads_dict, engine_dict, probes, empty, api): the array type repeated() takes, the "
     "module dicts whose settings it reads at each call (datamove.engines.native.threads', datamove.engines.native.engine's), "
     "probe arrays (writable and read-only) its reads of arrays are checked on, np.empty, and NumPy's C API "
     "capsule (or None), whose allocator makes the results np.empty would."},
    {"repeat_facts", py_repeat_facts, METH_NOARGS,
     "repeat_facts() -> (fields_read, direct): whether repeat_setup found arrays' fields as NumPy lays them out "
     "(else every repeat misses), and whether new results are allocated by NumPy's C API (else by np.empty)."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", "datamove's compiled CPU core.", -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit__native(void) {
    PyObject* m = PyModule_Create(&module);
    if (m == nullptr) return nullptr;
    init_pool();
    if (PyModule_AddIntConstant(m, "HAVE_STREAM", DM_HAVE_STREAM) < 0) return nullptr;
    // The instruction set: the level it runs at, the CPU's, and every level it can run at here (tests walk them)
    if (PyModule_AddStringConstant(m, "ISA", kIsaNames[kIsa]) < 0) return nullptr;
    if (PyModule_AddStringConstant(m, "CPU_ISA", kIsaNames[kCpuIsa]) < 0) return nullptr;
    PyObject* levels = PyTuple_New(kCpuIsa - kLowestIsa + 1);
    if (levels == nullptr) return nullptr;
    for (int k = kLowestIsa; k <= kCpuIsa; ++k) PyTuple_SET_ITEM(levels, k - kLowestIsa, PyUnicode_FromString(kIsaNames[k]));
    if (PyModule_AddObject(m, "ISAS", levels) < 0) return Py_DECREF(levels), nullptr;
    const int asked = asked_isa();
    if (asked != -1 && asked != kIsa) {
        char message[320];
        std::snprintf(message, sizeof message,
                      "DATAMOVE_ISA=%.40s %s: the core runs at %s (the levels here: %s to %s; 'native': the CPU's)",
                      std::getenv("DATAMOVE_ISA"),
                      asked == -2 ? "names no level (portable, sse2, ssse3, avx2, avx512f, avx512, native)"
                      : asked > kCpuIsa ? "is above this CPU's level" : "is below this build's lowest level",
                      kIsaNames[kIsa], kIsaNames[kLowestIsa], kIsaNames[kCpuIsa]);
        if (PyErr_WarnEx(PyExc_RuntimeWarning, message, 1) < 0) return nullptr;
    }
#if DM_HAVE_AVX512
    const int lines = kAvx512, narrow = kAvx512Bytes;
#else
    const int lines = 0, narrow = 0;
#endif
    // gather_lines runs on this CPU (4- and 8-byte words), and gather_narrow_lines (1- and 2-byte words)
    if (PyModule_AddIntConstant(m, "WHOLE_LINES", lines) < 0) return nullptr;
    if (PyModule_AddIntConstant(m, "WHOLE_NARROW_LINES", narrow) < 0) return nullptr;
    // streamed gathers (and SpaceToBatch's windows) of 4- and 8-byte words store whole lines from
    // registers on this CPU: gather_lines (AVX-512F) or gather_lines_avx2 (AVX2)
    if (PyModule_AddIntConstant(m, "GATHER_LINES", whole_line_words(4) && whole_line_words(8)) < 0) return nullptr;
    // and those of 1- and 2-byte words outside padded windows: gather_narrow_lines (AVX-512BW and VBMI, windows too)
    // or gather_lines_avx2 (AVX2, and AVX-512F without BW and VBMI)
    if (PyModule_AddIntConstant(m, "GATHER_NARROW_LINES", whole_line_words(1) && whole_line_words(2)) < 0) return nullptr;
    // Whether run's stream=2 (the steps that go through the L1 buffer streamed too) pays at this level, or
    // large outputs should ask for 1 (those steps stored plainly). Without AVX-512's whole-line kernels it
    // does not: on the 2-core AMD EPYC (AVX2), one thread, 64-128 MiB, same process, in turns, 2 -> 1:
    // SpaceToDepth NCHW with blocks of 3 and 4 1.91-1.93x -> 1.57-1.62x the copy floor, 5-D 1.94x -> 1.51x
    // and with block 3 2.49x -> 1.77x, SpaceToBatch with pads 1.87x -> 1.58x, uint8 with a 4 x 4 block
    // 2.37x -> 1.91x, float64 3 x 3 2.23x -> 2.04x; no case of the bench slower by more than 0.03.
    if (PyModule_AddIntConstant(m, "STAGED_STREAMS", kIsa >= IsaAvx512f) < 0) return nullptr;
    // The program format (common.hpp) as the tests' Python twin of the planner (tests/lowering) reads it: the steps'
    // pattern ids and the limits parse() holds them to (datamove.engines.native.core_format reads them), so that
    // no id or limit is written twice.
    PyObject* patterns = PyDict_New();
    for (int k = 0; k <= UNITS && patterns != nullptr; ++k) {
        PyObject* id = PyLong_FromLong(k);
        if (id == nullptr || PyDict_SetItemString(patterns, kPatternNames[k], id) < 0) Py_CLEAR(patterns);
        Py_XDECREF(id);
    }
    if (patterns == nullptr) return nullptr;
    if (PyModule_AddObject(m, "PATTERNS", patterns) < 0) return Py_DECREF(patterns), nullptr;
    // The kernels a step's runs go to (common.hpp's Kernel, in its order), as kernels() names them.
    PyObject* kernels = PyTuple_New(K_COUNT);
    for (int k = 0; k < K_COUNT && kernels != nullptr; ++k) {
        PyObject* name = PyUnicode_FromString(kKernelNames[k]);
        if (name == nullptr) Py_CLEAR(kernels);
        else PyTuple_SET_ITEM(kernels, k, name);
    }
    if (kernels == nullptr || PyModule_AddObject(m, "KERNELS", kernels) < 0) return Py_XDECREF(kernels), nullptr;
    // the planner's operations and modes (plan.hpp), and the tile blocks and UNITS words it lowers to
    PyObject* ops = Py_BuildValue("{sisisisi}", "batch_to_space", dm::planner::BATCH_TO_SPACE, "space_to_batch",
                                  dm::planner::SPACE_TO_BATCH, "space_to_depth", dm::planner::SPACE_TO_DEPTH,
                                  "depth_to_space", dm::planner::DEPTH_TO_SPACE);
    if (ops == nullptr || PyModule_AddObject(m, "OPS", ops) < 0) return Py_XDECREF(ops), nullptr;
    PyObject* modes = Py_BuildValue("{sisi}", "blocks_first", dm::planner::BLOCKS_FIRST, "depth_first", dm::planner::DEPTH_FIRST);
    if (modes == nullptr || PyModule_AddObject(m, "MODES", modes) < 0) return Py_XDECREF(modes), nullptr;
    PyObject* blocks = Py_BuildValue("(LLL)", (long long)dm::planner::kTileBlocks[0], (long long)dm::planner::kTileBlocks[1],
                                     (long long)dm::planner::kTileBlocks[2]);
    if (blocks == nullptr || PyModule_AddObject(m, "TILE_BLOCKS", blocks) < 0) return Py_XDECREF(blocks), nullptr;
    PyObject* items = Py_BuildValue("(LL)", (long long)kUnitItems[0], (long long)kUnitItems[1]);
    if (items == nullptr || PyModule_AddObject(m, "UNIT_ITEMS", items) < 0) return Py_XDECREF(items), nullptr;
    const std::array<std::pair<const char*, long long>, 22> limits{{
        {"ZERO_WORD", kZeroWord},            // a UNITS table's entry for a word of zeros
        {"MAX_PARTS", kMaxParts},            // a UNITS step's parts (block offsets)
        {"UNIT_WORDS", kUnitsWords},         // the words of a given UNITS step's unit
        {"UNIT_ENTRIES", kUnitsEntries},     // its parts' table entries together
        {"TABLE_REACH", kTableReach},        // parse()'s bound on a table's offsets, and what they read on
        {"LINE", kLine},                     // bytes in a cache line, as the kernels count them
        {"MAX_LOOPS", kMaxLoops},            // loops of one step
        {"MAX_STEPS", kMaxSteps},            // steps of one program
        {"MAX_THREADS", kMaxThreads},        // threads of one run
        {"MAX_WORD", kMaxWord},              // a step's widest word, but a gather window's
        {"MAX_WINDOW_WORD", kMaxWindowWord}, // a gather window's widest word (a pixel)
        // the planner's thresholds (plan.hpp), which the tests' Python twin of it reads
        {"MIN_ROWS", dm::planner::kMinRows},
        {"CHUNK_WORDS", dm::planner::kChunkWords},
        {"CHUNK_BYTES", dm::planner::kMinChunkBytes},
        {"SHARED_BYTES", dm::planner::kSharedBytes},
        {"REREAD_BYTES", dm::planner::kRereadBytes},
        {"SMALL_UNIT_WORDS", dm::planner::kSmallUnitWords},
        {"TABLE_COST", dm::planner::kTableCost},
        {"ROW_BYTES", dm::planner::kWindowRowBytes},
        {"TABLE_SLACK", dm::planner::kTableSlack},
        {"PIECE_WORDS", dm::planner::kPieceWords},
        {"FAN_OUT_BYTES", dm::planner::kFanOutBytes},
    }};
    for (const auto& [name, value] : limits)
        if (PyModule_AddObject(m, name, PyLong_FromLongLong(value)) < 0) return nullptr;
    return m;
}

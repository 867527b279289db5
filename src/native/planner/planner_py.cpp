// The planner's Python functions (see planner_py.hpp and plan.hpp).

#include "planner_py.hpp"

#include <cstring>

#include "plan.hpp"

namespace dm::planner {

void layout_from(const Py_buffer& view, Layout* layout) {
    char* low = static_cast<char*>(view.buf);
    layout->shape.assign(view.shape, view.shape + view.ndim);
    layout->strides.assign(view.strides, view.strides + view.ndim);
    for (int k = 0; k < view.ndim; ++k)
        if (view.shape[k] > 0 && view.strides[k] < 0) low += (view.shape[k] - 1) * (int64_t)view.strides[k];
    layout->itemsize = view.itemsize;
    layout->address = reinterpret_cast<uint64_t>(low);
}

namespace {

// A sequence of Python ints as int64s; false (a Python error set) where it is not one.
bool ints_of(PyObject* seq, std::vector<int64_t>* out) {
    PyObject* fast = PySequence_Fast(seq, "expected a sequence of ints");
    if (fast == nullptr) return false;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject** items = PySequence_Fast_ITEMS(fast);
    out->reserve(n);
    for (Py_ssize_t i = 0; i < n; ++i) {
        const long long v = PyLong_AsLongLong(items[i]);
        if (v == -1 && PyErr_Occurred()) return Py_DECREF(fast), false;
        out->push_back(v);
    }
    Py_DECREF(fast);
    return true;
}

// An array's layout from the buffer protocol (any object with one: shape, strides, item size, lowest
// address); false (a Python error set) where it has none.
bool layout_of(PyObject* array, Layout* layout, bool writable) {
    Py_buffer view;
    if (PyObject_GetBuffer(array, &view, PyBUF_STRIDES | (writable ? PyBUF_WRITABLE : 0)) != 0) return false;
    layout_from(view, layout);
    PyBuffer_Release(&view);
    return true;
}

}  // namespace

bool call_of(PyObject* args, Call* call) {
    int op, mode;
    long long block_size;
    PyObject *block, *begin, *end;
    if (!PyArg_ParseTuple(args, "iOOOiL", &op, &block, &begin, &end, &mode, &block_size)) return false;
    call->op = op, call->mode = mode, call->block_size = block_size;
    return ints_of(block, &call->block) && ints_of(begin, &call->begin) && ints_of(end, &call->end);
}

namespace {

PyObject* as_bytes(const std::vector<int64_t>& v) {
    return PyBytes_FromStringAndSize(reinterpret_cast<const char*>(v.data()), (Py_ssize_t)(v.size() * sizeof(int64_t)));
}

}  // namespace

bool program_of(Call* call, const Layout& data, const Layout& out, int stream, std::vector<int64_t>* program) {
    call->in_shape = data.shape, call->out_shape = out.shape;
    Plan plan;
    return plan_views(*call, &plan) && lower_program(plan, data, out, stream, program);
}

PyObject* py_program(PyObject*, PyObject* args) {
    PyObject *head = PyTuple_GetSlice(args, 0, 6), *tail = PyTuple_GetSlice(args, 6, PY_SSIZE_T_MAX);
    Call call;
    PyObject *data, *out;
    int stream;
    const bool parsed = head != nullptr && tail != nullptr && call_of(head, &call) &&
                        PyArg_ParseTuple(tail, "OOi", &data, &out, &stream);
    Py_XDECREF(head), Py_XDECREF(tail);
    if (!parsed) return nullptr;
    Layout src, dst;
    if (!layout_of(data, &src, false) || !layout_of(out, &dst, true)) return nullptr;
    std::vector<int64_t> program;
    if (!program_of(&call, src, dst, stream, &program)) Py_RETURN_NONE;
    return as_bytes(program);
}

PyObject* py_plan_flat(PyObject*, PyObject* args) {
    int op, mode;
    long long block_size;
    PyObject *in_shape, *out_shape, *block, *begin, *end;
    if (!PyArg_ParseTuple(args, "iOOOOOiL", &op, &in_shape, &out_shape, &block, &begin, &end, &mode, &block_size))
        return nullptr;
    Call call;
    call.op = op, call.mode = mode, call.block_size = block_size;
    if (!ints_of(in_shape, &call.in_shape) || !ints_of(out_shape, &call.out_shape) || !ints_of(block, &call.block) ||
        !ints_of(begin, &call.begin) || !ints_of(end, &call.end))
        return nullptr;
    Plan plan;
    if (!plan_views(call, &plan)) Py_RETURN_NONE;
    std::vector<int64_t> flat;
    encode(plan, &flat);
    return as_bytes(flat);
}

namespace {

// The arguments of the tests' exports: an encoded plan and two arrays' layouts; false (a Python error set)
// where they are not that (`name` in the message).
bool decoded(const char* name, Py_buffer* flat, PyObject* data, PyObject* out, Plan* plan, Layout* src, Layout* dst) {
    const bool ok = decode(static_cast<const int64_t*>(flat->buf), flat->len / (Py_ssize_t)sizeof(int64_t), plan);
    PyBuffer_Release(flat);
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "datamove._native.%s: a malformed plan", name);
        return false;
    }
    return layout_of(data, src, false) && layout_of(out, dst, true);
}

}  // namespace

PyObject* py_lower_flat(PyObject*, PyObject* args) {
    Py_buffer flat;
    PyObject *data, *out;
    int stream;
    if (!PyArg_ParseTuple(args, "y*OOi", &flat, &data, &out, &stream)) return nullptr;
    Plan plan;
    Layout src, dst;
    if (!decoded("lower_flat", &flat, data, out, &plan, &src, &dst)) return nullptr;
    std::vector<int64_t> program;
    if (!lower_program(plan, src, dst, stream, &program)) Py_RETURN_NONE;
    return as_bytes(program);
}

PyObject* py_units_flat(PyObject*, PyObject* args) {
    Py_buffer flat;
    PyObject *data, *out;
    if (!PyArg_ParseTuple(args, "y*OO", &flat, &data, &out)) return nullptr;
    Plan plan;
    Layout src, dst;
    if (!decoded("units_flat", &flat, data, out, &plan, &src, &dst)) return nullptr;
    std::vector<std::vector<int64_t>> steps;
    if (!lower_units(plan, src, dst, &steps)) Py_RETURN_NONE;
    std::vector<int64_t> program{(int64_t)steps.size()};
    for (const auto& step : steps) program.insert(program.end(), step.begin(), step.end());
    return as_bytes(program);
}

}  // namespace dm::planner

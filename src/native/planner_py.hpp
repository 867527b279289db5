// The planner's Python functions (planner_py.cpp), listed in module.cpp's methods.

#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "plan.hpp"

namespace dm::planner {

// An array's layout from its buffer (Py_buffer with strides).
void layout_from(const Py_buffer& view, Layout* layout);
// A call's op and parameters from the tuple (op, block, begin, end, mode, block_size); false (a Python error
// set) where they are not that.
bool call_of(PyObject* args, Call* call);
// The program of a validated call over two layouts (its shapes set from theirs): plan_views, then
// lower_program; false where the planner takes none.
bool program_of(Call* call, const Layout& data, const Layout& out, int stream, std::vector<int64_t>* program);

// program(op, block, begin, end, mode, block_size, data, out, stream) -> bytes or None: the program of a
// validated call (datamove.shapes has checked it; data's and out's shapes are its input's and output's)
// over these two arrays, planned and lowered here (plan_views, lower_program), `stream` as
// datamove.engines.native.engine.streamed() says; None where the planner takes none (the NumPy engine then
// runs the call).
PyObject* py_program(PyObject*, PyObject* args);
// plan_flat(op, in_shape, out_shape, block, begin, end, mode, block_size) -> bytes or None: plan_views's
// plan, encoded (plan.hpp), for the tests that hold it to datamove.plans.views'.
PyObject* py_plan_flat(PyObject*, PyObject* args);
// lower_flat(plan, data, out, stream) -> bytes or None: lower_program's program of an encoded plan over
// two arrays (buffer protocol), for the tests that hold it to datamove.engines.native.engine.program's.
PyObject* py_lower_flat(PyObject*, PyObject* args);
// units_flat(plan, data, out) -> bytes or None: lower_units's steps of an encoded plan as a program (the
// step count, then the steps), for the tests that hold them to tests/lowering/units.py's lower_units'.
PyObject* py_units_flat(PyObject*, PyObject* args);

}  // namespace dm::planner

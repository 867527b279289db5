// The planner (plan.hpp), one translation unit: its four parts in planner/ share plan.hpp and common.hpp,
// and compiled as one they take 8.0-8.3 s of compiler time at -O3 where apart they took 12.6 (2-core AMD
// EPYC, GCC 12), a new shape's planning as fast. (At -O2, 5.9 s, SpaceToBatch with pads of small images
// planned 16% slower: 32.6 us against 28.0.)
//
//   planner/views.cpp       plan_views: the op's views of its input (datamove.plans.views)
//   planner/lower.cpp       lower_program: the views over two layouts as the program's steps
//   planner/units.cpp       lower_units: small images as units from tables (tests/lowering/units.py)
//   planner/planner_py.cpp  the planner's Python functions (module.cpp lists them)

#include "planner/views.cpp"
#include "planner/lower.cpp"
#include "planner/units.cpp"
#include "planner/planner_py.cpp"

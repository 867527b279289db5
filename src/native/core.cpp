// The core's runtime, one translation unit: its three parts in core/ share core.hpp, and compiled as one they
// take 5.2 s of compiler time where apart they took 8.2 (2-core AMD EPYC, GCC 12), which kept the build over
// a minute on two cores.
//
//   core/module.cpp   the Python module: its functions, the GIL released around a run (first: Python.h
//                     comes before any other header)
//   core/repeat.cpp   repeated calls: programs kept by call and layout, run in one C call (module.cpp
//                     includes it)
//   core/program.cpp  parse (a program into steps), streams (whether its stores go around the cache), pick
//   core/pool.cpp     jobs and the thread pool (fork-safe)

#include "core/module.cpp"
#include "core/program.cpp"
#include "core/pool.cpp"

// The core's runtime, one translation unit: its parts in runtime/ share runtime.hpp, and compiled as one they
// take 5.2 s of compiler time where apart they took 8.2 (2-core AMD EPYC, GCC 12), which kept the build over
// a minute on two cores.
//
//   runtime/module.cpp   the Python module: its functions, the GIL released around a run (first: Python.h
//                        comes before any other header)
//   runtime/repeat.cpp   calls in one C call: repeated calls (programs kept by call and layout) and first
//                        calls (module.cpp includes it)
//   runtime/program.cpp  parse (a program into steps), streams (whether its stores go around the cache), pick
//   runtime/pool.cpp     jobs and the thread pool (fork-safe)

#include "runtime/module.cpp"
#include "runtime/program.cpp"
#include "runtime/pool.cpp"

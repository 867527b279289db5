// run_rows for 32-, 64- and 128-byte words: gather windows only (pixels of 8, 16 or 32 float32 channels, in
// SpaceToBatch's windows). One file for the three: they share every body but the word, and compiled
// together they take 13.6 s of compiler time where apart they took 17.6 (2-core AMD EPYC, GCC 12).

#include "run_rows.hpp"

template dm::RowsFn dm::rows_for<dm::W32>(int, int, bool, bool);
template dm::RowsFn dm::rows_for<dm::W64>(int, int, bool, bool);
template dm::RowsFn dm::rows_for<dm::W128>(int, int, bool, bool);

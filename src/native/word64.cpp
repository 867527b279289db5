// run_rows for 64-byte words: gather windows only (pixels of 16 float32 channels).

#include "rows.hpp"

template dm::RowsFn dm::rows_for<dm::W64>(int, int, bool, bool);

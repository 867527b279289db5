// run_rows for 32-byte words: gather windows only (pixels of 8 float32 channels).

#include "rows.hpp"

template dm::RowsFn dm::rows_for<dm::W32>(int, int, bool, bool);

// run_rows for 128-byte words: gather windows only (pixels of 32 float32 channels).

#include "rows.hpp"

template dm::RowsFn dm::rows_for<dm::W128>(int, int, bool, bool);

// run_rows for 2-byte words, every pattern and block (a file a word: they compile in parallel).

#include "run_rows.hpp"

template dm::RowsFn dm::rows_for<uint16_t>(int, int, bool, bool);

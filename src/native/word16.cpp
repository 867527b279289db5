// run_rows for 16-byte words, every pattern and block (a file a word: they compile in parallel).

#include "run_rows.hpp"

template dm::RowsFn dm::rows_for<dm::W16>(int, int, bool, bool);

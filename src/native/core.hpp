// What the core's own files share: a program parsed into steps, whether it streams, and the jobs the
// thread pool runs.

#pragma once

#include "common.hpp"

namespace dm {

// The steps of a program (see common.hpp), their output bytes in `total`; false where it is malformed or
// where a step would read outside src's first `src_bytes` or write outside dst's first `dst_bytes` (from
// each array's lowest address).
bool parse(const int64_t* p, int64_t n, Step* steps, int nsteps, int64_t* total, int64_t src_bytes, int64_t dst_bytes);
// Whether a program streams (its steps' nt set): `registers`, only if every step streams from registers.
bool streams(Step* steps, int nsteps, const char* dst, bool registers = false);
// Steps that together fill dense units of output of up to kMergedWords words, a unit under each index of
// their first loop, which they share (BatchToSpace of small images with crops: its windows' rows): made
// one UNITS step, table_run (table_lines or table_words) from a table of the units' offsets. True where it did: steps[0] that step,
// *nsteps 1, *table for free_table once the program has run.
struct Table;
bool merge_units(Step* steps, int* nsteps, Table** table);
void free_table(Table* table);
// The tables of the UNITS steps a program gives (their entries after their loops): false where memory is
// short (then free_given_tables, and no run). free_given_tables frees them once the program has run.
bool given_tables(Step* steps, int nsteps);
void free_given_tables(Step* steps, int nsteps);
// The kernel of a step, plain or streamed.
RowsFn pick(const Step& st, bool stream);

struct Job {
    uint64_t generation;  // set by run_job: which job of the pool this is
    const Step* steps;
    int nsteps;
    int64_t total;  // the cost of all steps
    char* src;
    char* dst;
    bool stream;
    int parts;
    int pieces = 1;  // pieces a part is cut into (set by run_job): what an idle thread takes of another's part
};


// Runs a job on up to `threads` threads (the caller's and the pool's), each step's rows shared out.
void run_job(Job& job, int threads);
// Registers the pool's fork handler: once, when the module loads, before any job can hold the pool's
// lock (false where it cannot be registered: then every job runs on the caller's thread alone).
bool init_pool();
// The pool's started worker threads in this process (0 in a new fork).
int pool_workers();

}  // namespace dm

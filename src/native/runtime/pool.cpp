// The jobs and the thread pool that runs them.

#include "runtime.hpp"
#include "platform.hpp"

namespace dm {

// ------------------------------------------------------------------ jobs

// floor(total * p / parts) without overflow and without __int128 (which MSVC lacks), for 0 <= p <= parts.
inline int64_t share(int64_t total, int64_t p, int64_t parts) {
    return total / parts * p + total % parts * p / parts;
}

// Output bytes a piece of a program of several steps takes from every step in turn (see run_piece).
constexpr int64_t kBandCost = 256 << 10;
// A thread's part of a job is cut into up to kPiecesPerPart pieces of at least kPieceCost bytes of output,
// taken in turn (see take_pieces).
constexpr int64_t kPiecesPerPart = 4;
constexpr int64_t kPieceCost = 128 << 10;

// Piece p of `count` of the job: the share p / count of every step's rows. A program of several steps
// (windows and the fills of their padding, which write pieces of the same lines) takes its share in bands
// of about kBandCost, each band taking its rows of every step in turn, so that the steps' pieces of a line
// are written while it is in cache; step after step, each a pass over the whole output, fetched the lines
// once per step (5-D BatchToSpace with crops 0.78x -> 0.62x the copy floor; SpaceToBatch of 62 x 126
// images with pads 1.31x -> 0.98x; same process, in turns). One step stays one range: no run of its
// rows is cut at a band's edge.
void run_piece(const Job& job, int64_t p, int64_t count) {
    const int64_t bands = job.nsteps == 1 ? 1 : std::max<int64_t>(1, job.total / count / kBandCost);
    for (int64_t k = 0; k < bands; ++k)
        for (int s = 0; s < job.nsteps; ++s) {
            const Step& st = job.steps[s];
            const int64_t lo = share(st.rows, p, count), n = share(st.rows, p + 1, count) - lo;
            const int64_t r0 = lo + share(n, k, bands), r1 = lo + share(n, k + 1, bands);
            if (r0 < r1) st.fn(st, job.src, job.dst, r0, r1);
        }
}

// ------------------------------------------------------------------ the thread pool
// Workers spin a little (about 50 us) after a job, so back-to-back calls skip
// the wake-up, then sleep on a condition variable; one job runs at a time
// (callers queue on call_lock, with the GIL released). A forked child starts
// with no workers: the atfork handler resets the pool, and it grows again on
// the child's first call (platform.hpp: pthreads on POSIX, Windows' own threads
// and locks there, where there is no fork).
//
// The pool grows off the caller's path: a call that wants more workers starts one and goes on with its
// job; each new worker starts up to two more before it joins the job (a tree: 15 workers are 4 levels,
// not 15 thread creations one after another), and the job's parts left by workers not yet running are
// taken by the threads that are (take_pieces). Creating the workers one by one before posting the first
// job held a first call up by every pthread_create: 15 of them took 230-460 us on the 2-core machine.

struct alignas(64) Counter {  // a line of its own: the threads taking pieces do not pass one line to and fro
    std::atomic<int> v{0};
};

struct Pool {
    Lock call_lock;
    Lock lock;
    Condition go;
    Condition done;
    std::atomic<int> wanted{0};   // workers asked for: numbers 1..wanted
    std::atomic<int> claimed{0};  // numbers taken by a thread that starts that worker (maybe still starting)
    std::atomic<int> workers{0};  // started
    std::atomic<uint64_t> generation{0};  // bumped (under lock) after job and state are stored
    // The job's generation (from bit 17), whether it is closed to workers (bit 16), and how many workers
    // are in it (the low bits): a worker joins by one compare-and-swap, only while the job is open, and
    // the caller closes it once every piece is taken, then waits for those in it to leave.
    std::atomic<uint64_t> state{kClosed};
    std::atomic<const Job*> job{nullptr};
    Counter next[kMaxThreads];  // per part: its next piece not yet taken (reset by each job)
    static constexpr uint64_t kClosed = 1 << 16, kInside = kClosed - 1;
};

constexpr int kSpins = 4000;

Pool pool;

// Part p's pieces in turn, then, once they are all taken, what is left of the other parts: a thread that
// is not running (its core taken by another process, or not yet awake) leaves the rest of its part to the
// threads that are, instead of holding the call up by all of it. SpaceToDepth of 8 MiB with another
// process spinning on one of the two cores, same process, in turns, 200 calls each, three runs: median
// 747-991 us -> 595-687 us; with nothing else running, the suite's cases within noise.
void take_pieces(const Job& job, int p) {
    const int64_t count = (int64_t)job.parts * job.pieces;
    for (int d = 0; d < job.parts; ++d) {
        const int q = (p + d) % job.parts;
        for (int k; (k = pool.next[q].v.fetch_add(1, std::memory_order_relaxed)) < job.pieces;)
            run_piece(job, (int64_t)q * job.pieces + k, count);
    }
    if (job.stream) fence();
}

void start_workers(int most);

void worker_main(int index) {
    start_workers(2);
    // No generation seen yet: a new worker looks at the job open now (the one that started it) at once.
    uint64_t seen = 0;
    for (;;) {
        for (int k = 0; k < kSpins && pool.generation.load(std::memory_order_acquire) == seen; ++k) cpu_relax();
        if (pool.generation.load(std::memory_order_acquire) == seen) {
            pool.lock.lock();
            while (pool.generation.load(std::memory_order_acquire) == seen) pool.go.wait(pool.lock);
            pool.lock.unlock();
        }
        seen = pool.generation.load(std::memory_order_acquire);
        // A closed job may end (and its Job go) at any time: it is never read. An open one waits for the
        // workers that joined it, so it is the job stored now (maybe a later one than `seen`).
        uint64_t state = pool.state.load(std::memory_order_acquire);
        bool joined = false;
        while (!(state & Pool::kClosed) && !joined)
            joined = pool.state.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel, std::memory_order_acquire);
        if (!joined) continue;
        const Job* job = pool.job.load(std::memory_order_acquire);
        seen = std::max(seen, job->generation);
        if (index < job->parts) take_pieces(*job, index);
        state = pool.state.fetch_sub(1, std::memory_order_acq_rel) - 1;
        if ((state & Pool::kClosed) && !(state & Pool::kInside)) {  // the caller waits for the last one out
            pool.lock.lock();
            pool.done.signal();
            pool.lock.unlock();
        }
    }
}

void reset_after_fork() {
    // The child has one thread: the workers (and any job) stayed in the parent.
    new (&pool) Pool();
}

// Starts up to `most` of the workers wanted and not yet claimed, each numbered once whoever starts it.
// A number whose thread cannot be created stays taken: its part of each job goes to the other threads.
void start_workers(int most) {
    for (int k = 0; k < most; ++k) {
        int number = pool.claimed.load(std::memory_order_relaxed);
        do {
            if (number >= pool.wanted.load(std::memory_order_relaxed)) return;
        } while (!pool.claimed.compare_exchange_weak(number, number + 1, std::memory_order_relaxed));
        if (start_thread<worker_main>(number + 1)) pool.workers.fetch_add(1, std::memory_order_relaxed);
    }
}

// Whether the handler that resets the pool in a forked child is registered (init_pool; always, where
// there is no fork).
bool atfork_registered = false;

// Registered once, as the module loads: registered by a job's first call to grow() (under call_lock),
// a fork() landing between the lock and the registration left the child a locked call_lock and no
// handler to reset it, and its first threaded call waited forever.
bool init_pool() {
    if (!atfork_registered) atfork_registered = on_fork_child(reset_after_fork);
    return atfork_registered;
}

// Asks for `wanted` workers (under call_lock) and starts the first missing one; false where the fork
// handler is not registered (then no workers).
bool grow(int wanted) {
    if (!atfork_registered) return false;
    if (wanted > pool.wanted.load(std::memory_order_relaxed)) {
        pool.wanted.store(wanted, std::memory_order_relaxed);
        start_workers(1);
    }
    return true;
}

void run_job(Job& job, int threads) {
    const int64_t bytes = job.total;
    int parts = (int)std::min<int64_t>(threads, std::max<int64_t>(1, bytes / kBytesPerPart));
    if (parts <= 1) {
        job.parts = 1;
        run_piece(job, 0, 1);
        if (job.stream) fence();
        return;
    }
    pool.call_lock.lock();
    if (!grow(parts - 1)) parts = 1;
    job.parts = parts;
    job.pieces = (int)std::max<int64_t>(1, std::min<int64_t>(kPiecesPerPart, bytes / parts / kPieceCost));
    for (int q = 0; q < parts; ++q) pool.next[q].v.store(0, std::memory_order_relaxed);
    if (parts > 1) {
        pool.lock.lock();
        job.generation = pool.generation.load() + 1;
        pool.job.store(&job, std::memory_order_release);
        pool.state.store(job.generation << 17, std::memory_order_release);  // open, no worker in it
        pool.generation.store(job.generation, std::memory_order_release);
        pool.go.broadcast();
        pool.lock.unlock();
    }
    take_pieces(job, 0);
    if (parts > 1) {  // every piece is taken: close the job, then wait for the workers inside to finish theirs
        const uint64_t state = pool.state.fetch_or(Pool::kClosed, std::memory_order_acq_rel);
        if (state & Pool::kInside) {
            for (int k = 0; k < kSpins && (pool.state.load(std::memory_order_acquire) & Pool::kInside); ++k) cpu_relax();
            pool.lock.lock();
            while (pool.state.load(std::memory_order_acquire) & Pool::kInside) pool.done.wait(pool.lock);
            pool.lock.unlock();
        }
        pool.job.store(nullptr, std::memory_order_release);
    }
    pool.call_lock.unlock();
}


int pool_workers() { return pool.workers.load(std::memory_order_relaxed); }

}  // namespace dm

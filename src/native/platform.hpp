// The operating system under the thread pool (pool.cpp) and the module (module.cpp): a detached thread, a
// lock with its condition variables, the handler a forked child runs, the last-level cache's size.
//
// POSIX (Linux, macOS): pthreads, as the pool has always used them. Windows: its own threads, slim
// reader/writer locks and condition variables, whose static initializers let the pool stay one global
// constructed before any code runs, as pthreads' do; Windows has no fork, so no handler. (Not
// std::thread: its constructor reports a failed start by an exception, and the core is built without
// them, where the pool goes on without the thread that did not start.)

#pragma once

#if defined(_WIN32)
#ifndef NOMINMAX
#define NOMINMAX  // (windows.h's min and max macros would rewrite std::min and std::max)
#endif
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>
// (its near and far, defined as nothing, would erase names in the files runtime.cpp compiles with this one)
#undef near
#undef far
#else
#include <pthread.h>
#include <unistd.h>
#endif
#if defined(__APPLE__)
#include <sys/sysctl.h>
#include <sys/types.h>
#endif

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace dm {

#if defined(_WIN32)

struct Lock {
    SRWLOCK srw = SRWLOCK_INIT;
    void lock() { AcquireSRWLockExclusive(&srw); }
    void unlock() { ReleaseSRWLockExclusive(&srw); }
};

struct Condition {
    CONDITION_VARIABLE cv = CONDITION_VARIABLE_INIT;
    void wait(Lock& lock) { SleepConditionVariableSRW(&cv, &lock.srw, INFINITE, 0); }
    void signal() { WakeConditionVariable(&cv); }
    void broadcast() { WakeAllConditionVariable(&cv); }
};

template <void (*Main)(int)>
DWORD WINAPI thread_entry(LPVOID arg) {
    Main((int)(intptr_t)arg);
    return 0;
}

// Starts Main(arg) on a thread of its own, detached; false where it could not start.
template <void (*Main)(int)>
bool start_thread(int arg) {
    HANDLE thread = CreateThread(nullptr, 0, thread_entry<Main>, (LPVOID)(intptr_t)arg, 0, nullptr);
    if (thread == nullptr) return false;
    CloseHandle(thread);
    return true;
}

// Registers reset to run in a forked child: there is no fork on Windows, so nothing to register.
inline bool on_fork_child(void (*)()) { return true; }

#else

struct Lock {
    pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
    void lock() { pthread_mutex_lock(&mutex); }
    void unlock() { pthread_mutex_unlock(&mutex); }
};

struct Condition {
    pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
    void wait(Lock& lock) { pthread_cond_wait(&cond, &lock.mutex); }
    void signal() { pthread_cond_signal(&cond); }
    void broadcast() { pthread_cond_broadcast(&cond); }
};

template <void (*Main)(int)>
void* thread_entry(void* arg) {
    Main((int)(intptr_t)arg);
    return nullptr;
}

// Starts Main(arg) on a thread of its own, detached; false where it could not start.
template <void (*Main)(int)>
bool start_thread(int arg) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t thread;
    const bool started = pthread_create(&thread, &attr, thread_entry<Main>, (void*)(intptr_t)arg) == 0;
    pthread_attr_destroy(&attr);
    return started;
}

// Registers reset to run in a forked child (false where it cannot be).
inline bool on_fork_child(void (*reset)()) { return pthread_atfork(nullptr, nullptr, reset) == 0; }

#endif

// The size of the last-level cache instance cpu0 shares, from sysfs (0 when unknown): not sysconf's
// figure, which on AMD EPYC adds up every CCX's L3 (384 MiB where a core reaches 32 MiB).
inline long sysfs_last_level_cache() {
    long best_level = 0, best_size = 0;
    for (int index = 0; index < 16; ++index) {
        char path[96], text[64];
        long level = 0, size = 0;
        bool unified_or_data = false;
        for (int field = 0; field < 3; ++field) {
            static const char* names[3] = {"level", "type", "size"};
            std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/%s", index, names[field]);
            FILE* f = std::fopen(path, "r");
            if (f == nullptr) return best_size;  // no more indexes (or no sysfs)
            const bool got = std::fgets(text, sizeof text, f) != nullptr;
            std::fclose(f);
            if (!got) break;
            if (field == 0) level = std::strtol(text, nullptr, 10);
            if (field == 1) unified_or_data = std::strncmp(text, "Unified", 7) == 0 || std::strncmp(text, "Data", 4) == 0;
            if (field == 2) {
                char* end = nullptr;
                size = std::strtol(text, &end, 10);
                if (end && *end == 'K') size <<= 10;
                else if (end && *end == 'M') size <<= 20;
                else if (end && *end == 'G') size <<= 30;
            }
        }
        if (unified_or_data && (level > best_level || (level == best_level && size > best_size))) {
            best_level = level;
            best_size = size;
        }
    }
    return best_size;
}

// The size in bytes of the last-level cache instance a core shares, or 0 when unknown: sysfs, else
// sysconf (Linux); the largest data or unified cache of the highest level the OS lists (Windows: one
// instance's size); hw.l3cachesize, else hw.l2cachesize (macOS).
inline long long last_level_cache_bytes() {
    long long size = sysfs_last_level_cache();
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (size <= 0) size = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (size <= 0) size = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
#if defined(_WIN32)
    DWORD bytes = 0;
    GetLogicalProcessorInformation(nullptr, &bytes);
    auto* info = static_cast<SYSTEM_LOGICAL_PROCESSOR_INFORMATION*>(bytes ? std::malloc(bytes) : nullptr);
    if (info != nullptr && GetLogicalProcessorInformation(info, &bytes)) {
        long long best_level = 0;
        for (DWORD k = 0; k < bytes / sizeof *info; ++k) {
            if (info[k].Relationship != RelationCache) continue;
            const CACHE_DESCRIPTOR& cache = info[k].Cache;
            if (cache.Type != CacheUnified && cache.Type != CacheData) continue;
            if (cache.Level > best_level || (cache.Level == best_level && (long long)cache.Size > size)) {
                best_level = cache.Level;
                size = cache.Size;
            }
        }
    }
    std::free(info);
#endif
#if defined(__APPLE__)
    for (const char* name : {"hw.l3cachesize", "hw.l2cachesize"}) {
        int64_t value = 0;  // (4 or 8 bytes, little-endian either way)
        size_t length = sizeof value;
        if (size <= 0 && sysctlbyname(name, &value, &length, nullptr, 0) == 0 && (length == 4 || length == 8)) size = value;
    }
#endif
    return size > 0 ? size : 0;
}

}  // namespace dm

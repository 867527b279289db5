// What the CPU has, asked the same way under GCC, Clang and MSVC: the x86-64 features the core has kernels
// for (common.hpp's cpu_isa makes its level of them), and the hint a spinning thread gives the core.
//
// GCC and Clang ask their builtins (__builtin_cpu_supports: libgcc's or compiler-rt's reading of cpuid,
// the operating system's register state included). MSVC has no such builtin: it reads cpuid and XCR0
// itself (cpuid_features), by the same rules as libgcc: AVX2 only where the OS saves the YMM registers,
// AVX-512 only where it saves the ZMM and mask registers. tests/test_cross_compile.py compiles this file
// in clang's MSVC mode, and checks on this machine that cpuid_features agrees with the builtins.
// Elsewhere (aarch64) no feature: the core runs its portable path there.

#pragma once

#if defined(__x86_64__) || defined(_M_X64)
#define DM_X86_64 1
#if defined(_MSC_VER) && !defined(__GNUC__)  // MSVC, and clang-cl
#include <intrin.h>
#else
#include <cpuid.h>
#endif
#include <emmintrin.h>  // (_mm_pause)
#else
#define DM_X86_64 0
#if defined(_M_ARM64)
#include <intrin.h>  // (__yield)
#endif
#endif

namespace dm {

struct CpuFeatures {
    bool ssse3 = false, avx2 = false, avx512f = false, avx512bw = false, avx512vbmi = false;
};

#if DM_X86_64
// cpuid leaf `leaf`, subleaf `sub`: eax, ebx, ecx, edx.
inline void cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
#if defined(_MSC_VER) && !defined(__GNUC__)
    int regs[4];
    __cpuidex(regs, (int)leaf, (int)sub);
    for (int k = 0; k < 4; ++k) r[k] = (unsigned)regs[k];
#else
    __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
#endif
}

// XCR0: the register state the OS saves (asked only where cpuid says OSXSAVE).
inline unsigned long long xcr0() {
#if defined(_MSC_VER) && !defined(__GNUC__)
    return _xgetbv(0);
#else
    unsigned lo, hi;
    __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));  // (_xgetbv needs -mxsave in GCC)
    return ((unsigned long long)hi << 32) | lo;
#endif
}

// The features from cpuid itself (MSVC's way; under GCC and Clang, only tests call it).
inline CpuFeatures cpuid_features() {
    CpuFeatures has;
    unsigned r0[4], r1[4], r7[4] = {0, 0, 0, 0};
    cpuid(0, 0, r0);
    if (r0[0] < 1) return has;
    cpuid(1, 0, r1);
    if (r0[0] >= 7) cpuid(7, 0, r7);
    const unsigned long long state = (r1[2] >> 27) & 1 ? xcr0() : 0;  // OSXSAVE
    const bool ymm = (state & 0x6) == 0x6, zmm = (state & 0xe6) == 0xe6;
    has.ssse3 = (r1[2] >> 9) & 1;
    has.avx2 = ymm && ((r7[1] >> 5) & 1);
    has.avx512f = zmm && ((r7[1] >> 16) & 1);
    has.avx512bw = zmm && ((r7[1] >> 30) & 1);
    has.avx512vbmi = zmm && ((r7[2] >> 1) & 1);
    return has;
}
#endif

// The features the core picks its level from.
inline CpuFeatures cpu_features() {
#if DM_X86_64 && defined(__GNUC__)
    __builtin_cpu_init();
    CpuFeatures has;
    has.ssse3 = __builtin_cpu_supports("ssse3");
    has.avx2 = __builtin_cpu_supports("avx2");
    has.avx512f = __builtin_cpu_supports("avx512f");
    has.avx512bw = __builtin_cpu_supports("avx512bw");
    has.avx512vbmi = __builtin_cpu_supports("avx512vbmi");
    return has;
#elif DM_X86_64
    return cpuid_features();
#else
    return CpuFeatures();
#endif
}

// A spinning thread's pause: the core's other hardware thread runs, and the spin's exit costs no
// pipeline flush (x86 pause, Arm yield).
inline void cpu_relax() {
#if DM_X86_64
    _mm_pause();
#elif defined(__aarch64__) && defined(__GNUC__)
    __asm__ __volatile__("yield");
#elif defined(_M_ARM64)
    __yield();
#endif
}

}  // namespace dm

// What the core's objects, compiled by g++, need of libstdc++'s shared library, for a manylinux wheel that
// tools/manylinux_wheel.py links with zig against glibc 2.17 and zig's own static libc++abi, without
// libstdc++.so: linked into that wheel's core only, and not exported (the link's version script exports
// PyInit__native alone), so nothing here interposes on a libstdc++ another module of the process loaded.
//
// Without it the wheel's core kept these symbols undefined and needed nothing that defines them: it loaded
// only in a process where something else (NumPy) had loaded libstdc++ already, and never on a glibc older
// than 2.32 (__libc_single_threaded). tests/test_install.py loads it in a process without libstdc++.
//
// Each definition does what libstdc++'s does (GCC's src/c++11/hashtable_c++0x.cc, functexcept.cc), except
// that the throws abort: the core is compiled with -fno-exceptions, where an uncaught throw terminates too.

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

// glibc 2.32's flag: libstdc++'s headers skip atomic reference counts while it is nonzero. Zero is
// "threads may exist", always true of the core, which runs a thread pool.
extern "C" char __libc_single_threaded = 0;

namespace std {

void __throw_length_error(const char* what) {
    std::fprintf(stderr, "datamove: length_error: %s\n", what);
    std::abort();
}

void __throw_bad_array_new_length() {
    std::fputs("datamove: bad_array_new_length\n", stderr);
    std::abort();
}

namespace __detail {

// The least prime >= n (libstdc++'s is the least of its table of primes; any count >= n is a valid one, a
// prime keeps the buckets of hash % count even), and the element count that makes the next rehash.
std::size_t _Prime_rehash_policy::_M_next_bkt(std::size_t n) const {
    std::size_t p = n < 2 ? 2 : n;
    for (;; ++p) {
        bool prime = p == 2 || p % 2;
        for (std::size_t d = 3; prime && d <= p / d; d += 2)
            prime = p % d != 0;
        if (prime)
            break;
    }
    _M_next_resize = static_cast<std::size_t>(__builtin_floor(p * static_cast<double>(_M_max_load_factor)));
    return p;
}

std::pair<bool, std::size_t> _Prime_rehash_policy::_M_need_rehash(std::size_t n_bkt, std::size_t n_elt,
                                                                         std::size_t n_ins) const {
    if (n_elt + n_ins <= _M_next_resize)
        return {false, 0};
    // _M_next_resize 0: nothing allocated yet, and the first bucket count is 11
    std::size_t wanted = n_elt + n_ins;
    if (!_M_next_resize && wanted < 11)
        wanted = 11;
    double min_bkts = wanted / static_cast<double>(_M_max_load_factor);
    if (min_bkts >= n_bkt) {
        std::size_t floor_plus_one = static_cast<std::size_t>(__builtin_floor(min_bkts)) + 1;
        std::size_t grown = n_bkt * _S_growth_factor;
        return {true, _M_next_bkt(floor_plus_one > grown ? floor_plus_one : grown)};
    }
    _M_next_resize = static_cast<std::size_t>(__builtin_floor(n_bkt * static_cast<double>(_M_max_load_factor)));
    return {false, 0};
}

}  // namespace __detail
}  // namespace std

/* The largest element count of a matrix test: its own default, or
 * LOOM_TEST_LARGE_COUNT where that is set and larger than 1023 (the next
 * count down). `make check` sets it smaller (Makefile.am; `make check-full`
 * and the GPU suite run the default): the host-side fills and checks of
 * 2^20 elements per call were most of the suite's MPI time, most of all
 * under the sanitizers. */
#ifndef LOOM_TEST_LARGE_COUNT_H
#define LOOM_TEST_LARGE_COUNT_H

#include <stdlib.h>

static inline size_t large_count(size_t dflt)
{
    const char *e = getenv("LOOM_TEST_LARGE_COUNT");
    const long v = e ? atol(e) : 0;
    return v > 1023 ? (size_t)v : dflt;
}

#endif

/*
 * The host's monotonic clock, for C and C++ alike: the one reading behind
 * loom's timeouts and LOOM_PROFILE's phases.
 */
#ifndef LOOM_BASE_MONO_CLOCK_H
#define LOOM_BASE_MONO_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t loomMonotonicNs(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static inline double loomMonotonicSeconds(void) { return (double)loomMonotonicNs() * 1e-9; }

#endif

/* This process's resident set (VmRSS of /proc/self/status) in KiB, -1 if
 * unknown: what the leak checks of the MPI and GPU tests compare. */
#ifndef LOOM_TEST_RSS_H
#define LOOM_TEST_RSS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof(line), f))
        if (!strncmp(line, "VmRSS:", 6)) kib = atol(line + 6);
    if (f) fclose(f);
    return kib;
}

#endif

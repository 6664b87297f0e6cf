/*
 * Every tunable of loom in one table (param_table.cc): its MCA parameter
 * (coll_loom_<name>, registered by the component with this help text and
 * range), its LOOM_* environment variable, its type, default and range. Core
 * code reads tunables only through it (params.h); docs/parameters.md's parameter
 * table is generated from it (a unit test fails when they differ). C, so the
 * component can walk it.
 */
#ifndef LOOM_PARAM_TABLE_H
#define LOOM_PARAM_TABLE_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { LOOM_PARAM_INT = 0, LOOM_PARAM_STRING = 1 } loomParamType;

typedef struct {
    const char *name;  /* MCA parameter coll_loom_<name> */
    const char *env;   /* environment variable */
    loomParamType type;
    long def, lo, hi;  /* integers: default and range */
    const char *shown; /* the default as docs/parameters.md and ompi_info show it */
    const char *help;
    int agreed; /* 1: every rank of a communicator must hold it alike (it shapes
                 * the connections or the choice of algorithm): checked when
                 * the communicator is made, and the error names it */
} loomParamDef;

int loomParamCount(void);
const loomParamDef *loomParamAt(int i);

/* The agreed tunables (agreed = 1), in table order: at most this many. */
#define LOOM_MAX_AGREED 48
int loomAgreedCount(void);
const loomParamDef *loomAgreedAt(int i);
/* Index of `env` among them, or -1. */
int loomAgreedIndex(const char *env);
/* What this rank holds for each, one word each (integers: the value as core
 * reads it; strings: a hash of the value, 0 when unset). */
void loomAgreedWords(unsigned long long out[LOOM_MAX_AGREED]);
/* An integer tunable's value as loom's core reads it (its environment value,
 * else the default; a bad value warns once and gives the default). */
long loomParamLong(const char *env);

#ifdef __cplusplus
}
#endif

#endif

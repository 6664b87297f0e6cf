/*
 * One numbering of loom's collectives, for every layer: the component's
 * calls, core's entry points, selection and its registry, the kernels'
 * arguments and schedules, and the logs. C and C++ (the component is C).
 */
#ifndef LOOM_BASE_COLL_H
#define LOOM_BASE_COLL_H

typedef enum loomColl {
    /* The table collectives: the algorithm registry's (with their ragged forms). */
    loomCollAllReduce = 0,
    loomCollReduceScatter = 1,
    loomCollAllGather = 2,
    loomCollBroadcast = 3,
    loomCollReduce = 4,
    /* The exchange (alltoall(v, w), gather(v), scatter(v)) and the scans. */
    loomCollAllToAll = 5,
    loomCollScan = 6,
    loomCollExScan = 7,
    loomCollCount = 8
} loomColl;

/* How many table collectives there are (they come first). */
#define LOOM_TABLE_COLLS 5

/* Its name in logs and errors. */
static inline const char *loomCollName(int coll)
{
    static const char *const names[loomCollCount] = {"allreduce", "reduce_scatter", "allgather", "broadcast",
                                                     "reduce",    "alltoall",       "scan",      "exscan"};
    return coll >= 0 && coll < loomCollCount ? names[coll] : "?";
}

#endif

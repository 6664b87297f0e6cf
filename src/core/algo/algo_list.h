/*
 * The table collectives' algorithms, in the order selection tries them
 * (core/algo/registry.h): LOOM_ALGORITHM(its number's name, its entry),
 * the entry defined in the algorithm's own file. Included where the list is
 * expanded (the Algo enum in select.h, kRegistry in registry.cc), with
 * LOOM_ALGORITHM defined there: no include guard on purpose.
 */
LOOM_ALGORITHM(kAlgoZeroCopy, kZeroCopyAlgo)          // allreduce from mapped user buffers inside a host
LOOM_ALGORITHM(kAlgoOneShot, kOneShotAlgo)            // one-shot LL inside a host
LOOM_ALGORITHM(kAlgoRecursiveDoubling, kRdAlgo)       // allreduce across hosts
LOOM_ALGORITHM(kAlgoTrees, kTreesAlgo)                // allreduce across hosts
LOOM_ALGORITHM(kAlgoDoubling, kDoublingAlgo)          // bcast, reduce, allgather, reduce_scatter across hosts
LOOM_ALGORITHM(kAlgoRingLL128, kRingLL128Algo)        // the ring on LL128 (NVLink only)
LOOM_ALGORITHM(kAlgoRingLL, kRingLLAlgo)              // the ring on LL
LOOM_ALGORITHM(kAlgoRing, kRingAlgo)                  // the ring (chains for bcast and reduce) on Simple

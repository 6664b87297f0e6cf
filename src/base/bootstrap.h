/*
 * Collectives over the caller's bootstrap (MPI's allgather in the component),
 * for communicator creation. Every rank calls each of them in the same order,
 * also after a local failure: that is what keeps a failing rank from leaving
 * its peers waiting forever.
 */
#pragma once

#include <string>
#include <vector>

#include "loom.h"

namespace loom {

// All ranks learn whether every rank's `local` step succeeded. Returns `local`
// if it failed, loomRemoteError (naming the first failed rank and `stage`) if
// another rank failed, loomSuccess if all succeeded.
loomResult_t agreeAll(const loomBootstrap_t *bs, int rank, int nranks, loomResult_t local, const char *stage);

// Allgather of one string per rank (sizes first, then padded texts).
loomResult_t allgatherStrings(const loomBootstrap_t *bs, int rank, int nranks, const std::string &mine,
                              std::vector<std::string> *all);

} // namespace loom

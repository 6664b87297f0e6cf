#include "base/bootstrap.h"

#include <cstdint>
#include <cstring>

#include "base/debug.h"

namespace loom {

loomResult_t agreeAll(const loomBootstrap_t *bs, int rank, int nranks, loomResult_t local, const char *stage) {
    int32_t mine = (int32_t)local;
    std::vector<int32_t> all(nranks);
    if (bs->allgather(bs->ctx, &mine, all.data(), sizeof(mine)) != 0)
        return fail(loomRemoteError, "rank %d: bootstrap exchange failed during %s", rank, stage);
    if (local != loomSuccess) return local;
    for (int r = 0; r < nranks; ++r)
        if (all[r] != loomSuccess)
            return fail(loomRemoteError, "rank %d: rank %d failed during %s (%s)", rank, r, stage,
                        loomGetErrorString((loomResult_t)all[r]));
    return loomSuccess;
}

loomResult_t allgatherStrings(const loomBootstrap_t *bs, int rank, int nranks, const std::string &mine,
                              std::vector<std::string> *all) {
    uint64_t len = mine.size(), maxLen = 0;
    std::vector<uint64_t> lens(nranks);
    if (bs->allgather(bs->ctx, &len, lens.data(), sizeof(len)) != 0)
        return fail(loomRemoteError, "rank %d: bootstrap allgather of string sizes failed", rank);
    for (uint64_t l : lens) maxLen = l > maxLen ? l : maxLen;
    std::vector<char> send(maxLen + 1, 0), recv((maxLen + 1) * nranks);
    memcpy(send.data(), mine.data(), mine.size());
    if (bs->allgather(bs->ctx, send.data(), recv.data(), maxLen + 1) != 0)
        return fail(loomRemoteError, "rank %d: bootstrap allgather of strings failed", rank);
    all->resize(nranks);
    for (int r = 0; r < nranks; ++r) (*all)[r].assign(&recv[(maxLen + 1) * r], lens[r]);
    return loomSuccess;
}

} // namespace loom

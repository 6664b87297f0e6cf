/*
 * How the tree allreduce cuts its data (host and kernel must cut alike):
 * tree t takes half t, in pieces of 64 bytes so the halves stay 16-byte
 * aligned, cut into chunks of one slot. Shared by host (core) and device code.
 */
#pragma once

#include <stddef.h>

#include "device/ring/ring_schedule.h"
#include "device/edges/tree_schedule.h"

namespace loom {

LOOM_HD void treeHalf(size_t count, size_t elemBytes, int tree, size_t *begin, size_t *end) {
    channelRange(count, 2, tree, 64 / elemBytes ? 64 / elemBytes : 1, begin, end);
}

} // namespace loom

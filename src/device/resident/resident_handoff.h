/*
 * The resident kernel's hand-off rules (resident_coll.cu), shared with their
 * CPU model (test/unit/test_resident_handoff.cc). CTA 0 writes each call of
 * several CTAs onto the device mailbox's head as LL lines tagged with the
 * call's sequence number, and a leave command the same way; every other CTA
 * polls the head with one warp, one line per lane.
 *
 * Invariants the model checks:
 *  - a CTA takes a head only when every flag of every head line carries
 *    line 0's tag (each line is one 16-byte store: data and flags arrive
 *    together, but lines arrive in any order), so it never runs half of one
 *    call and half of the next;
 *  - it takes a tag only once (tag != the last it took), and tags are never
 *    0, so a zeroed mailbox is no call;
 *  - CTA 0 writes call s + 1 only after every CTA call s needs is done with
 *    it (dev->finished), so those CTAs read call s whole; CTAs it does not
 *    need may see any mix, and skip what they take;
 *  - the leave command's tag is one past the last call CTA 0 took: newer
 *    than any tag a CTA holds, so every CTA takes it and leaves.
 */
#pragma once

#include <stdint.h>

#include "device/host_device.h"
#include "device/resident/resident_args.h"

namespace loom {

// Whether a head line whose flags are f0, f1 carries `tag` whole.
LOOM_HD bool residentLineCarries(uint32_t f0, uint32_t f1, uint32_t tag) {
    return f0 == tag && f1 == tag;
}

// Whether a CTA that last took `last` takes a head tagged `tag` (all of its
// lines agreeing): 0 is nothing handed on yet.
LOOM_HD bool residentTagIsNew(uint32_t tag, uint32_t last) { return tag != 0 && tag != last; }

// Whether CTA `cta` runs a call handed on to `ctas` CTAs (the others skip it).
LOOM_HD bool residentCtaNeeded(unsigned cta, unsigned ctas) { return cta < ctas; }

// The leave command's tag, after `lastTaken`, the last call CTA 0 took
// (handed on or not; the launch's lastSeq when none).
LOOM_HD uint32_t residentLeaveTag(uint32_t lastTaken) { return residentNext(lastTaken); }

} // namespace loom

/*
 * The time model behind the selection table (select.cc): for a call it
 * predicts each algorithm's time as
 *
 *     t = alpha0 + alpha1 x (ranks - 1) + bytes on a rank's busiest link / bw
 *
 * where the link bytes are 2 (n - 1) / n x the buffer for the ring and the
 * zero-copy two-shot, and 2 (n - 1) x the buffer for one-shot LL (every rank
 * writes its input to every peer as LL lines, twice its size). The constants
 * are fitted to loom alone, blocking calls, on 4x H200 (NV18) at 2, 3 and 4
 * ranks, 8 B - 1 GiB (contrib/bench/results/2026-11-27_h200x4_model_*.csv;
 * the fit's largest error: one-shot 6%, zero-copy 12%, ring 18%; a unit test
 * checks the model against those files).
 *
 * Where the model applies (allreduce, one host, every pair of GPUs mapped),
 * selection takes the fastest predicted algorithm among those whose rules
 * allow the call (sizes that fit their slots, LOOM_ALGO, the zero-copy
 * bounds); elsewhere the table's order decides, as before. The constants are
 * this machine's: on slower links (PCIe) the crossovers move, which the
 * model does not know yet.
 */
#pragma once

#include "core/comm.h"

namespace loom {

struct CallShape; // select.h

// Predicted microseconds of `algo` (select.h's Algo) for the call, or a
// negative number where the model has no constants for it.
double predictUs(const loomComm *comm, const CallShape &s, int algo);

} // namespace loom

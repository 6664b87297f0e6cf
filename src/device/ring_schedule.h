/*
 * The ring allreduce schedule: which chunk a rank sends, reduces or copies at
 * each step, and which elements a chunk covers. Compiled for host and device:
 * the kernel follows it, and the CPU simulation (test/unit) executes it over
 * host buffers for 1..64 ranks, so schedule bugs are caught before a GPU runs.
 *
 * Data layout: the count is split into per-channel ranges; a channel walks its
 * range in rounds of nranks chunks of chunkElems; one chunk = one FIFO slot.
 * A round is reduce-scatter then allgather, 2 * (nranks - 1) sends per rank.
 */
#ifndef LOOM_RING_SCHEDULE_H
#define LOOM_RING_SCHEDULE_H

#include <stddef.h>

#ifdef __CUDACC__
#define LOOM_HD __host__ __device__ __forceinline__
#else
#define LOOM_HD inline
#endif

namespace loom {

struct RingStep {
    int chunk;     // chunk index within the round, 0..nranks-1
    bool recv;     // take the chunk from the previous rank's slot
    bool reduce;   // combine it with this rank's input
    bool send;     // pass the result to the next rank
    bool toOutput; // write the result to the output buffer
};

// Steps of one round: 0 .. 2 * nranks - 2.
LOOM_HD int ringStepsPerRound(int nranks) { return 2 * nranks - 1; }
// Slots each rank sends (and receives) per round.
LOOM_HD int ringSendsPerRound(int nranks) { return 2 * (nranks - 1); }

LOOM_HD int ringMod(int a, int n) { return ((a % n) + n) % n; }

// Step s of a round, for the rank at ring position pos (nranks >= 2).
LOOM_HD RingStep ringAllreduceStep(int pos, int nranks, int s) {
    RingStep st;
    if (s == 0) { // send own input of chunk pos-1
        st.chunk = ringMod(pos - 1, nranks);
        st.recv = false; st.reduce = false; st.send = true; st.toOutput = false;
    } else if (s < nranks) { // reduce-scatter; s == nranks-1 completes chunk pos
        st.chunk = ringMod(pos - 1 - s, nranks);
        st.recv = true; st.reduce = true; st.send = true; st.toOutput = (s == nranks - 1);
    } else { // allgather of the completed chunks
        st.chunk = ringMod(pos - (s - nranks + 1), nranks);
        st.recv = true; st.reduce = false; st.send = (s < 2 * nranks - 2); st.toOutput = true;
    }
    return st;
}

// Elements [begin, end) of channel ch when count elements are split over
// nchannels (each range a multiple of `align` elements, except the last).
LOOM_HD void channelRange(size_t count, int nchannels, int ch, size_t align, size_t *begin, size_t *end) {
    size_t per = (count + nchannels - 1) / nchannels;
    per = (per + align - 1) / align * align;
    size_t b = per * (size_t)ch, e = b + per;
    *begin = b < count ? b : count;
    *end = e < count ? e : count;
}

// Rounds a channel needs for n elements.
LOOM_HD size_t ringRounds(size_t n, int nranks, size_t chunkElems) {
    size_t perRound = (size_t)nranks * chunkElems;
    return (n + perRound - 1) / perRound;
}

// Chunk size for a channel range of n elements: a full slot for large ranges,
// otherwise 1/nranks of the range (rounded up to `align`) so that every rank
// owns a share and the ring works in parallel even when there is one round.
LOOM_HD size_t ringChunkElems(size_t n, int nranks, size_t slotElems, size_t align) {
    size_t share = (n + nranks - 1) / nranks;
    share = (share + align - 1) / align * align;
    if (share == 0) share = align;
    return share < slotElems ? share : slotElems;
}

// Elements [off, off + len) of chunk `chunk` in round `round` of a channel
// range of n elements (relative to the range's start); len may be 0.
LOOM_HD void ringChunk(size_t n, int nranks, size_t chunkElems, size_t round, int chunk, size_t *off,
                       size_t *len) {
    size_t o = (round * (size_t)nranks + (size_t)chunk) * chunkElems;
    *off = o;
    *len = o >= n ? 0 : (n - o < chunkElems ? n - o : chunkElems);
}

} // namespace loom

#endif

/*
 * One of the communicator's rings as this rank sees it. The topology may
 * give several distinct rings (across hosts with several NICs, ring k enters
 * each host at the GPU nearest NIC k); channel c runs on ring c % nrings, so
 * each ring has its own order, this rank's place on it, its two neighbours
 * and its own connections to them. Channel c's FIFOs stay at index c of a
 * p2p region or shm segment (every channel's layout is kept there), and at
 * index c / nrings of the ring's net links (which hold its channels only).
 */
#pragma once

#include <string>
#include <vector>

#include "btl_gpu/net/net_transport.h"
#include "btl_gpu/shm/shm.h"
#include "device/fifo.h"

namespace loom {

struct RingLink {
    std::vector<int> order;      // the rank at each ring position
    std::vector<int> posOf;      // the ring position of each rank
    int pos = 0, prev = 0, next = 0; // this rank's position and neighbours
    int nchannels = 0;           // channels on this ring: index, index + nrings, ... below maxChannels
    int handleBase = 0;          // its first channel's place in the net handle table (rings in order)
    std::string recvNic, sendNic; // the topology's NIC where the ring enters / leaves this host ("": nearest)
    bool recvShm = false, sendShm = false; // which connections go through host memory
    bool recvNet = false, sendNet = false; // which connections cross hosts (net transport + proxy)
    // Per protocol area ([kProtoSimple], [kProtoLL], [kProtoLL128]; null where
    // that protocol has none on this connection), each laid out as
    // channels x [FifoFlags + slots]:
    char *recvArea[kNumRingProtos] = {};      // my receive FIFO (my region, my shm segment, or my net link's)
    char *prevCreditArea[kNumRingProtos] = {}; // where I grant the previous rank credit
    char *sendArea[kNumRingProtos] = {};      // the next rank's receive FIFO (mapped region, its shm, or my net link's)
    char *creditArea[kNumRingProtos] = {};    // where my credit arrives
    // Where the slots of recvArea/sendArea are (same layout): the areas
    // themselves, except net FIFOs with GPUDirect RDMA (slots in GPU memory).
    char *recvSlotBase[kNumRingProtos] = {};
    char *sendSlotBase[kNumRingProtos] = {};
    NetLinks netRecv, netSend;   // across hosts: one link each way (each on its own NIC)
    ShmSegment shmRecv;          // created here when the previous rank cannot reach my GPU
    ShmSegment shmSend;          // the next rank's, when my GPU cannot reach it
    int *orderDev = nullptr, *posOfDev = nullptr; // order and posOf in device memory

    bool usesNet() const { return recvNet || sendNet; }
    // Channel c of this ring's: its index in the ring's own net links.
    static int netIndex(int c, int nrings) { return c / nrings; }
};

} // namespace loom

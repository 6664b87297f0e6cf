// A peer that dies, through loom's C API with a fork-based launcher (no
// mpirun to tear the job down):
//   test/gpu/dead_peer [p2p|shm|net|hosts|resident] [SEED]
//
// The launcher forks one process per GPU (up to 4); they meet through an
// allgather over shared memory, create a communicator and run 64 MiB
// allreduces back to back. Once every rank has finished a few, the launcher
// kills the last rank with SIGKILL. With a SEED (> 0) the ranks run a mix
// instead (allreduce, broadcast, allgather, reduce_scatter, reduce; 16 KiB,
// 1 MiB or 64 MiB, roots moving), and the kill comes at a point the seed
// picks: after 3 to 12 calls, 0 to 20 ms into the next. With loom's default settings (no
// LOOM_TIMEOUT: the watchdog, core/ras/watchdog.h, finds the death) every
// survivor's loomCommWait must return loomProcFailed within 5 s whose
// message names the dead rank; loomCommDestroy must then return (within
// 35 s), and no shared-memory object of the job may be left in /dev/shm.
// LOOM_GPU_SHARING=1: 3 ranks even on fewer GPUs (they share them). Under
// CUDA MPS, net and hosts (pretend hosts on one GPU) may see the death as a
// fault in every client's kernels: an error saying so passes there.
//   p2p: GPUs map each other's memory; shm: LOOM_P2P_DISABLE=1 (FIFOs in
//   host shared memory); net: every rank a host of its own
//   (LOOM_FAKE_NODES=1, ucx over loopback TCP); hosts: net with an arrival
//   board per pretend host (LOOM_ARRIVAL_PER_HOST=1), so the survivors name
//   the victim from its host's silence (core/ras/arrival_query.h); resident: p2p with 16 KiB
//   allreduces, which the resident kernel runs on 4 CTAs (core/stream/resident.h).
// Exit status 0: passed, 77: skipped (fewer than 2 GPUs), else failed.
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <new>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <cuda_runtime.h>

#include "loom.h"

namespace {

constexpr int kMaxRanks = 4;
constexpr size_t kGatherBytes = 256 << 10; // per rank and parity
constexpr double kWithin = 5;              // seconds from the death to the survivors' error
size_t g_count = 16u << 20;                // floats per allreduce (64 MiB: each call takes a while)
unsigned g_seed = 0;                       // > 0: mixed collectives, a kill point of the seed's

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Shared by the launcher and its ranks (an anonymous shared mapping made
// before the fork).
struct Shared {
    int nranks;
    std::atomic<int> ngpus;
    std::atomic<int> mps; // GPU 0 is shared through CUDA MPS
    std::atomic<unsigned> arrived[kMaxRanks]; // allgathers each rank has entered
    std::atomic<int> calls[kMaxRanks];        // allreduces each rank has finished
    double failedAt[kMaxRanks];               // when loomCommWait returned an error (0: never)
    int result[kMaxRanks];                    // ... which loomResult_t
    double destroySeconds[kMaxRanks];
    char error[kMaxRanks][1024];
    char data[2][kMaxRanks][kGatherBytes];
};
Shared *g_sh;

struct Rank {
    int rank;
    unsigned gen = 0;
};

// The bootstrap: an allgather through the shared mapping. Generation g
// writes parity g % 2; a rank entering g + 1 has seen every rank enter g,
// so no one still reads the parity it overwrites. A rank that never comes
// (dead) fails it after 60 s.
int allgather(void *ctx, const void *send, void *recv, size_t bytes) {
    Rank *me = static_cast<Rank *>(ctx);
    if (bytes > kGatherBytes) return 1;
    const unsigned g = ++me->gen, p = g % 2;
    memcpy(g_sh->data[p][me->rank], send, bytes);
    g_sh->arrived[me->rank].store(g, std::memory_order_release);
    for (int q = 0; q < g_sh->nranks; ++q)
        for (double end = now() + 60; g_sh->arrived[q].load(std::memory_order_acquire) < g;) {
            if (now() > end) return 1;
            std::this_thread::yield();
        }
    for (int q = 0; q < g_sh->nranks; ++q) memcpy(static_cast<char *>(recv) + q * bytes, g_sh->data[p][q], bytes);
    return 0;
}

int rankMain(int rank, loomUniqueId id) {
    const int dev = rank % g_sh->ngpus;
    if (cudaSetDevice(dev) != cudaSuccess) return 2;
    Rank me{rank};
    loomBootstrap_t bs{&me, allgather, nullptr};
    loomComm_t comm = nullptr;
    if (loomCommInitRank(&comm, g_sh->nranks, id, rank, dev, &bs) != loomSuccess) {
        snprintf(g_sh->error[rank], sizeof(g_sh->error[rank]), "init: %s", loomGetLastError());
        return 3;
    }
    const size_t n = g_count;
    const int nr = g_sh->nranks;
    float *buf = nullptr, *out = nullptr;
    if (cudaMalloc((void **)&buf, n * sizeof(float)) != cudaSuccess) return 4;
    if (cudaMalloc((void **)&out, n * sizeof(float)) != cudaSuccess) return 4;
    cudaMemset(buf, 0, n * sizeof(float));
    cudaDeviceSynchronize();
    for (int call = 1; call <= 100000; ++call) {
        loomResult_t r;
        if (!g_seed) {
            r = loomAllReduce(buf, buf, n, loomFloat32, loomSum, comm, nullptr);
        } else { // every rank picks the same call: it depends on the call and the seed only
            const size_t sizes[3] = {4096, 256u << 10, n}, pick = sizes[(call + g_seed) % 3];
            const size_t c = pick < n ? pick : n;
            const int root = (int)((call + g_seed) % (unsigned)nr);
            switch ((call + g_seed / 3) % 5) {
            case 0: r = loomAllReduce(buf, buf, c, loomFloat32, loomSum, comm, nullptr); break;
            case 1: r = loomBroadcast(buf, buf, c, loomFloat32, root, comm, nullptr); break;
            case 2: r = loomAllGather(buf, out, c / nr, loomFloat32, comm, nullptr); break;
            case 3: r = loomReduceScatter(buf, out, c / nr, loomFloat32, loomSum, comm, nullptr); break;
            default: r = loomReduce(buf, out, c, loomFloat32, loomSum, root, comm, nullptr); break;
            }
        }
        if (r == loomSuccess) r = loomCommWait(comm);
        if (r != loomSuccess) {
            g_sh->failedAt[rank] = now();
            g_sh->result[rank] = r;
            snprintf(g_sh->error[rank], sizeof(g_sh->error[rank]), "%s: %s", loomGetErrorString(r), loomGetLastError());
            break;
        }
        g_sh->calls[rank].store(call);
    }
    const double t0 = now();
    loomCommDestroy(comm);
    cudaFree(out);
    g_sh->destroySeconds[rank] = now() - t0;
    return 0;
}

// GPUs, counted in a child (CUDA must not start in the launcher before it forks).
int countGpus() {
    pid_t pid = fork();
    if (pid == 0) {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
        int mps = 0;
        if (n > 0 && cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, 0) != cudaSuccess) mps = 0;
        g_sh->mps = mps;
        g_sh->ngpus = n;
        _exit(0);
    }
    waitpid(pid, nullptr, 0);
    return g_sh->ngpus;
}

// /dev/shm objects named after one of these processes (loom's names carry the creator's pid).
int leftovers(const pid_t *pids, int n) {
    int found = 0;
    if (DIR *d = opendir("/dev/shm")) {
        while (dirent *e = readdir(d))
            for (int k = 0; k < n; ++k) {
                const std::string name = e->d_name;
                if (name.rfind("loom-", 0) == 0 && (name.find("-" + std::to_string(pids[k]) + "-") != std::string::npos)) {
                    printf("left behind: /dev/shm/%s\n", name.c_str());
                    ++found;
                }
            }
        closedir(d);
    }
    return found;
}

} // namespace

int main(int argc, char **argv) {
    const std::string mode = argc > 1 ? argv[1] : "p2p";
    g_seed = argc > 2 ? (unsigned)strtoul(argv[2], nullptr, 10) : 0;
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    if (mode == "shm") setenv("LOOM_P2P_DISABLE", "1", 1);
    else if (mode == "resident") g_count = 4096; // 16 KiB: 4 CTAs of the resident kernel
    else if (mode == "net" || mode == "hosts") {
        // hosts: an arrival board per pretend host, as on a cluster: the
        // survivors learn of the victim by asking its host (nobody answers).
        if (mode == "hosts") setenv("LOOM_ARRIVAL_PER_HOST", "1", 1);
        setenv("LOOM_FAKE_NODES", "1", 1);
        setenv("LOOM_NET", "ucx", 1);
        setenv("UCX_TLS", "tcp", 1);
        setenv("UCX_NET_DEVICES", "lo", 1);
    } else if (mode != "p2p") {
        fprintf(stderr, "usage: %s [p2p|shm|net|hosts|resident]\n", argv[0]);
        return 2;
    }
    void *m = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return 2;
    g_sh = new (m) Shared();
    const int ngpus = countGpus();
    const char *sharing = getenv("LOOM_GPU_SHARING");
    const bool share = sharing && atoi(sharing) == 1;
    if (ngpus < 1 || (ngpus < 2 && !share)) {
        printf("SKIP: dead_peer %s needs 2 CUDA GPUs (or LOOM_GPU_SHARING=1 and one), found %d; on a GPU host run: "
               "test/gpu/run.sh BUILDDIR\n", mode.c_str(), ngpus);
        return 77;
    }
    const int n = share ? 3 : ngpus < kMaxRanks ? ngpus : kMaxRanks, victim = n - 1;
    const bool mpsShared = g_sh->mps && ngpus < n && (mode == "net" || mode == "hosts");
    if (mpsShared)
        printf("%s: ranks share a GPU through CUDA MPS as pretend hosts: a CUDA error that says MPS is accepted "
               "in place of the victim's name\n", mode.c_str());
    g_sh->nranks = n;
    loomUniqueId id;
    loomGetUniqueId(&id);
    pid_t pids[kMaxRanks];
    for (int r = 0; r < n; ++r) {
        pids[r] = fork();
        if (pids[r] == 0) _exit(rankMain(r, id));
    }
    // Every rank a few calls in, then the victim goes, mid-collective (with
    // a seed: after 3 to 12 calls, 0 to 20 ms later).
    const int before = g_seed ? 3 + (int)(g_seed * 7 % 10) : 3;
    const useconds_t delay = g_seed ? (useconds_t)(g_seed * 2654435761u % 20000) : 3000;
    bool running = false;
    for (double end = now() + 120; !running && now() < end; usleep(1000)) {
        running = true;
        for (int r = 0; r < n; ++r) running &= g_sh->calls[r].load() >= before;
    }
    int failures = 0;
    if (!running) {
        printf("FAIL: the ranks did not get %d calls in within 120 s\n", before);
        for (int r = 0; r < n; ++r) printf("  rank %d: %d calls %s\n", r, g_sh->calls[r].load(), g_sh->error[r]);
        for (int r = 0; r < n; ++r) kill(pids[r], SIGKILL);
        for (int r = 0; r < n; ++r) waitpid(pids[r], nullptr, 0);
        return 1;
    }
    usleep(delay);
    const double killedAt = now();
    kill(pids[victim], SIGKILL);
    waitpid(pids[victim], nullptr, 0);
    printf("%s%s: %d ranks; rank %d (pid %d) killed after %d calls\n", mode.c_str(), g_seed ? " (mixed)" : "", n,
           victim, (int)pids[victim], g_sh->calls[victim].load());
    // Survivors: an error naming the victim in time, then a destroy that returns.
    const double deadline = now() + kWithin + 40;
    for (int r = 0; r < victim; ++r) {
        int st = -1;
        while (waitpid(pids[r], &st, WNOHANG) == 0 && now() < deadline) usleep(10000);
        if (now() >= deadline && waitpid(pids[r], &st, WNOHANG) == 0) {
            kill(pids[r], SIGKILL);
            waitpid(pids[r], &st, 0);
            printf("FAIL: rank %d hung (killed)\n", r);
            ++failures;
            continue;
        }
        const double after = g_sh->failedAt[r] ? g_sh->failedAt[r] - killedAt : -1;
        const bool named = strstr(g_sh->error[r], ("rank " + std::to_string(victim) + " ").c_str()) != nullptr;
        // Pretend hosts sharing one GPU through MPS (never so on a cluster):
        // the victim's death may come as a fault in every client's kernels
        // (MPS's error containment), which must then be said as such.
        const bool mpsFault = mpsShared && g_sh->result[r] == loomUnhandledCudaError &&
                              strstr(g_sh->error[r], "CUDA MPS client") != nullptr;
        const bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0 && after >= 0 && after <= kWithin &&
                        ((named && g_sh->result[r] == loomProcFailed) || mpsFault) && g_sh->destroySeconds[r] < 35;
        printf("%s rank %d: error after %.1f s, destroy %.1f s, exit %d: %s\n", ok ? "ok  " : "FAIL", r, after,
               g_sh->destroySeconds[r], WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), g_sh->error[r]);
        failures += !ok;
    }
    const int left = leftovers(pids, n);
    if (left) ++failures;
    printf("%s: %s\n", mode.c_str(), failures ? "FAILED" : "passed");
    return failures ? 1 : 0;
}

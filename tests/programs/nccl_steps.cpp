// Test program for NCCL collectives, run against the GPU simulator's libnccl.so.2 (tests/gpusim/nccl):
// "training steps" of an all-reduce, an all-gather, a reduce-scatter, a broadcast and a send/recv
// group on one stream, then a stream synchronize (the step boundary) and a 1 ms sleep.
//
//   nccl_steps [--steps N] [--ranks R] [--count C] [--go-file F] [--until-file F]
//
// Prints "ready <pid>", waits for F if given, then sets up CUDA and makes the communicator
// (ncclGetUniqueId, ncclCommInitRank: R ranks, this process's rank is $RANK if set, else 0; the
// simulated communicator needs no other process), and runs N steps (default 100000), or until the
// --until-file exists. Each step, on one created stream:
//   ncclAllReduce      C floats (ncclFloat32, ncclSum)
//   ncclAllGather      C/R bf16 per rank (ncclBfloat16)
//   ncclReduceScatter  recvcount C/R floats (ncclFloat32, ncclSum)
//   ncclBroadcast      C bytes (ncclUint8, root 0)
//   ncclGroupStart; ncclSend C/2 floats to peer (rank+1)%R; ncclRecv C/2 floats from it; ncclGroupEnd
//   and on a second communicator of 2 ranks (this one rank%2), made with ncclCommInitRankScalable
//   (NCCL 2.28+, as PyTorch 2.15 may):
//   ncclAlltoAll       C/(8R) floats to each rank
//   ncclGather         C/(16R) floats to root 0;  ncclScatter alike
//   cudaStreamSynchronize
// Defaults: C = 1<<20, R = 4. At the end prints "GTRACE_NCCL {json}": every NCCL call made, by name,
// with its calls and the bytes per call as nccl-tests counts them (AllReduce, Broadcast, Reduce,
// Send, Recv: count*size; AllGather: sendcount*size*nranks; ReduceScatter: recvcount*size*nranks;
// AlltoAll, Gather, Scatter: count*size*nranks of their communicator), the kernels the library
// launched by name, the steps, the first communicator's nranks and rank.
#include <nccl.h>
static_assert(NCCL_VERSION_CODE == GTSIM_NCCL_VERSION_CODE, "not the nccl.h CMake chose (tests/gpusim/CMakeLists.txt)");
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

namespace {

bool exists(const std::string& f) {
    struct stat st;
    return !f.empty() && stat(f.c_str(), &st) == 0;
}

struct Tally {
    struct Call {
        long calls = 0;
        size_t bytes = 0;
    };
    std::map<std::string, Call> calls;
    std::map<std::string, long> kernels;
    long failed = 0;

    void check(const char* name, ncclResult_t r, size_t bytes = 0) {
        Call& c = calls[name];
        ++c.calls;
        c.bytes = bytes;
        if (r != ncclSuccess && failed++ == 0) fprintf(stderr, "nccl_steps: %s: %s\n", name, ncclGetErrorString(r));
    }
    void check_cuda(const char* name, cudaError_t e) {
        if (e != cudaSuccess && failed++ == 0) fprintf(stderr, "nccl_steps: %s: %s\n", name, cudaGetErrorString(e));
    }
};

void print(const Tally& t, int nranks, int rank, long steps, size_t count) {
    std::string calls, kernels;
    const char* sep = "";
    for (const auto& [name, c] : t.calls) {
        calls += std::string(sep) + "\"" + name + "\":{\"calls\":" + std::to_string(c.calls) +
                 ",\"bytes\":" + std::to_string(c.bytes) + "}";
        sep = ",";
    }
    sep = "";
    for (const auto& [name, n] : t.kernels) {
        kernels += std::string(sep) + "\"" + name + "\":" + std::to_string(n);
        sep = ",";
    }
    printf("GTRACE_NCCL {\"pid\":%d,\"nranks\":%d,\"rank\":%d,\"steps\":%ld,\"count\":%zu,\"calls\":{%s},"
           "\"kernels\":{%s},\"failed\":%ld}\n",
           getpid(), nranks, rank, steps, count, calls.c_str(), kernels.c_str(), t.failed);
    fflush(stdout);
}

} // namespace

int main(int argc, char** argv) {
    long steps = 100000;
    int nranks = 4;
    size_t count = size_t(1) << 20;
    std::string go, until;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        const char* next = i + 1 < argc ? argv[i + 1] : "";
        if (a == "--steps") steps = atol(next), ++i;
        else if (a == "--ranks") nranks = atoi(next), ++i;
        else if (a == "--count") count = size_t(strtoull(next, nullptr, 10)), ++i;
        else if (a == "--go-file") go = next, ++i;
        else if (a == "--until-file") until = next, ++i;
        else {
            fprintf(stderr, "nccl_steps: unknown option %s (see the comment at the top of nccl_steps.cpp)\n", a.c_str());
            return 2;
        }
    }
    if (nranks < 1 || count < size_t(16 * nranks)) {
        fprintf(stderr, "nccl_steps: need --ranks >= 1 and --count >= 16 * ranks\n");
        return 2;
    }
    const char* env_rank = getenv("RANK");
    int rank = env_rank ? atoi(env_rank) : 0;
    if (rank < 0 || rank >= nranks) rank = 0;
    printf("ready %d\n", getpid());
    fflush(stdout);
    while (!go.empty() && !exists(go)) usleep(2000);

    Tally t;
    cudaStream_t stream = nullptr;
    void *a = nullptr, *b = nullptr;
    t.check_cuda("cudaSetDevice", cudaSetDevice(0));
    t.check_cuda("cudaStreamCreate", cudaStreamCreate(&stream));
    t.check_cuda("cudaMalloc", cudaMalloc(&a, count * 4));
    t.check_cuda("cudaMalloc", cudaMalloc(&b, count * 4));

    int version = 0;
    t.check("ncclGetVersion", ncclGetVersion(&version));
    ncclUniqueId id;
    t.check("ncclGetUniqueId", ncclGetUniqueId(&id));
    ncclComm_t comm = nullptr;
    t.check("ncclCommInitRank", ncclCommInitRank(&comm, nranks, id, rank));
    int comm_ranks = 0;
    t.check("ncclCommCount", ncclCommCount(comm, &comm_ranks));
    ncclUniqueId pair_id;
    t.check("ncclGetUniqueId", ncclGetUniqueId(&pair_id));
    ncclComm_t pair = nullptr;
    const int pair_ranks = 2;
    t.check("ncclCommInitRankScalable", ncclCommInitRankScalable(&pair, pair_ranks, rank % pair_ranks, 1, &pair_id, nullptr));
    if (t.failed) {
        print(t, comm_ranks, rank, 0, count);
        return 1;
    }

    const size_t shard = count / size_t(nranks), half = count / 2;
    const size_t to_each = count / size_t(8 * nranks), gathered = count / size_t(16 * nranks);
    const int peer = (rank + 1) % nranks;
    long s = 0;
    for (; s < steps && !exists(until); ++s) {
        t.check("ncclAllReduce", ncclAllReduce(a, b, count, ncclFloat32, ncclSum, comm, stream), count * 4);
        t.kernels["ncclDevKernel_AllReduce_Sum_f32_RING_LL"]++;
        t.check("ncclAllGather", ncclAllGather(a, b, shard, ncclBfloat16, comm, stream), shard * 2 * size_t(nranks));
        t.kernels["ncclDevKernel_AllGather_RING_LL"]++;
        t.check("ncclReduceScatter", ncclReduceScatter(a, b, shard, ncclFloat32, ncclSum, comm, stream),
                shard * 4 * size_t(nranks));
        t.kernels["ncclDevKernel_ReduceScatter_Sum_f32_RING_LL"]++;
        t.check("ncclBroadcast", ncclBroadcast(a, b, count, ncclUint8, 0, comm, stream), count);
        t.kernels["ncclDevKernel_Broadcast_RING_LL"]++;
        t.check("ncclGroupStart", ncclGroupStart());
        t.check("ncclSend", ncclSend(a, half, ncclFloat32, peer, comm, stream), half * 4);
        t.check("ncclRecv", ncclRecv(b, half, ncclFloat32, peer, comm, stream), half * 4);
        t.check("ncclGroupEnd", ncclGroupEnd());
        t.kernels["ncclDevKernel_SendRecv"]++;
        // The 2.30 wheel's fatbin has no AlltoAll, Gather or Scatter kernel: they run as p2p.
        t.check("ncclAlltoAll", ncclAlltoAll(a, b, to_each, ncclFloat32, pair, stream), to_each * 4 * pair_ranks);
        t.kernels["ncclDevKernel_SendRecv"]++;
        t.check("ncclGather", ncclGather(a, b, gathered, ncclFloat32, 0, pair, stream), gathered * 4 * pair_ranks);
        t.kernels["ncclDevKernel_SendRecv"]++;
        t.check("ncclScatter", ncclScatter(a, b, gathered, ncclFloat32, 0, pair, stream), gathered * 4 * pair_ranks);
        t.kernels["ncclDevKernel_SendRecv"]++;
        t.check_cuda("cudaStreamSynchronize", cudaStreamSynchronize(stream));
        usleep(1000);
    }

    t.check("ncclCommDestroy", ncclCommDestroy(comm));
    t.check("ncclCommDestroy", ncclCommDestroy(pair));
    t.check_cuda("cudaFree", cudaFree(a));
    t.check_cuda("cudaFree", cudaFree(b));
    t.check_cuda("cudaStreamDestroy", cudaStreamDestroy(stream));
    print(t, comm_ranks, rank, s, count);
    return t.failed ? 1 : 0;
}

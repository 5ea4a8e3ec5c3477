// libnccl.so.2 for tests: NCCL's public API, declared by the real nccl.h of the nvidia-nccl wheel,
// on the GPU simulator's runtime. Every rule modelled here is written down, with its source, in
// nccl/README.md; the comments below name the rule they implement.
#include <nccl.h>
static_assert(NCCL_VERSION_CODE == GTSIM_NCCL_VERSION_CODE, "not the nccl.h CMake chose (tests/gpusim/CMakeLists.txt)");

#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

// --- kernels -------------------------------------------------------------------------------------
// NCCL 2.19+'s device kernels, one host stub each, named as in the real library (its fatbin's
// symbol table, src/device/generate.py): `__global__ void ncclDevKernel_<name>(ncclDevKernelArgs4K
// const)`, so the stub's mangled name is the one CUPTI reports for the real kernel, e.g.
// _Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE. Exported: the
// simulator names a runtime launch by dladdr() of its host function.
template <size_t capacity>
struct alignas(16) ncclDevKernelArgsStorage {
    char storage[capacity];
};
typedef ncclDevKernelArgsStorage<(4 << 10)> ncclDevKernelArgs4K;

namespace {
// Each stub stores its own address, so no two have the same code (identical code folding would
// otherwise be free to merge them into one symbol).
const void* volatile g_stub_ran = nullptr;
} // namespace

#define GTSIM_NCCL_KERNEL(name)                                                                       \
    __attribute__((visibility("default"), noinline)) void ncclDevKernel_##name(ncclDevKernelArgs4K const) { \
        g_stub_ran = reinterpret_cast<const void*>(&ncclDevKernel_##name);                          \
    }
#define GTSIM_NCCL_ADDRESS(name) reinterpret_cast<const void*>(&ncclDevKernel_##name),
// The reducing collectives have one kernel per element type, always `Sum` and RING_LL
// (generate.py's best_kernel; signed integers use the unsigned kernel).
#define GTSIM_NCCL_TYPED(F, coll)                                                                     \
    F(coll##_Sum_u8_RING_LL) F(coll##_Sum_u32_RING_LL) F(coll##_Sum_u64_RING_LL) F(coll##_Sum_f16_RING_LL) \
    F(coll##_Sum_f32_RING_LL) F(coll##_Sum_f64_RING_LL) F(coll##_Sum_bf16_RING_LL)                  \
    F(coll##_Sum_f8e4m3_RING_LL) F(coll##_Sum_f8e5m2_RING_LL)

GTSIM_NCCL_TYPED(GTSIM_NCCL_KERNEL, AllReduce)
GTSIM_NCCL_TYPED(GTSIM_NCCL_KERNEL, ReduceScatter)
GTSIM_NCCL_TYPED(GTSIM_NCCL_KERNEL, Reduce)
GTSIM_NCCL_KERNEL(AllGather_RING_LL)
GTSIM_NCCL_KERNEL(Broadcast_RING_LL)
GTSIM_NCCL_KERNEL(SendRecv)

// The communicator: in-process, talks to no one.
struct ncclComm {
    uint64_t magic;
    int nRanks;
    int rank;
    int cudaDev;
    ncclUniqueId id;
};

namespace {

constexpr uint64_t kCommMagic = 0x677473696d6e636cULL; // "gtsimncl"
constexpr uint64_t kBusBytesPerBlock = 1024;           // the duration rule (README): one block per KiB
constexpr unsigned kThreads = 512;                     // NCCL_LL_MAX_NTHREADS

enum Coll { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kReduce, kSend, kRecv, kAlltoAll, kGather, kScatter };

// The calls whose count is per rank: their size is count x typesize x nRanks (nccl.h; README).
bool per_rank_count(Coll c) { return c == kAllGather || c == kReduceScatter || c == kAlltoAll || c == kGather || c == kScatter; }

const void* const kTypedKernels[3][9] = {
    {GTSIM_NCCL_TYPED(GTSIM_NCCL_ADDRESS, AllReduce)},
    {GTSIM_NCCL_TYPED(GTSIM_NCCL_ADDRESS, ReduceScatter)},
    {GTSIM_NCCL_TYPED(GTSIM_NCCL_ADDRESS, Reduce)},
};

// ncclDataType_t -> the kernel's type column (u8 u32 u64 f16 f32 f64 bf16 f8e4m3 f8e5m2), size.
int type_column(ncclDataType_t t) {
    static const int column[ncclNumTypes] = {0, 0, 1, 1, 2, 2, 3, 4, 5, 6, 7, 8};
    return column[t];
}
uint64_t type_size(ncclDataType_t t) {
    static const uint64_t size[ncclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
    return size[t];
}

const void* kernel_for(Coll coll, ncclDataType_t t) {
    switch (coll) {
    case kAllReduce: return kTypedKernels[0][type_column(t)];
    case kReduceScatter: return kTypedKernels[1][type_column(t)];
    case kReduce: return kTypedKernels[2][type_column(t)];
    case kAllGather: return reinterpret_cast<const void*>(&ncclDevKernel_AllGather_RING_LL);
    case kBroadcast: return reinterpret_cast<const void*>(&ncclDevKernel_Broadcast_RING_LL);
    default: return reinterpret_cast<const void*>(&ncclDevKernel_SendRecv);
    }
}

// Bytes a rank moves on the bus for one call (nccl-tests doc/PERFORMANCE.md): `size` as nccl-tests
// counts it, times its bus factor; with one rank, the local copy of `size`.
uint64_t bus_bytes(Coll coll, uint64_t size, int n) {
    if (n <= 1) return size;
    unsigned __int128 s = size;
    switch (coll) {
    case kAllReduce: return uint64_t(s * unsigned(2 * (n - 1)) / unsigned(n));
    case kAllGather:
    case kReduceScatter:
    case kAlltoAll:
    case kGather:
    case kScatter: return uint64_t(s * unsigned(n - 1) / unsigned(n));
    default: return size; // Broadcast, Reduce, Send, Recv
    }
}

struct Op {
    Coll coll;
    ncclComm* comm;
    cudaStream_t stream;
    const void* kernel;
    uint64_t bus;
};

// Group state is per thread (NCCL src/group.cc: ncclGroupDepth, ncclGroupError are thread_local).
thread_local int t_depth = 0;
thread_local ncclResult_t t_group_error = ncclSuccess;
thread_local std::vector<Op> t_queue;
thread_local char t_last_error[1024] = "";

__attribute__((format(printf, 2, 3))) ncclResult_t fail(ncclResult_t r, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_last_error, sizeof t_last_error, fmt, ap);
    va_end(ap);
    return r;
}

// The kernel of one call or one group's batch: its duration is the simulator's
// GTSIM_KERNEL_BASE_NS + GTSIM_KERNEL_NS_PER_BLOCK * grid, grid = ceil(bus bytes / 1 KiB).
ncclResult_t launch(const void* kernel, cudaStream_t stream, uint64_t bus) {
    static ncclDevKernelArgs4K args{};
    uint64_t blocks = (bus + kBusBytesPerBlock - 1) / kBusBytesPerBlock;
    if (blocks < 1) blocks = 1;
    if (blocks > uint64_t(INT_MAX)) blocks = uint64_t(INT_MAX); // CUDA's gridDim.x limit
    void* params[] = {&args};
    cudaError_t e = cudaLaunchKernel(kernel, dim3(unsigned(blocks)), dim3(kThreads), params, 0, stream);
    if (e != cudaSuccess) return fail(ncclUnhandledCudaError, "Cuda failure '%s'", cudaGetErrorString(e));
    return ncclSuccess;
}

ncclResult_t check_comm(const ncclComm* comm, const char* opname) {
    if (!comm) return fail(ncclInvalidArgument, "%s : comm argument is NULL", opname);
    if (comm->magic != kCommMagic) return fail(ncclInvalidArgument, "Error: corrupted comm object detected");
    return ncclSuccess;
}

// NCCL src/misc/argcheck.cc ArgsCheck: root (peer for send/recv), datatype, built-in op.
ncclResult_t check_args(const ncclComm* comm, const char* opname, ncclDataType_t type, ncclRedOp_t op, int root) {
    if (ncclResult_t r = check_comm(comm, opname)) return r;
    if (root < 0 || root >= comm->nRanks)
        return fail(ncclInvalidArgument, "%s : invalid root %d (root should be in the 0..%d range)", opname, root,
                    comm->nRanks);
    if (int(type) < 0 || int(type) >= int(ncclNumTypes))
        return fail(ncclInvalidArgument, "%s : invalid type %d", opname, int(type));
    if (int(op) < 0 || int(op) >= int(ncclNumOps)) // no ncclRedOpCreatePreMulSum here: no user ops
        return fail(ncclInvalidArgument, "%s : invalid reduction operation %d", opname, int(op));
    return ncclSuccess;
}

// Every call is an implicit group (NCCL src/enqueue.cc ncclEnqueueCheck): outside a group it
// launches at once; inside, it is queued for the outermost ncclGroupEnd, and an error is kept as
// the group's (ncclGroupErrCheck).
ncclResult_t enqueue(Coll coll, const char* opname, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                     ncclComm* comm, cudaStream_t stream) {
    ncclResult_t r = check_args(comm, opname, type, op, root);
    if (r == ncclSuccess) {
        // AllGather's sendcount, ReduceScatter's recvcount, AlltoAll's, Gather's and Scatter's
        // count are per rank (nccl.h).
        uint64_t size = count * type_size(type) * (per_rank_count(coll) ? unsigned(comm->nRanks) : 1u);
        Op o{coll, comm, stream, kernel_for(coll, type), bus_bytes(coll, size, comm->nRanks)};
        if (t_depth == 0) return launch(o.kernel, o.stream, o.bus);
        t_queue.push_back(o);
    }
    if (r != ncclSuccess && t_depth > 0) t_group_error = r;
    return r;
}

// The outermost ncclGroupEnd: one kernel per (communicator, stream), in order of first use, moving
// the sum of its ops' bus bytes, named after its first collective (else SendRecv).
ncclResult_t launch_group() {
    std::vector<Op> ops;
    ops.swap(t_queue);
    ncclResult_t r = t_group_error;
    t_group_error = ncclSuccess;
    std::vector<bool> done(ops.size(), false);
    for (size_t i = 0; r == ncclSuccess && i < ops.size(); ++i) {
        if (done[i]) continue;
        const void* kernel = nullptr;
        uint64_t bus = 0;
        for (size_t j = i; j < ops.size(); ++j) {
            if (done[j] || ops[j].comm != ops[i].comm || ops[j].stream != ops[i].stream) continue;
            done[j] = true;
            bus += ops[j].bus;
            if (!kernel && ops[j].coll != kSend && ops[j].coll != kRecv) kernel = ops[j].kernel;
        }
        r = launch(kernel ? kernel : reinterpret_cast<const void*>(&ncclDevKernel_SendRecv), ops[i].stream, bus);
    }
    return r;
}

void make_unique_id(ncclUniqueId* out) {
    static std::atomic<uint64_t> next{1};
    memset(out, 0, sizeof *out);
    uint64_t words[3] = {kCommMagic, uint64_t(getpid()), next.fetch_add(1)};
    memcpy(out->internal, words, sizeof words);
}

ncclResult_t init_rank(ncclComm_t* newcomm, int nranks, const ncclUniqueId& id, int rank, int dev, const char* opname) {
    if (!newcomm) return fail(ncclInvalidArgument, "%s : newcomm argument is NULL", opname);
    *newcomm = nullptr;
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return fail(ncclInvalidArgument, "Invalid rank requested : %d/%d", rank, nranks);
    if (dev < 0) {
        // The communicator's device is the caller's current one (ncclCommInitRank's contract).
        if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess)
            return fail(ncclUnhandledCudaError, "Cuda failure '%s'", cudaGetErrorString(e));
    }
    auto* c = new (std::nothrow) ncclComm{kCommMagic, nranks, rank, dev, id};
    if (!c) return fail(ncclSystemError, "%s : out of memory", opname);
    *newcomm = c;
    return ncclSuccess;
}

ncclResult_t destroy(ncclComm_t comm) {
    if (!comm) return ncclSuccess; // NCCL src/init.cc: destroying NULL succeeds
    if (ncclResult_t r = check_comm(comm, "ncclCommDestroy")) return r;
    comm->magic = 0;
    delete comm;
    return ncclSuccess;
}

ncclResult_t query(const ncclComm* comm, int* out, int value, const char* opname) {
    if (ncclResult_t r = check_comm(comm, opname)) return r;
    if (!out) return fail(ncclInvalidArgument, "%s : out argument is NULL", opname);
    *out = value;
    return ncclSuccess;
}

} // namespace

// --- the API ---------------------------------------------------------------------------------------
// Exported as the real library exports it (NCCL src/include/core.h, NCCL_API with PROFAPI): the
// function defined weak under its name, the profiling name pnccl<Name> a strong alias of it, so
// `nm -D` shows `W ncclAllReduce` and `T pncclAllReduce` at one address.
#define NCCL_API(ret, func, args...)                                                                \
    extern "C" __attribute__((visibility("default"))) __attribute__((alias(#func))) ret p##func(args); \
    extern "C" __attribute__((visibility("default"))) __attribute__((weak)) ret func(args)

NCCL_API(ncclResult_t, ncclGetVersion, int* version);
ncclResult_t ncclGetVersion(int* version) {
    if (!version) return fail(ncclInvalidArgument, "ncclGetVersion : version argument is NULL");
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* out);
ncclResult_t ncclGetUniqueId(ncclUniqueId* out) {
    if (!out) return fail(ncclInvalidArgument, "ncclGetUniqueId : out argument is NULL");
    make_unique_id(out);
    return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t* newcomm, int nranks, ncclUniqueId commId, int myrank);
ncclResult_t ncclCommInitRank(ncclComm_t* newcomm, int nranks, ncclUniqueId commId, int myrank) {
    return init_rank(newcomm, nranks, commId, myrank, -1, "ncclCommInitRank");
}

NCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId, int myrank,
         ncclConfig_t* config);
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int myrank, ncclConfig_t* config) {
    // NCCL src/init.cc parseCommConfig: a config not made by NCCL_CONFIG_INITIALIZER is refused.
    if (config && config->magic != NCCL_API_MAGIC)
        return fail(ncclInvalidArgument, "ncclConfig_t argument not initialized via NCCL_CONFIG_INITIALIZER");
    return init_rank(comm, nranks, commId, myrank, -1, "ncclCommInitRankConfig");
}

NCCL_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank, int nId,
         ncclUniqueId* commIds, ncclConfig_t* config);
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                      ncclConfig_t* config) {
    // NCCL src/init.cc ncclCommInitRankScalable: at least one id, and the ids given.
    if (nId < 1 || !commIds) return fail(ncclInvalidArgument, "ncclCommInitRankScalable : invalid nId %d or commIds", nId);
    if (config && config->magic != NCCL_API_MAGIC)
        return fail(ncclInvalidArgument, "ncclConfig_t argument not initialized via NCCL_CONFIG_INITIALIZER");
    return init_rank(newcomm, nranks, commIds[0], myrank, -1, "ncclCommInitRankScalable");
}

NCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comms, int ndev, const int* devlist);
ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
    if (!comms) return fail(ncclInvalidArgument, "ncclCommInitAll : comms argument is NULL");
    if (ndev < 1) return fail(ncclInvalidArgument, "Invalid device count requested : %d", ndev);
    int total = 0;
    if (cudaError_t e = cudaGetDeviceCount(&total); e != cudaSuccess)
        return fail(ncclUnhandledCudaError, "Cuda failure '%s'", cudaGetErrorString(e));
    for (int i = 0; devlist && i < ndev; ++i)
        if (devlist[i] < 0 || devlist[i] >= total)
            return fail(ncclInvalidArgument, "Invalid device %d (totalnDev=%d)", devlist[i], total);
    ncclUniqueId id;
    make_unique_id(&id);
    for (int i = 0; i < ndev; ++i) {
        if (ncclResult_t r = init_rank(&comms[i], ndev, id, i, devlist ? devlist[i] : i, "ncclCommInitAll")) {
            for (int j = 0; j < i; ++j) destroy(comms[j]), comms[j] = nullptr;
            return r;
        }
    }
    return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm) { return destroy(comm); }

NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm) { return destroy(comm); }

NCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
    return query(comm, count, comm ? comm->nRanks : 0, "ncclCommCount");
}

NCCL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
    return query(comm, device, comm ? comm->cudaDev : 0, "ncclCommCuDevice");
}

NCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
    return query(comm, rank, comm ? comm->rank : 0, "ncclCommUserRank");
}

// The real library's strings (src/init.cc); a table, not a switch: no jump table in the function.
NCCL_API(const char*, ncclGetErrorString, ncclResult_t code);
const char* ncclGetErrorString(ncclResult_t code) {
    static const char* const text[] = {
        "no error",                                                          // ncclSuccess
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",       // ncclUnhandledCudaError
        "unhandled system error (run with NCCL_DEBUG=INFO for details)",     // ncclSystemError
        "internal error - please report this issue to the NCCL developers",  // ncclInternalError
        "invalid argument (run with NCCL_DEBUG=WARN for details)",           // ncclInvalidArgument
        "invalid usage (run with NCCL_DEBUG=WARN for details)",              // ncclInvalidUsage
        "remote process exited or there was a network error",                // ncclRemoteError
        "NCCL operation in progress",                                        // ncclInProgress
        "timeout",                                                           // ncclTimeout
    };
    static_assert(sizeof text / sizeof *text == ncclNumResults);
    return unsigned(code) < ncclNumResults ? text[code] : "unknown result code";
}

NCCL_API(const char*, ncclGetLastError, ncclComm_t comm);
const char* ncclGetLastError(ncclComm_t) { return t_last_error; }

NCCL_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllReduce(const void*, void*, size_t count, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
    return enqueue(kAllReduce, "AllReduce", count, datatype, op, 0, comm, stream);
}

NCCL_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
         ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllGather(const void*, void*, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm,
                           cudaStream_t stream) {
    return enqueue(kAllGather, "AllGather", sendcount, datatype, ncclSum, 0, comm, stream);
}

NCCL_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void*, void*, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
    return enqueue(kReduceScatter, "ReduceScatter", recvcount, datatype, op, 0, comm, stream);
}

NCCL_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void*, void*, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
    return enqueue(kBroadcast, "Broadcast", count, datatype, ncclSum, root, comm, stream);
}

NCCL_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
         cudaStream_t stream);
ncclResult_t ncclBcast(void*, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
    return enqueue(kBroadcast, "Broadcast", count, datatype, ncclSum, root, comm, stream);
}

NCCL_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduce(const void*, void*, size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream) {
    return enqueue(kReduce, "Reduce", count, datatype, op, root, comm, stream);
}

NCCL_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSend(const void*, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream) {
    return enqueue(kSend, "Send", count, datatype, ncclSum, peer, comm, stream);
}

NCCL_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
         cudaStream_t stream);
ncclResult_t ncclRecv(void*, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream) {
    return enqueue(kRecv, "Recv", count, datatype, ncclSum, peer, comm, stream);
}

NCCL_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAlltoAll(const void*, void*, size_t count, ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
    return enqueue(kAlltoAll, "AlltoAll", count, datatype, ncclSum, 0, comm, stream);
}

NCCL_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
         ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclGather(const void*, void*, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream) {
    return enqueue(kGather, "Gather", count, datatype, ncclSum, root, comm, stream);
}

NCCL_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
         ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclScatter(const void*, void*, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                         cudaStream_t stream) {
    return enqueue(kScatter, "Scatter", count, datatype, ncclSum, root, comm, stream);
}

NCCL_API(ncclResult_t, ncclGroupStart);
ncclResult_t ncclGroupStart() { return ++t_depth, ncclSuccess; }

// NCCL src/group.cc ncclGroupEndInternal: not in a group is ncclInvalidUsage; only the outermost
// End launches; an error of a call in the group is the group's, and its ops are dropped.
NCCL_API(ncclResult_t, ncclGroupEnd);
ncclResult_t ncclGroupEnd() {
    if (t_depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd: not in a group call.");
    if (--t_depth > 0) return ncclSuccess;
    return launch_group();
}

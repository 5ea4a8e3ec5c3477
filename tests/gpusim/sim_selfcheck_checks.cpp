// gpusim_selfcheck: checks of the main workload's callbacks, records and GTSIM_LOG lines.
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "sim_selfcheck.h"

namespace selfcheck {
namespace {

struct Op {
    const char* kind;
    uint32_t corr, stream;
    uint64_t start, end;
};

const char* copy_dir(uint8_t kind) {
    switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
    default: return "?";
    }
}

int64_t mono_minus_real() {
    timespec r, m;
    clock_gettime(CLOCK_REALTIME, &r);
    clock_gettime(CLOCK_MONOTONIC, &m);
    return (int64_t(m.tv_sec) - int64_t(r.tv_sec)) * 1000000000LL + (m.tv_nsec - r.tv_nsec);
}

void check_kernels(const std::vector<Launch>& launches, Collected& c, Calls& k) {
    std::map<uint32_t, const CUpti_ActivityKernel10*> by_corr;
    for (auto& r : c.kernels) by_corr[r.correlationId] = &r;
    CHECK(by_corr.size() == c.kernels.size());
    CHECK(c.kernels.size() == launches.size());
    CHECK(k.launches.size() == launches.size() + 1); // + the launch refused for grid 0
    for (size_t i = 0; i < launches.size() && i < k.launches.size(); ++i) {
        const Launch& l = launches[i];
        const Call& call = k.by_corr[k.launches[i]];
        CHECK(call.grid.x == l.grid.x && call.grid.y == l.grid.y && call.grid.z == l.grid.z);
        CHECK(call.symbol == l.name);
        CHECK(call.return_value == cudaSuccess);
        auto it = by_corr.find(k.launches[i]);
        CHECK(it != by_corr.end());
        if (it == by_corr.end()) continue;
        const CUpti_ActivityKernel10& r = *it->second;
        CHECK(r.kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        CHECK(uint32_t(r.gridX) == l.grid.x && uint32_t(r.gridY) == l.grid.y && uint32_t(r.gridZ) == l.grid.z);
        CHECK(r.streamId == l.stream);
        CHECK(r.name && strcmp(r.name, l.name) == 0);
        CHECK(r.end - r.start == expected_kernel_ns(uint64_t(l.grid.x) * l.grid.y * l.grid.z));
        CHECK(r.deviceId == 0 && r.contextId == 1 && r.registersPerThread == 32);
    }
}

void check_copies(Collected& c) {
    CHECK(c.memcpys.size() == 4);
    for (auto& m : c.memcpys) {
        CHECK(m.end - m.start == expected_copy_ns(copy_dir(m.copyKind), m.bytes));
        CHECK(m.correlationId == m.runtimeCorrelationId);
        switch (m.bytes) {
        case 1 << 20:
            CHECK(m.copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD && m.srcKind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED &&
                  m.dstKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE && m.streamId == 13 &&
                  (m.flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC));
            break;
        case 1 << 16:
            CHECK(m.copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH && m.srcKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE &&
                  m.dstKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE && m.streamId == 13);
            break;
        case 1000:
            CHECK(m.copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD && m.srcKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE &&
                  m.dstKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE && m.streamId == 14);
            break;
        case 4096:
            CHECK(m.copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD && m.srcKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE &&
                  m.streamId == 7 && !(m.flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC));
            break;
        default: CHECK(!"unexpected memcpy size");
        }
    }
    CHECK(c.memsets.size() == 2);
    for (auto& m : c.memsets) {
        CHECK(m.end - m.start == expected_memset_ns(m.bytes));
        CHECK((m.bytes == 1000 && m.streamId == 14 && m.value == 0) || (m.bytes == 8192 && m.streamId == 7 && m.value == 1));
    }
}

void check_sync_and_memory(Collected& c) {
    int stream = 0, event = 0, context = 0;
    for (auto& s : c.syncs) {
        CHECK(s.start <= s.end && s.contextId == 1);
        if (s.type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE) {
            stream++;
            CHECK(s.streamId == 13);
        } else if (s.type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE) {
            event++;
            CHECK(s.cudaEventId != CUPTI_SYNCHRONIZATION_INVALID_VALUE);
        } else if (s.type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE) {
            context++;
        }
    }
    CHECK(stream == 1 && event == 1 && context == 1);
    int dev_alloc = 0, dev_free = 0, pinned_alloc = 0, pinned_free = 0;
    for (auto& m : c.memory) {
        bool alloc = m.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
        if (m.memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE) (alloc ? dev_alloc : dev_free)++;
        if (m.memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED) (alloc ? pinned_alloc : pinned_free)++;
        if (m.address == 0x7e0000000000ULL) CHECK(m.bytes == 1 << 20);
    }
    CHECK(dev_alloc == 2 && dev_free == 2 && pinned_alloc == 1 && pinned_free == 1);
}

} // namespace

void check_phase1(const std::vector<Launch>& launches, uint32_t sync_corr, const std::string& log_path) {
    Collected& c = collected();
    Calls& k = calls();
    std::scoped_lock lk(c.mu, k.mu);
    CHECK(c.bad_records == 0);
    CHECK(c.buffers > 1); // 4 KiB buffers: the workload fills several

    for (auto& [corr, call] : k.by_corr) CHECK(call.entered && call.exited && call.slot_ok);
    check_kernels(launches, c, k);
    check_copies(c);
    check_sync_and_memory(c);

    // One runtime record per call the subscriber saw, with the same cbid and result.
    std::map<uint32_t, const CUpti_ActivityAPI*> apis;
    for (auto& a : c.apis) apis[a.correlationId] = &a;
    CHECK(apis.size() == c.apis.size() && apis.size() == k.by_corr.size());
    uint32_t tid = uint32_t(syscall(SYS_gettid));
    for (auto& [corr, call] : k.by_corr) {
        auto it = apis.find(corr);
        CHECK(it != apis.end());
        if (it == apis.end()) continue;
        const CUpti_ActivityAPI& a = *it->second;
        CHECK(a.cbid == call.cbid && int(a.returnValue) == call.return_value && a.start <= a.end);
        CHECK(a.threadId == tid && a.processId == uint32_t(getpid()));
    }

    // Ops: after their call by the launch latency, FIFO without overlap on each stream.
    std::vector<Op> ops;
    for (auto& r : c.kernels) ops.push_back({"kernel", r.correlationId, r.streamId, r.start, r.end});
    for (auto& r : c.memcpys) ops.push_back({"memcpy", r.correlationId, r.streamId, r.start, r.end});
    for (auto& r : c.memsets) ops.push_back({"memset", r.correlationId, r.streamId, r.start, r.end});
    for (const Op& op : ops) {
        auto it = apis.find(op.corr);
        CHECK(it != apis.end() && op.start >= it->second->start + launch_latency_ns());
    }
    std::sort(ops.begin(), ops.end(), [](const Op& a, const Op& b) { return a.stream != b.stream ? a.stream < b.stream : a.corr < b.corr; });
    for (size_t i = 1; i < ops.size(); ++i)
        if (ops[i].stream == ops[i - 1].stream) CHECK(ops[i].start >= ops[i - 1].end);
    // The legacy-stream cudaMemcpy waited for earlier work on blocking stream 13.
    const Op* sync_copy = nullptr;
    for (const Op& op : ops)
        if (op.corr == sync_corr) sync_copy = &op;
    CHECK(sync_copy && sync_copy->stream == 7);
    for (const Op& op : ops)
        if (sync_copy && op.stream == 13 && op.corr < sync_corr) CHECK(sync_copy->start >= op.end);

    // GTSIM_LOG: one line per op with the same instants; mono_* on CLOCK_MONOTONIC.
    std::vector<LogLine> lines = read_log(log_path, uint64_t(getpid()));
    CHECK(lines.size() == ops.size());
    int64_t offset = mono_minus_real();
    for (const Op& op : ops) {
        auto it = std::find_if(lines.begin(), lines.end(), [&](const LogLine& l) { return l.correlation == op.corr; });
        CHECK(it != lines.end());
        if (it == lines.end()) continue;
        CHECK(it->kind == op.kind && it->stream == op.stream && it->start == op.start && it->end == op.end);
        CHECK(it->mono_end - it->mono_start == op.end - op.start);
        CHECK(std::llabs(int64_t(it->mono_start - op.start) - offset) < 2000000);
    }
    for (auto& r : c.kernels)
        for (auto& l : lines)
            if (l.correlation == r.correlationId)
                CHECK(l.name == r.name && l.grid[0] == uint64_t(r.gridX) && l.grid[1] == uint64_t(r.gridY));
    printf("phase 1: %zu kernels, %zu memcpys, %zu memsets, %zu runtime, %zu sync, %zu memory records in %zu buffers; "
           "%zu log lines\n",
           c.kernels.size(), c.memcpys.size(), c.memsets.size(), c.apis.size(), c.syncs.size(), c.memory.size(),
           c.buffers, lines.size());
}

} // namespace selfcheck

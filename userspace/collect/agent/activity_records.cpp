// CUPTI's activity records translated into the ring's records (gtrace/agent.h).
#include "collect/agent/activity_records.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "collect/agent/call_capture.h"
#include "collect/agent/call_records.h"
#include "collect/agent_ring.h"

namespace gtrace::agent {
namespace {

template <typename R>
void fill_op(gt_gpu_op& op, const R& r) {
    op.start = r.start;
    op.end = r.end;
    op.device = r.deviceId;
    op.context = r.contextId;
    op.stream = r.streamId;
}

uint32_t correlation_of(const CUpti_Activity* a) {
    switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return reinterpret_cast<const CUpti_ActivityKernel10*>(a)->correlationId;
    case CUPTI_ACTIVITY_KIND_MEMCPY: return reinterpret_cast<const CUpti_ActivityMemcpy6*>(a)->correlationId;
    case CUPTI_ACTIVITY_KIND_MEMSET: return reinterpret_cast<const CUpti_ActivityMemset4*>(a)->correlationId;
    default: return 0;
    }
}

} // namespace

void write_record(gt_agent_ring* ring, const CUpti_Activity* a, const StopTrim& trim) {
    uint64_t pos = 0;
    const auto& trimmed = trim.in_flight;
    if (uint32_t id = trimmed.empty() && !trim.after ? 0 : correlation_of(a);
        id && ((trim.after && id > trim.after) || std::binary_search(trimmed.begin(), trimmed.end(), id))) {
        ++ring->ops_trimmed_at_stop;
        return;
    }
    switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto& k = *reinterpret_cast<const CUpti_ActivityKernel10*>(a);
        size_t len = k.name ? std::min<size_t>(strlen(k.name), GT_AGENT_NAME_MAX) : 0;
        auto* r = agent_ring_reserve_record<gt_gpu_kernel>(ring, sizeof(gt_gpu_kernel) + len, GT_GPU_KERNEL, k.correlationId, &pos);
        if (!r) return;
        fill_op(r->op, k);
        r->grid[0] = k.gridX, r->grid[1] = k.gridY, r->grid[2] = k.gridZ;
        r->block[0] = k.blockX, r->block[1] = k.blockY, r->block[2] = k.blockZ;
        r->registers = k.registersPerThread;
        r->static_shared = k.staticSharedMemory;
        r->dynamic_shared = k.dynamicSharedMemory;
        r->graph = k.graphId != 0;
        r->name_len = static_cast<uint16_t>(len);
        std::memcpy(r->name, k.name, len);
        agent_ring_commit(ring, pos, r->op.h.size);
        return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto& m = *reinterpret_cast<const CUpti_ActivityMemcpy6*>(a);
        auto* r = agent_ring_reserve_record<gt_gpu_copy>(ring, sizeof(gt_gpu_copy), GT_GPU_MEMCPY, m.correlationId, &pos);
        if (!r) return;
        fill_op(r->op, m);
        r->bytes = m.bytes;
        r->copy_kind = m.copyKind, r->src_kind = m.srcKind, r->dst_kind = m.dstKind;
        agent_ring_commit(ring, pos, r->op.h.size);
        return;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto& m = *reinterpret_cast<const CUpti_ActivityMemset4*>(a);
        auto* r = agent_ring_reserve_record<gt_gpu_copy>(ring, sizeof(gt_gpu_copy), GT_GPU_MEMSET, m.correlationId, &pos);
        if (!r) return;
        fill_op(r->op, m);
        r->bytes = m.bytes;
        r->value = m.value;
        r->dst_kind = static_cast<uint8_t>(m.memoryKind);
        agent_ring_commit(ring, pos, r->op.h.size);
        return;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        const auto& s = *reinterpret_cast<const CUpti_ActivitySynchronization2*>(a);
        auto* r = agent_ring_reserve_record<gt_gpu_sync>(ring, sizeof(gt_gpu_sync), GT_GPU_SYNC, s.correlationId, &pos);
        if (!r) return;
        r->op.start = s.start, r->op.end = s.end;
        r->op.context = s.contextId, r->op.stream = s.streamId;
        r->sync_type = s.type;
        agent_ring_commit(ring, pos, r->op.h.size);
        return;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
        const auto& m = *reinterpret_cast<const CUpti_ActivityMemory4*>(a);
        auto* r = agent_ring_reserve_record<gt_gpu_memory>(ring, sizeof(gt_gpu_memory), GT_GPU_MEMORY, m.correlationId, &pos);
        if (!r) return;
        r->ts = m.timestamp;
        r->address = m.address;
        r->bytes = m.bytes;
        r->device = m.deviceId;
        r->freed = m.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
        agent_ring_commit(ring, pos, r->h.size);
        return;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
        const auto& api = *reinterpret_cast<const CUpti_ActivityAPI*>(a);
        bool driver = a->kind == CUPTI_ACTIVITY_KIND_DRIVER;
        if (calls_from_records()) { // the call itself, on gtrace's clock
            int table_api = api_of_callback(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, api.cbid);
            if (table_api < 0 || api.end < api.start) return;
            int64_t offset = __atomic_load_n(&ring->clock_offset_ns, __ATOMIC_ACQUIRE);
            call_from_record(ring, {table_api, driver, api.correlationId, api.threadId,
                                    static_cast<uint64_t>(static_cast<int64_t>(api.start) - offset),
                                    static_cast<uint64_t>(static_cast<int64_t>(api.end) - offset),
                                    static_cast<int32_t>(api.returnValue)});
            return;
        }
        auto* r = agent_ring_reserve_record<gt_gpu_api>(ring, sizeof(gt_gpu_api), GT_GPU_API, api.correlationId, &pos);
        if (!r) return;
        r->start = api.start, r->end = api.end;
        r->tid = api.threadId;
        r->cbid = api.cbid;
        r->driver = driver;
        agent_ring_commit(ring, pos, r->h.size);
        return;
    }
    default:
        return;
    }
}

void wait_for_room(std::unique_lock<std::mutex>& lock, gt_agent_ring* const& ring, bool& stalled) {
    constexpr uint64_t kRoom = 2 * agent_record_size(sizeof(gt_gpu_kernel) + GT_AGENT_NAME_MAX); // a pad and a record
    constexpr auto kPatience = std::chrono::milliseconds(250);
    if (!ring || agent_ring_room(ring) >= kRoom) {
        stalled = false;
        return;
    }
    if (stalled) return;
    auto deadline = std::chrono::steady_clock::now() + kPatience;
    while (ring && agent_ring_room(ring) < kRoom) {
        if (std::chrono::steady_clock::now() > deadline) {
            stalled = true;
            return;
        }
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        lock.lock();
    }
}

} // namespace gtrace::agent

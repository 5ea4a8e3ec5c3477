// GPU work reported by a process's agent, decoded from the ring's fixed records: times moved to
// CLOCK_MONOTONIC (the clock of the BPF events), kinds and directions named.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "gtrace/agent.h"

namespace gtrace {

enum class GpuOpKind { Kernel, Memcpy, Memset, Sync };

struct GpuOp {
    GpuOpKind kind = GpuOpKind::Kernel;
    uint32_t pid = 0;
    uint32_t correlation = 0;
    uint64_t start_ns = 0, end_ns = 0; // CLOCK_MONOTONIC
    uint32_t device = 0, context = 0, stream = 0;
    std::string name; // kernel: demangled name; copy: "Memcpy HtoD"; set: "Memset"
    int32_t grid[3] = {}, block[3] = {};
    uint32_t registers = 0, static_shared = 0, dynamic_shared = 0;
    bool graph = false;
    uint64_t bytes = 0;
    std::string copy_kind; // "HtoD", "DtoH", "DtoD", …
    uint32_t sync_type = 0; // Sync: CUpti_ActivitySynchronizationType (stream: 0xffffffff for a context sync)
    double bandwidth_gbps() const;
};

// A CUPTI API record (only when another tool holds the callback API): the call it belongs to
// is found on the same thread by time.
struct GpuApiRecord {
    uint32_t pid = 0, tid = 0, correlation = 0;
    uint64_t start_ns = 0, end_ns = 0;
};

// CUPTI time → CLOCK_MONOTONIC with the agent's measured offset.
inline uint64_t gpu_to_monotonic(uint64_t cupti_ns, int64_t offset_ns) {
    return cupti_ns - static_cast<uint64_t>(offset_ns); // modulo 2^64: a hostile time may not overflow a signed one
}

// Decodes kernel, copy, set and sync records; nullopt for the others.
std::optional<GpuOp> decode_gpu_op(uint32_t pid, const gt_gpu_header& h, int64_t clock_offset_ns);
std::optional<GpuApiRecord> decode_gpu_api(uint32_t pid, const gt_gpu_header& h, int64_t clock_offset_ns);

} // namespace gtrace

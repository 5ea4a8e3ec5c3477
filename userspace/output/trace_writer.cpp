#include "output/trace_writer.h"

namespace gtrace {

std::string process_labels_json(const ProcessInfo& p) {
    nlohmann::json labels = {{"cmdline", p.cmdline}, {"ppid", p.ppid}};
    if (p.ranks.rank) labels["rank"] = *p.ranks.rank;
    if (p.ranks.local_rank) labels["local_rank"] = *p.ranks.local_rank;
    if (p.ranks.world_size) labels["world_size"] = *p.ranks.world_size;
    if (p.forked_from) labels["forked_from"] = *p.forked_from;
    return labels.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

const char* gpu_op_category(GpuOpKind k) {
    switch (k) {
    case GpuOpKind::Kernel: return "kernel";
    case GpuOpKind::Memcpy: return "gpu_memcpy";
    case GpuOpKind::Memset: return "gpu_memset";
    default: return "gpu_sync";
    }
}

} // namespace gtrace

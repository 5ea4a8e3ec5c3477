// Stream capture and graphs: a capturing stream records its ops as nodes of a graph; an
// instantiated graph (a copy with ids of its own) replays them back to back on a stream, every op
// carrying the launch's correlation id and its graph and node ids.
#include <algorithm>

#include "model.h"

namespace gtsim {

Graph* Model::graph_locked(const void* handle, bool exec) {
    if (!handle || !live_.count(handle)) return nullptr;
    auto* g = static_cast<Graph*>(const_cast<void*>(handle));
    return g->live && g->exec == exec ? g : nullptr;
}

CUresult Model::begin_capture(CUstream h, bool per_thread, int cur_dev) {
    std::lock_guard lk(mu_);
    Stream* s = resolve_locked(h, per_thread, cur_dev);
    if (!s) return CUDA_ERROR_INVALID_HANDLE;
    if (s->kind == StreamKind::Legacy) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; // as in CUDA
    if (s->capture) return CUDA_ERROR_ILLEGAL_STATE;
    Graph& g = graphs_.emplace_back();
    g.device = s->device;
    s->capture = &g; // the graph gets its id when the capture ends, as a real one is created then
    return CUDA_SUCCESS;
}

CUresult Model::end_capture(CUstream h, bool per_thread, int cur_dev, CUgraph* out) {
    std::lock_guard lk(mu_);
    Stream* s = resolve_locked(h, per_thread, cur_dev);
    if (!s) return CUDA_ERROR_INVALID_HANDLE;
    if (!s->capture) return CUDA_ERROR_ILLEGAL_STATE;
    Graph* g = s->capture;
    s->capture = nullptr;
    g->id = next_graph_id_++;
    live_.insert(g);
    *out = reinterpret_cast<CUgraph>(g);
    return CUDA_SUCCESS;
}

CUresult Model::capture_status(CUstream h, bool per_thread, int cur_dev, CUstreamCaptureStatus* status) {
    std::lock_guard lk(mu_);
    Stream* s = resolve_locked(h, per_thread, cur_dev);
    if (!s) return CUDA_ERROR_INVALID_HANDLE;
    *status = s->capture ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}

CUresult Model::instantiate(CUgraph handle, CUgraphExec* out) {
    std::lock_guard lk(mu_);
    Graph* g = graph_locked(handle, false);
    if (!g) return CUDA_ERROR_INVALID_VALUE;
    // Instantiation makes a graph of its own (its id is what kernel records carry) whose nodes
    // have ids of their own, so two instances of one graph are told apart.
    Graph& e = graphs_.emplace_back();
    e.id = next_graph_id_++;
    e.device = g->device;
    e.exec = true;
    e.nodes = g->nodes;
    for (Node& n : e.nodes) {
        n.op.graph_id = e.id;
        n.op.graph_node_id = next_node_id_++;
        n.op.async = 1;
    }
    live_.insert(&e);
    *out = reinterpret_cast<CUgraphExec>(&e);
    return CUDA_SUCCESS;
}

CUresult Model::destroy_locked(const void* handle, bool exec) {
    Graph* g = graph_locked(handle, exec);
    if (!g) return CUDA_ERROR_INVALID_VALUE;
    g->live = false;
    g->nodes = {};
    live_.erase(g);
    return CUDA_SUCCESS;
}

CUresult Model::graph_destroy(CUgraph handle) {
    std::lock_guard lk(mu_);
    return destroy_locked(handle, false);
}

CUresult Model::exec_destroy(CUgraphExec handle) {
    std::lock_guard lk(mu_);
    return destroy_locked(handle, true);
}

CUresult Model::graph_launch(CUgraphExec handle, CUstream h, bool per_thread, int cur_dev, const gtsim_gpu_op& base,
                             uint64_t now, std::vector<gtsim_gpu_op>* ops, uint32_t* stream_id) {
    ops->clear();
    std::lock_guard lk(mu_);
    Graph* g = graph_locked(handle, true);
    if (!g) return CUDA_ERROR_INVALID_VALUE;
    Stream* s = resolve_locked(h, per_thread, cur_dev);
    if (!s) return CUDA_ERROR_INVALID_HANDLE;
    if (s->capture) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; // child-graph nodes are not modelled
    if (s->device != g->device) return CUDA_ERROR_INVALID_VALUE;
    *stream_id = s->id;
    ops->reserve(g->nodes.size());
    // One lock for the whole graph: a replay loop must cost little per node.
    uint64_t t = std::max(now + cfg_.launch_latency_ns, barrier_locked(*s));
    for (const Node& n : g->nodes) {
        gtsim_gpu_op& op = ops->emplace_back(n.op);
        op.correlation_id = base.correlation_id;
        op.runtime_correlation_id = base.runtime_correlation_id;
        op.api_name = base.api_name;
        op.stream_id = s->id;
        op.queued_ns = now;
        op.start_ns = t;
        op.end_ns = t + n.duration;
        t = op.end_ns;
    }
    if (!g->nodes.empty()) s->free_at = t;
    return CUDA_SUCCESS;
}

} // namespace gtsim

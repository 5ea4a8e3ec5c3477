// Exported runtime API of stream capture and graphs; cudaGraphLaunch is with the other work in
// api_exec.cpp. Runtime and driver handles are the same objects (cudaGraph_t == CUgraph).
#include "api_common.h"

using namespace gtsim;

namespace {

cudaError_t begin(uint32_t cbid, const char* name, const void* params, cudaStream_t s, cudaStreamCaptureMode mode,
                  bool pt) {
    RuntimeCall call(cbid, name, params);
    return call.finish(call.drv.begin_capture[pt](s, static_cast<CUstreamCaptureMode>(mode)));
}

cudaError_t end(uint32_t cbid, const char* name, const void* params, cudaStream_t s, cudaGraph_t* graph, bool pt) {
    RuntimeCall call(cbid, name, params);
    return call.finish(call.drv.end_capture[pt](s, graph));
}

cudaError_t capturing(uint32_t cbid, const char* name, const void* params, cudaStream_t s,
                      cudaStreamCaptureStatus* status, bool pt) {
    RuntimeCall call(cbid, name, params);
    return call.finish(call.drv.is_capturing[pt](s, reinterpret_cast<CUstreamCaptureStatus*>(status)));
}

cudaError_t instantiate(uint32_t cbid, const char* name, const void* params, cudaGraphExec_t* exec, cudaGraph_t graph,
                        unsigned long long flags) {
    RuntimeCall call(cbid, name, params);
    return call.finish(call.drv.instantiate(exec, graph, flags));
}

} // namespace

GTSIM_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
    cudaStreamBeginCapture_v10000_params p{stream, mode};
    return begin(GTSIM_CBID(cudaStreamBeginCapture_v10000), "cudaStreamBeginCapture", &p, stream, mode, false);
}

GTSIM_EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, cudaStreamCaptureMode mode) {
    cudaStreamBeginCapture_ptsz_v10000_params p{stream, mode};
    return begin(GTSIM_CBID(cudaStreamBeginCapture_ptsz_v10000), "cudaStreamBeginCapture_ptsz", &p, stream, mode,
                 true);
}

GTSIM_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
    cudaStreamEndCapture_v10000_params p{stream, graph};
    return end(GTSIM_CBID(cudaStreamEndCapture_v10000), "cudaStreamEndCapture", &p, stream, graph, false);
}

GTSIM_EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t* graph) {
    cudaStreamEndCapture_ptsz_v10000_params p{stream, graph};
    return end(GTSIM_CBID(cudaStreamEndCapture_ptsz_v10000), "cudaStreamEndCapture_ptsz", &p, stream, graph, true);
}

GTSIM_EXPORT cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
    cudaStreamIsCapturing_v10000_params p{stream, status};
    return capturing(GTSIM_CBID(cudaStreamIsCapturing_v10000), "cudaStreamIsCapturing", &p, stream, status, false);
}

GTSIM_EXPORT cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream, cudaStreamCaptureStatus* status) {
    cudaStreamIsCapturing_ptsz_v10000_params p{stream, status};
    return capturing(GTSIM_CBID(cudaStreamIsCapturing_ptsz_v10000), "cudaStreamIsCapturing_ptsz", &p, stream, status,
                     true);
}

GTSIM_EXPORT cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
    cudaGraphInstantiate_v12000_params p{exec, graph, flags};
    return instantiate(GTSIM_CBID(cudaGraphInstantiate_v12000), "cudaGraphInstantiate", &p, exec, graph, flags);
}

GTSIM_EXPORT cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph,
                                                       unsigned long long flags) {
    cudaGraphInstantiateWithFlags_v11040_params p{exec, graph, flags};
    return instantiate(GTSIM_CBID(cudaGraphInstantiateWithFlags_v11040), "cudaGraphInstantiateWithFlags", &p, exec,
                       graph, flags);
}

GTSIM_EXPORT cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    cudaGraphExecDestroy_v10000_params p{exec};
    RuntimeCall call(GTSIM_CBID(cudaGraphExecDestroy_v10000), "cudaGraphExecDestroy", &p);
    return call.finish(call.drv.exec_destroy(exec));
}

GTSIM_EXPORT cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    cudaGraphDestroy_v10000_params p{graph};
    RuntimeCall call(GTSIM_CBID(cudaGraphDestroy_v10000), "cudaGraphDestroy", &p);
    return call.finish(call.drv.graph_destroy(graph));
}

// Exported driver API: stream capture and CUDA graphs.
#include "call.h"
#include "twins.h"

using namespace gtsim;

namespace {

CUresult begin_capture(uint32_t cbid, const char* name, const void* params, CUstream s, CUstreamCaptureMode mode,
                       bool per_thread) {
    DriverCall call(cbid, name, params);
    if (!call.has_context()) return call.finish(CUDA_ERROR_INVALID_CONTEXT);
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return call.finish(CUDA_ERROR_INVALID_VALUE);
    return call.finish(Model::get().begin_capture(s, per_thread, call.info.device));
}

CUresult end_capture(uint32_t cbid, const char* name, const void* params, CUstream s, CUgraph* out, bool per_thread) {
    DriverCall call(cbid, name, params);
    if (!call.has_context()) return call.finish(CUDA_ERROR_INVALID_CONTEXT);
    if (!out) return call.finish(CUDA_ERROR_INVALID_VALUE);
    return call.finish(Model::get().end_capture(s, per_thread, call.info.device, out));
}

CUresult is_capturing(uint32_t cbid, const char* name, const void* params, CUstream s, CUstreamCaptureStatus* out,
                      bool per_thread) {
    DriverCall call(cbid, name, params);
    if (!call.has_context()) return call.finish(CUDA_ERROR_INVALID_CONTEXT);
    if (!out) return call.finish(CUDA_ERROR_INVALID_VALUE);
    return call.finish(Model::get().capture_status(s, per_thread, call.info.device, out));
}

CUresult launch(uint32_t cbid, const char* name, const void* params, CUgraphExec exec, CUstream s, bool per_thread) {
    DriverCall call(cbid, name, params);
    if (!call.has_context()) return call.finish(CUDA_ERROR_INVALID_CONTEXT);
    thread_local std::vector<gtsim_gpu_op> ops; // reused: replay loops launch millions of nodes
    gtsim_gpu_op base = call.new_op(GTSIM_OP_KERNEL);
    CUresult rc = Model::get().graph_launch(exec, s, per_thread, call.info.device, base, realtime_ns(), &ops,
                                            &call.info.stream_id);
    if (rc == CUDA_SUCCESS) call.report(ops);
    return call.finish(rc);
}

} // namespace

GTSIM_EXPORT CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) {
    cuStreamBeginCapture_v2_params p{hStream, mode};
    return begin_capture(GTSIM_DCBID(cuStreamBeginCapture_v2), "cuStreamBeginCapture_v2", &p, hStream, mode, false);
}

GTSIM_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode) {
    cuStreamBeginCapture_v2_ptsz_params p{hStream, mode};
    return begin_capture(GTSIM_DCBID(cuStreamBeginCapture_v2_ptsz), "cuStreamBeginCapture_v2_ptsz", &p, hStream, mode,
                         true);
}

GTSIM_EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph* phGraph) {
    cuStreamEndCapture_params p{hStream, phGraph};
    return end_capture(GTSIM_DCBID(cuStreamEndCapture), "cuStreamEndCapture", &p, hStream, phGraph, false);
}

GTSIM_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph* phGraph) {
    cuStreamEndCapture_ptsz_params p{hStream, phGraph};
    return end_capture(GTSIM_DCBID(cuStreamEndCapture_ptsz), "cuStreamEndCapture_ptsz", &p, hStream, phGraph, true);
}

GTSIM_EXPORT CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus* status) {
    cuStreamIsCapturing_params p{hStream, status};
    return is_capturing(GTSIM_DCBID(cuStreamIsCapturing), "cuStreamIsCapturing", &p, hStream, status, false);
}

GTSIM_EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus* status) {
    cuStreamIsCapturing_ptsz_params p{hStream, status};
    return is_capturing(GTSIM_DCBID(cuStreamIsCapturing_ptsz), "cuStreamIsCapturing_ptsz", &p, hStream, status, true);
}

GTSIM_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph, unsigned long long flags) {
    cuGraphInstantiateWithFlags_params p{phGraphExec, hGraph, flags};
    DriverCall call(GTSIM_DCBID(cuGraphInstantiateWithFlags), "cuGraphInstantiateWithFlags", &p);
    if (!phGraphExec) return call.finish(CUDA_ERROR_INVALID_VALUE);
    return call.finish(Model::get().instantiate(hGraph, phGraphExec));
}

GTSIM_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
    cuGraphLaunch_params p{hGraphExec, hStream};
    return launch(GTSIM_DCBID(cuGraphLaunch), "cuGraphLaunch", &p, hGraphExec, hStream, false);
}

GTSIM_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
    cuGraphLaunch_ptsz_params p{hGraphExec, hStream};
    return launch(GTSIM_DCBID(cuGraphLaunch_ptsz), "cuGraphLaunch_ptsz", &p, hGraphExec, hStream, true);
}

GTSIM_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
    cuGraphExecDestroy_params p{hGraphExec};
    DriverCall call(GTSIM_DCBID(cuGraphExecDestroy), "cuGraphExecDestroy", &p);
    return call.finish(Model::get().exec_destroy(hGraphExec));
}

GTSIM_EXPORT CUresult cuGraphDestroy(CUgraph hGraph) {
    cuGraphDestroy_params p{hGraph};
    DriverCall call(GTSIM_DCBID(cuGraphDestroy), "cuGraphDestroy", &p);
    return call.finish(Model::get().graph_destroy(hGraph));
}

// Per-call plumbing of the simulated driver: correlation ids (the rules of CUPTI_CORRELATION.md),
// observer notification, driver-style injection and the thread's current context.
#pragma once

#include <cuda.h>
#include <cupti_driver_cbid.h>
#include "cuda_meta.h"

#include <vector>

#include "gpusim.h"
#include "model.h"

#define GTSIM_EXPORT extern "C" __attribute__((visibility("default")))
#define GTSIM_DCBID(x) CUPTI_DRIVER_TRACE_CBID_##x

namespace gtsim {

// Device of the thread's current context, -1 when none is current.
int current_device();
// Makes the primary context of dev current on this thread (dev -1: none).
void set_current_device(int dev); // also makes the device's primary context active
// cuDevicePrimaryCtxGetState's answer: retained or made current, and not reset since.
void set_primary_active(int dev, bool active);
bool primary_active(int dev);

// One driver API call: construct at entry, finish() at exit. A call made while a runtime call is
// in progress on the thread is nested: it shares the runtime call's correlation id.
class DriverCall {
public:
    DriverCall(uint32_t cbid, const char* name, const void* params, const char* symbol = nullptr);
    DriverCall(const DriverCall&) = delete;
    DriverCall& operator=(const DriverCall&) = delete;

    bool has_context() const { return info.device >= 0; }
    // A zeroed op of this call (correlation ids and api name set).
    gtsim_gpu_op new_op(gtsim_op_kind kind) const;
    // Schedules op on the stream (or adds it to the stream's capture), then reports and logs it.
    // Fills info.stream_id; *ran tells whether it was scheduled (not captured).
    CUresult enqueue(gtsim_gpu_op& op, CUstream stream, bool per_thread, bool* ran = nullptr);
    // Reports and logs ops already scheduled (a graph launch).
    void report(const std::vector<gtsim_gpu_op>& ops);
    CUresult finish(CUresult rc);

    gtsim_api_info info{};

private:
    const char* api_name_; // the call that owns the correlation id
    uint32_t runtime_correlation_;
};

} // namespace gtsim

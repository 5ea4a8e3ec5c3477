// Injection library for gpusim_selfcheck: proves the simulated driver loads
// CUDA_INJECTION64_PATH once and that the injection may call cudart from InitializeInjection.
#include <cuda_runtime_api.h>

extern "C" {
__attribute__((visibility("default"))) int gtsim_probe_calls = 0;
__attribute__((visibility("default"))) int gtsim_probe_devices = -1;

__attribute__((visibility("default"))) int InitializeInjection(void) {
    ++gtsim_probe_calls;
    int n = -1;
    if (cudaGetDeviceCount(&n) == cudaSuccess) gtsim_probe_devices = n; // must not deadlock
    return 1;
}
}

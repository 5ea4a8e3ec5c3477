// Launches a kernel from a native thread of a given name — no Python frame on it — as PyTorch's
// autograd engine does from its device threads ("pt_autograd_<device>") during backward().
// Loaded by backward_threads.py through ctypes; the launch function is the caller's libcudart's.
#include <pthread.h>

#include <thread>

struct Dim3 {
    unsigned x, y, z;
};
using LaunchKernel = int (*)(const void* func, Dim3 grid, Dim3 block, void** args, size_t shared_mem, void* stream);

// Runs `n` launches of `kernel` on a new thread named `name`, and waits for it. Returns the number
// of launches that did not return 0.
extern "C" int launch_on_named_thread(void* launch, const void* kernel, int n, const char* name) {
    int failed = 0;
    std::thread worker([&] {
        pthread_setname_np(pthread_self(), name);
        auto fn = reinterpret_cast<LaunchKernel>(launch);
        for (int i = 0; i < n; ++i) failed += fn(kernel, Dim3{1, 1, 1}, Dim3{32, 1, 1}, nullptr, 0, nullptr) != 0;
    });
    worker.join();
    return failed;
}

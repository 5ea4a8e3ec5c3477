// Benchmark target: calls cudaLaunchKernel (real libcudart; fails fast without a GPU, which is
// all a uprobe needs) N times in a tight loop and prints the mean cost per call.
//   launch_loop --calls N [--go-file F]   prints "ready <pid>", waits for F, then "ns_per_call X"
#include <cuda_runtime_api.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

__attribute__((noinline)) void bench_kernel_stub(float*, int) {}

int main(int argc, char** argv) {
    long calls = 1000000;
    const char* go = nullptr;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        if (a == "--calls") calls = atol(argv[i + 1]);
        else if (a == "--go-file") go = argv[i + 1];
    }
    printf("ready %d\n", getpid());
    fflush(stdout);
    struct stat st;
    while (go && stat(go, &st) != 0) usleep(5000);
    void* args[1] = {nullptr};
    auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < calls; ++i)
        cudaLaunchKernel(reinterpret_cast<const void*>(&bench_kernel_stub), dim3(1), dim3(128), args, 0, nullptr);
    double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    printf("ns_per_call %.1f\n", ns / static_cast<double>(calls));
    return 0;
}

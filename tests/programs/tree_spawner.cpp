// Test program without CUDA of its own: once FILE (--go-file) exists it starts, after gtrace
// has attached, a tree of children that use CUDA:
//   - a forked child that execs cuda_calls (linked against libcudart and libcuda);
//   - a forked child that dlopens libcudart (path given by --dlopen) only now, and calls it;
//   - a forked child that dlopens --late-dlopen (an unusual path gtrace cannot know in
//     advance), waits until --late-go-file exists (the case creates it once gtrace says it has
//     probed that library; at most --late-wait-ms), then calls it.
// Every CUDA-calling process prints its own GTRACE_COUNTS line. Waits for all children.
#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "call_counter.h"

namespace {

void dlopen_and_call(const std::string& path, int calls, const std::string& go_file, int wait_ms) {
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen %s: %s\n", path.c_str(), dlerror());
        _exit(3);
    }
    using malloc_fn = int (*)(void**, size_t);
    using free_fn = int (*)(void*);
    using sync_fn = int (*)();
    auto cuda_malloc = reinterpret_cast<malloc_fn>(dlsym(lib, "cudaMalloc"));
    auto cuda_free = reinterpret_cast<free_fn>(dlsym(lib, "cudaFree"));
    auto cuda_sync = reinterpret_cast<sync_fn>(dlsym(lib, "cudaDeviceSynchronize"));
    // An ordering, not a time: gtrace probes a library a tracked process maps once it sees the
    // mapping (beside two CPU hogs that took longer than half a second).
    struct stat st;
    for (int waited = 0; !go_file.empty() && waited < wait_ms && stat(go_file.c_str(), &st) != 0; waited += 10) usleep(10000);
    CallCounter c;
    for (int i = 0; i < calls; ++i) {
        void* p = nullptr;
        c.count("cudaMalloc", cuda_malloc(&p, 4096));
        c.count("cudaFree", cuda_free(p));
        c.count("cudaDeviceSynchronize", cuda_sync());
    }
    c.print();
}

} // namespace

int main(int argc, char** argv) {
    std::string go_file, cuda_calls, dlopen_path, late_path, late_go_file;
    int late_wait_ms = 20000; // a case whose hook never fires fails anyway (run_case.py)
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        if (a == "--go-file") go_file = argv[i + 1];
        else if (a == "--cuda-calls") cuda_calls = argv[i + 1];
        else if (a == "--dlopen") dlopen_path = argv[i + 1];
        else if (a == "--late-dlopen") late_path = argv[i + 1];
        else if (a == "--late-wait-ms") late_wait_ms = atoi(argv[i + 1]);
        else if (a == "--late-go-file") late_go_file = argv[i + 1];
    }
    printf("ready %d\n", getpid());
    fflush(stdout);
    struct stat st;
    while (!go_file.empty() && stat(go_file.c_str(), &st) != 0) usleep(10000);

    std::vector<pid_t> children;
    if (!cuda_calls.empty()) {
        if (pid_t pid = fork(); pid == 0) {
            execl(cuda_calls.c_str(), cuda_calls.c_str(), "--iterations", "7", "--threads", "2", nullptr);
            _exit(127);
        } else children.push_back(pid);
    }
    if (!dlopen_path.empty()) {
        if (pid_t pid = fork(); pid == 0) {
            dlopen_and_call(dlopen_path, 11, {}, 0);
            _exit(0);
        } else children.push_back(pid);
    }
    if (!late_path.empty()) {
        if (pid_t pid = fork(); pid == 0) {
            dlopen_and_call(late_path, 5, late_go_file, late_wait_ms);
            _exit(0);
        } else children.push_back(pid);
    }
    int failed = 0;
    for (pid_t pid : children) {
        int status = 0;
        waitpid(pid, &status, 0);
        failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    return failed ? 1 : 0;
}

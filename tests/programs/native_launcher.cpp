// Launches kernels from a native thread of a given name — no Python frame on it — as PyTorch's
// autograd engine does from its device threads ("pt_autograd_<device>") during backward(). Like
// the engine's, each named thread is started once and lives as long as the process (gtrace names
// a thread from /proc when it first sees its calls).
// Loaded by backward_threads.py through ctypes; the launch function is the caller's libcudart's.
#include <pthread.h>

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace {

struct Dim3 {
    unsigned x, y, z;
};
using LaunchKernel = int (*)(const void* func, Dim3 grid, Dim3 block, void** args, size_t shared_mem, void* stream);

// One named thread that runs one job at a time, handed over by run().
class NamedThread {
public:
    explicit NamedThread(std::string name) : name_(std::move(name)), thread_([this] { serve(); }) { thread_.detach(); }

    void run(std::function<void()> job) {
        std::unique_lock lock(mutex_);
        job_ = std::move(job);
        changed_.notify_all();
        changed_.wait(lock, [this] { return !job_; });
    }

private:
    void serve() {
        pthread_setname_np(pthread_self(), name_.c_str());
        std::unique_lock lock(mutex_);
        for (;;) {
            changed_.wait(lock, [this] { return static_cast<bool>(job_); });
            job_();
            job_ = nullptr;
            changed_.notify_all();
        }
    }

    std::string name_;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::function<void()> job_;
    std::thread thread_;
};

NamedThread& thread_named(const std::string& name) {
    static std::mutex mutex;
    static auto* threads = new std::map<std::string, std::unique_ptr<NamedThread>>; // never destroyed: they live on
    std::lock_guard lock(mutex);
    auto& t = (*threads)[name];
    if (!t) t = std::make_unique<NamedThread>(name);
    return *t;
}

} // namespace

// Runs `n` launches of `kernel` on the thread named `name` (started at its first use), and waits
// for them. Returns the number of launches that did not return 0.
extern "C" int launch_on_named_thread(void* launch, const void* kernel, int n, const char* name) {
    int failed = 0;
    thread_named(name).run([&] {
        auto fn = reinterpret_cast<LaunchKernel>(launch);
        for (int i = 0; i < n; ++i) failed += fn(kernel, Dim3{1, 1, 1}, Dim3{32, 1, 1}, nullptr, 0, nullptr) != 0;
    });
    return failed;
}

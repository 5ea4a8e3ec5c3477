#include "attach/agent_injector.h"
#include "foundation/test_hooks.h"

#include <dlfcn.h>
#include <elf.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "foundation/elf_symbols.h"
#include "foundation/input_file.h"
#include "discover/proc_tree.h"
#include "attach/agent_placement.h"
#include "attach/sigreturn_frame.h"
#include "discover/process_memory.h"
#include "discover/stopped_thread.h"

namespace gtrace {
namespace {

constexpr size_t kXstateMax = 32 << 10; // AMX-capable CPUs have ~11 KiB of extended state

bool is_libc(const std::string& path) {
    auto slash = path.rfind('/');
    std::string base = path.substr(slash == std::string::npos ? 0 : slash + 1);
    return base.starts_with("libc.so") || base.starts_with("libc-2.");
}

// Code where a stopped thread may hold a lock the calls we make need: the dynamic loader
// (dlopen takes its lock), the allocator, CUDA and CUPTI (the agent's start calls into them).
bool unsafe_object(const std::string& path) {
    auto slash = path.rfind('/');
    std::string base = path.substr(slash == std::string::npos ? 0 : slash + 1);
    return base.starts_with("ld-linux") || base.starts_with("ld-") || base.starts_with("libcuda") ||
           base.starts_with("libcudart") || base.starts_with("libcupti") || base.starts_with("libgtrace_agent") ||
           base.starts_with("libjemalloc") || base.starts_with("libtcmalloc");
}

bool unsafe_function(const std::string& name) {
    static const std::array<std::string_view, 14> names = {
        "malloc", "free", "calloc", "realloc", "memalign", "posix_memalign", "aligned_alloc", "_int_malloc",
        "_int_free", "_int_realloc", "malloc_consolidate", "__libc_malloc", "__libc_free", "_dl_"};
    for (auto n : names)
        if (name == n || (n == "_dl_" && name.starts_with(n)) || name.starts_with(std::string(n) + "_")) return true;
    return name.find("dlopen") != std::string::npos || name.find("dl_open") != std::string::npos ||
           name.find("fork") != std::string::npos;
}

// Why the stopped thread is not at a safe point, or empty when it is.
std::string unsafe_reason(int tid, const std::vector<Mapping>& maps) {
    std::vector<NativeFrame> frames = unwind_stopped(tid, 256, true);
    if (frames.empty()) return "cannot unwind its stack";
    for (const NativeFrame& f : frames) {
        for (const auto& m : maps)
            if (f.ip >= m.start && f.ip < m.end && unsafe_object(m.path)) return "inside " + m.path;
        if (!f.name.empty() && unsafe_function(f.name)) return "inside " + f.name;
    }
    return {};
}

// A thread held stopped by gtrace. Released untouched unless handed a borrowed call.
class StoppedThread {
public:
    explicit StoppedThread(int tid) : tid_(tid) {}
    StoppedThread(const StoppedThread&) = delete;
    ~StoppedThread() {
        if (seized_) ptrace(PTRACE_DETACH, tid_, nullptr, nullptr);
    }

    bool stop() {
        StopResult r = seize_and_stop(tid_);
        seized_ = r != StopResult::CannotAttach;
        if (r != StopResult::Stopped) return false;
        if (ptrace(PTRACE_GETREGS, tid_, nullptr, &saved_) != 0) return false;
        xstate_.resize(kXstateMax);
        iovec iov{xstate_.data(), xstate_.size()};
        if (ptrace(PTRACE_GETREGSET, tid_, NT_X86_XSTATE, &iov) != 0) return false;
        xstate_.resize(iov.iov_len);
        return true;
    }

    // Starts `call` in the thread and lets go of it: the call returns into the sigreturn
    // frame, which resumes the thread's own work, with or without gtrace.
    Result<void> hand_off(const BorrowedCall& call) {
        iovec local{const_cast<uint8_t*>(call.stack.data()), call.stack.size()};
        iovec remote{reinterpret_cast<void*>(call.stack_base), call.stack.size()};
        if (process_vm_writev(tid_, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(call.stack.size()))
            return make_error(ExitCode::Internal, fmt::format("cannot write to the stack of thread {}: {}", tid_, strerror(errno)));
        if (ptrace(PTRACE_SETREGS, tid_, nullptr, &call.regs) != 0)
            return make_error(ExitCode::Internal, fmt::format("cannot set the registers of thread {}: {}", tid_, strerror(errno)));
        return {};
    }

    const user_regs_struct& saved() const { return saved_; }
    const std::vector<uint8_t>& xstate() const { return xstate_; }

private:
    int tid_;
    bool seized_ = false;
    user_regs_struct saved_{};
    std::vector<uint8_t> xstate_;
};

// The thread's blocked signals (/proc/PID/task/TID/status, SigBlk).
uint64_t blocked_signals(int pid, int tid) {
    FILE* f = fopen(fmt::format("/proc/{}/task/{}/status", pid, tid).c_str(), "r");
    uint64_t mask = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "SigBlk: %" SCNx64, &mask) == 1) break;
    if (f) fclose(f);
    return mask;
}

// glibc's rt_sigreturn trampoline (__restore_rt: mov $15,%rax; syscall), found by its bytes in
// libc's code: it is not an exported symbol.
uint64_t sigreturn_trampoline(int pid, const std::vector<Mapping>& maps, TargetFiles& files) {
    static constexpr char kCode[] = {0x48, static_cast<char>(0xc7), static_cast<char>(0xc0), 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
    // Searched a chunk at a time, and no further than any libc's code reaches (glibc's is ~2 MiB):
    // a mapping's length is the process's to choose (a sparse terabyte named libc.so.6, say).
    constexpr uint64_t kMaxSearch = 64u << 20;
    for (auto& opened : files.open_mapped(pid, maps, [](const Mapping& m) { return m.executable && is_libc(m.path); })) {
        for (const Mapping& m : maps) {
            if (!m.executable || m.dev != opened.mapping.dev || m.inode != opened.mapping.inode) continue;
            auto at = find_in_file(opened.file.fd(), m.offset, std::min(m.end - m.start, kMaxSearch), std::string_view(kCode, sizeof kCode));
            if (at) return m.start + (*at - m.offset);
        }
    }
    return 0;
}

uint64_t libc_symbol(int pid, const std::vector<Mapping>& maps, const char* name, TargetFiles& files) {
    for (const auto& m : maps)
        if (m.is_file() && is_libc(m.path))
            if (uint64_t a = mapped_symbol_address(pid, maps, m, name, files)) return a;
    return 0;
}

bool same_file(const Mapping& m, const struct stat& st) { return m.inode == st.st_ino && m.dev == st.st_dev; }

} // namespace

uint64_t mapped_symbol_address(int pid, const std::vector<Mapping>& maps, const Mapping& file, const std::string& name,
                               TargetFiles& files) {
    std::unordered_set<std::string_view> only = {name};
    auto opened = files.open_mapped(pid, file); // the mapped file itself: in a container, no path of ours names it
    if (!opened) return 0;
    auto syms = ElfSymbols::load(opened->fd_path(), &only);
    if (!syms) return 0;
    const ElfSymbol* s = (*syms)->find(name);
    if (!s) return 0;
    auto file_offset = (*syms)->vaddr_to_offset(s->vaddr);
    if (!file_offset) return 0;
    for (const auto& m : maps)
        if (m.dev == file.dev && m.inode == file.inode && *file_offset >= m.offset && *file_offset < m.offset + (m.end - m.start))
            return m.start + (*file_offset - m.offset);
    return 0;
}

Result<InjectionResult> load_agent(int pid, const std::string& agent_path, int patience_ms, bool again) {
    struct stat agent_st {};
    if (stat(agent_path.c_str(), &agent_st) != 0)
        return make_error(ExitCode::Internal, fmt::format("agent library {} is missing; rebuild gtrace", agent_path));
    InjectionResult result;
    std::vector<Mapping> maps = read_maps(pid);
    for (const auto& m : maps)
        if (same_file(m, agent_st) && !again) return result; // loaded earlier: its thread picks up the request
    TargetFiles files;
    uint64_t dlopen_fn = libc_symbol(pid, maps, "dlopen", files);
    uint64_t trampoline = sigreturn_trampoline(pid, maps, files);
    if (!dlopen_fn || !trampoline)
        return make_error(ExitCode::Internal, fmt::format("pid {}: its C library lacks {} (glibc 2.34+ on x86-64 is needed)", pid,
                                                          dlopen_fn ? "the sigreturn trampoline" : "dlopen"));
    std::string last_reason = "no thread could be stopped";
    timespec begin{};
    clock_gettime(CLOCK_MONOTONIC, &begin);
    for (;;) {
        for (int tid : list_threads(pid)) {
            ++result.attempts;
            StoppedThread t(tid);
            if (!t.stop()) continue;
            maps = read_maps(pid);
            if (std::string why = unsafe_reason(tid, maps); !why.empty()) {
                last_reason = fmt::format("thread {} {}", tid, why);
                continue; // released untouched
            }
            // In a container the library may have to be placed where the process can open it.
            auto where = agent_path_in_process(pid, agent_path);
            if (!where) return where.error(); // the thread is released untouched
            BorrowedCall call = prepare_borrowed_call(t.saved(), t.xstate(), blocked_signals(pid, tid), dlopen_fn, RTLD_NOW,
                                                      *where, trampoline);
            if (auto r = t.hand_off(call); !r) return r.error();
            // Tests kill gtrace here, with the thread stopped in the borrowed call's registers.
            if (auto hold = test_hook_number(GTRACE_TEST_HOOK("HOLD_BORROWED_MS"))) usleep(*hold * 1000);
            result.loaded_now = true;
            result.tid = static_cast<uint32_t>(tid);
            return result;
        }
        timespec now{};
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - begin.tv_sec) * 1000 + (now.tv_nsec - begin.tv_nsec) / 1000000 > patience_ms)
            return make_error(ExitCode::Internal, fmt::format("pid {}: no safe point to load the agent ({})", pid, last_reason));
        usleep(5000);
    }
}

} // namespace gtrace

#include "attach/agent_injector.h"

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

#include <array>
#include <cerrno>
#include <cstring>

#include <libunwind-ptrace.h>
#include <fmt/format.h>

#include "decode/elf_symbols.h"
#include "discover/proc_tree.h"
#include "discover/process_memory.h"

namespace gtrace {
namespace {

constexpr int kCallTimeoutMs = 10000;
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
    unw_addr_space_t as = unw_create_addr_space(&_UPT_accessors, 0);
    void* upt = _UPT_create(tid);
    unw_cursor_t cursor;
    std::string reason;
    if (!as || !upt || unw_init_remote(&cursor, as, upt) != 0) reason = "cannot unwind its stack";
    for (int depth = 0; reason.empty() && depth < 256; ++depth) {
        unw_word_t ip = 0;
        if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0) break;
        for (const auto& m : maps)
            if (ip >= m.start && ip < m.end && unsafe_object(m.path)) reason = "inside " + m.path;
        char name[256];
        unw_word_t off = 0;
        if (reason.empty() && unw_get_proc_name(&cursor, name, sizeof name, &off) == 0 && unsafe_function(name))
            reason = std::string("inside ") + name;
        if (unw_step(&cursor) <= 0) break;
    }
    if (upt) _UPT_destroy(upt);
    if (as) unw_destroy_addr_space(as);
    return reason;
}

// A thread held stopped by gtrace; released (exactly as found) when this goes away.
class StoppedThread {
public:
    explicit StoppedThread(int tid) : tid_(tid) {}
    StoppedThread(const StoppedThread&) = delete;
    ~StoppedThread() { release(); }

    bool stop() {
        if (ptrace(PTRACE_SEIZE, tid_, nullptr, nullptr) != 0) return false;
        seized_ = true;
        if (ptrace(PTRACE_INTERRUPT, tid_, nullptr, nullptr) != 0) return false;
        int status = 0;
        pid_t w;
        while ((w = waitpid(tid_, &status, __WALL)) < 0 && errno == EINTR) {
        }
        if (w != tid_ || !WIFSTOPPED(status)) return false;
        if (ptrace(PTRACE_GETREGS, tid_, nullptr, &saved_) != 0) return false;
        xstate_.resize(kXstateMax);
        iovec iov{xstate_.data(), xstate_.size()};
        if (ptrace(PTRACE_GETREGSET, tid_, NT_X86_XSTATE, &iov) != 0) return false;
        xstate_.resize(iov.iov_len);
        saved_valid_ = true;
        return true;
    }

    // Calls fn(args...) in the thread and returns rax. `stack_data` (a C string) is copied
    // below the red zone first and passed as the first argument.
    Result<uint64_t> call(uint64_t fn, std::array<uint64_t, 3> args, const std::string& stack_data = {}) {
        user_regs_struct r = saved_;
        uint64_t sp = (saved_.rsp - 256 - stack_data.size()) & ~uint64_t{15}; // 128-byte red zone, then ours
        if (!stack_data.empty()) {
            iovec local{const_cast<char*>(stack_data.data()), stack_data.size()}, remote{reinterpret_cast<void*>(sp), stack_data.size()};
            if (process_vm_writev(tid_, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(stack_data.size()))
                return make_error(ExitCode::Internal, fmt::format("cannot write to the stack of thread {}: {}", tid_, strerror(errno)));
            args[0] = sp;
        }
        sp -= 16;
        uint64_t zero = 0; // the return address: returning faults at 0, which we catch
        iovec local{&zero, 8}, remote{reinterpret_cast<void*>(sp + 8), 8};
        if (process_vm_writev(tid_, &local, 1, &remote, 1, 0) != 8)
            return make_error(ExitCode::Internal, fmt::format("cannot write to the stack of thread {}", tid_));
        r.rsp = sp + 8; // as after a call: rsp % 16 == 8 at the function's first instruction
        r.rip = fn;
        r.rdi = args[0], r.rsi = args[1], r.rdx = args[2];
        r.rax = 0;
        r.orig_rax = static_cast<uint64_t>(-1); // not in a system call: no restart on resume
        if (ptrace(PTRACE_SETREGS, tid_, nullptr, &r) != 0)
            return make_error(ExitCode::Internal, fmt::format("cannot set registers of thread {}", tid_));
        int deliver = 0;
        timespec start{};
        clock_gettime(CLOCK_MONOTONIC, &start);
        for (;;) {
            if (ptrace(PTRACE_CONT, tid_, nullptr, reinterpret_cast<void*>(static_cast<uintptr_t>(deliver))) != 0)
                return make_error(ExitCode::Internal, fmt::format("thread {} vanished during the call", tid_));
            deliver = 0;
            int status = 0;
            pid_t w = 0;
            while ((w = waitpid(tid_, &status, __WALL | WNOHANG)) == 0) {
                timespec now{};
                clock_gettime(CLOCK_MONOTONIC, &now);
                if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 > kCallTimeoutMs) {
                    abandoned_ = true; // it may hold locks now: leave it running rather than rewind it
                    return make_error(ExitCode::Internal, fmt::format("the call in thread {} did not return", tid_));
                }
                usleep(200);
            }
            if (w < 0 || WIFEXITED(status) || WIFSIGNALED(status)) {
                gone_ = true;
                return make_error(ExitCode::ProcessExited, fmt::format("thread {} exited during the call", tid_));
            }
            int sig = WSTOPSIG(status);
            if (status >> 16) continue; // a ptrace event stop (group stop, …): resume it
            user_regs_struct now{};
            ptrace(PTRACE_GETREGS, tid_, nullptr, &now);
            if (sig == SIGSEGV && now.rip == 0) return now.rax;
            deliver = sig; // the application's own signal: its handler runs, then our call goes on
        }
    }

    const user_regs_struct& saved() const { return saved_; }

private:
    void release() {
        if (!seized_ || gone_) return;
        if (saved_valid_ && !abandoned_) {
            ptrace(PTRACE_SETREGS, tid_, nullptr, &saved_); // orig_rax/rax intact: an interrupted call restarts
            iovec iov{xstate_.data(), xstate_.size()};
            ptrace(PTRACE_SETREGSET, tid_, NT_X86_XSTATE, &iov);
        }
        ptrace(PTRACE_DETACH, tid_, nullptr, nullptr);
    }

    int tid_;
    bool seized_ = false, saved_valid_ = false, abandoned_ = false, gone_ = false;
    user_regs_struct saved_{};
    std::vector<uint8_t> xstate_;
};

uint64_t libc_symbol(const std::vector<Mapping>& maps, const char* name) {
    for (const auto& m : maps)
        if (m.is_file() && is_libc(m.path))
            if (uint64_t a = mapped_symbol_address(maps, m.path, name)) return a;
    return 0;
}

bool same_file(const Mapping& m, const struct stat& st) { return m.inode == st.st_ino && m.dev == st.st_dev; }

std::string read_remote_string(int pid, uint64_t addr) {
    char buf[512] = {};
    if (!addr || !read_process_memory(pid, addr, buf, sizeof buf - 1)) {
        // The string may end within the last page: read it byte by byte.
        size_t n = 0;
        while (addr && n < sizeof buf - 1 && read_process_memory(pid, addr + n, buf + n, 1) && buf[n]) ++n;
    }
    return std::string(buf, strnlen(buf, sizeof buf));
}

} // namespace

uint64_t mapped_symbol_address(const std::vector<Mapping>& maps, const std::string& path, const std::string& name) {
    std::unordered_set<std::string_view> only = {name};
    auto syms = ElfSymbols::load(path, &only);
    if (!syms) return 0;
    const ElfSymbol* s = (*syms)->find(name);
    if (!s) return 0;
    auto file_offset = (*syms)->vaddr_to_offset(s->vaddr);
    if (!file_offset) return 0;
    for (const auto& m : maps)
        if (m.path == path && *file_offset >= m.offset && *file_offset < m.offset + (m.end - m.start))
            return m.start + (*file_offset - m.offset);
    return 0;
}

Result<InjectionResult> inject_agent(int pid, const std::string& agent_path, const std::string& config, int patience_ms) {
    struct stat agent_st {};
    if (stat(agent_path.c_str(), &agent_st) != 0)
        return make_error(ExitCode::Internal, fmt::format("agent library {} is missing; rebuild gtrace", agent_path));
    InjectionResult result;
    std::string last_reason = "no thread could be stopped";
    timespec begin{};
    clock_gettime(CLOCK_MONOTONIC, &begin);
    for (;;) {
        for (int tid : list_threads(pid)) {
            ++result.attempts;
            std::vector<Mapping> maps = read_maps(pid);
            StoppedThread t(tid);
            if (!t.stop()) continue;
            if (std::string why = unsafe_reason(tid, maps); !why.empty()) {
                last_reason = fmt::format("thread {} {}", tid, why);
                continue; // released by the destructor, untouched
            }
            std::string mapped_agent;
            for (const auto& m : maps)
                if (same_file(m, agent_st)) mapped_agent = m.path;
            if (mapped_agent.empty()) {
                uint64_t dlopen_fn = libc_symbol(maps, "dlopen");
                if (!dlopen_fn)
                    return make_error(ExitCode::Internal, fmt::format("pid {}: no dlopen in its libc (glibc 2.34+ needed)", pid));
                auto handle = t.call(dlopen_fn, {0, RTLD_NOW, 0}, agent_path + '\0');
                if (!handle) return handle.error();
                if (*handle == 0) {
                    std::string why;
                    if (uint64_t dlerror_fn = libc_symbol(maps, "dlerror"))
                        if (auto msg = t.call(dlerror_fn, {0, 0, 0}); msg) why = read_remote_string(pid, *msg);
                    return make_error(ExitCode::Internal, fmt::format("pid {}: dlopen of the agent failed: {}", pid, why));
                }
                result.loaded_now = true;
                maps = read_maps(pid);
                for (const auto& m : maps)
                    if (same_file(m, agent_st)) mapped_agent = m.path;
            }
            uint64_t start_fn = mapped_symbol_address(maps, mapped_agent, "gtrace_agent_start");
            if (!start_fn) return make_error(ExitCode::Internal, fmt::format("pid {}: the agent's start function is not mapped", pid));
            auto rc = t.call(start_fn, {0, 0, 0}, config + '\0');
            if (!rc) return rc.error();
            result.start_rc = static_cast<int>(static_cast<int32_t>(*rc));
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

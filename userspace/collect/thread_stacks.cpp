#include "collect/thread_stacks.h"
#include "foundation/test_hooks.h"

#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "discover/proc_tree.h"
#include "discover/process_memory.h"
#include "discover/stopped_thread.h"
#include "gtrace/events.h"

namespace gtrace {
namespace {

constexpr size_t kMaxNativeFrames = 128;

bool read_u64(int pid, uint64_t addr, uint64_t& out) { return read_process_value(pid, addr, out); }

// The same walk as bpf/pystack.bpf.h, from userspace, for a thread whose fs base we know:
// the raw frames of a complete walk, or nothing (no Python thread state, or a read failed).
std::optional<gt_py_stack_event> walk_python(int pid, uint64_t fs_base, const gt_py_layout& l) {
    gt_py_stack_event e{};
    e.cls = GT_EV_PYSTACK;
    e.pid = static_cast<uint32_t>(pid);
    uint64_t key_word = 0, tstate = 0, frame = 0;
    if (!read_u64(pid, l.tss_key_addr, key_word)) return std::nullopt;
    int key = static_cast<int>(static_cast<uint32_t>(key_word));
    if (key < 0 || key >= 32 || !read_u64(pid, fs_base + l.pthread_specific + key * 16 + 8, tstate) || !tstate)
        return std::nullopt;
    bool ok = read_u64(pid, tstate + l.tstate_frame, frame);
    if (ok && frame && l.cframe_frame != GT_PY_NO_OFFSET) ok = read_u64(pid, frame + l.cframe_frame, frame);
    unsigned n = 0;
    for (int i = 0; ok && frame && i < GT_PY_MAX_FRAMES + 32; ++i) {
        if (l.frame_owner != GT_PY_NO_OFFSET) {
            uint64_t word = 0;
            ok = read_u64(pid, frame + l.frame_owner, word);
            if (ok && static_cast<uint8_t>(word) == l.owner_c_stack) {
                ok = read_u64(pid, frame + l.frame_previous, frame);
                continue;
            }
        }
        if (n >= GT_PY_MAX_FRAMES) {
            e.truncated = 1;
            break;
        }
        gt_py_frame& f = e.frames[n];
        uint64_t code = 0;
        ok = ok && read_u64(pid, frame + l.frame_code, code);
        f.code = l.code_tagged ? code & ~1ull : code;
        uint64_t instr = 0;
        ok = ok && read_u64(pid, frame + l.frame_instr, instr);
        f.instr = l.instr_is_pointer ? instr : static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(instr)));
        ++n;
        ok = ok && read_u64(pid, frame + l.frame_previous, frame);
    }
    e.nframes = static_cast<uint16_t>(n);
    if (!ok) return std::nullopt;
    return e;
}

// Seize, interrupt, read, detach: the thread is stopped only inside this function.
ThreadStack read_one(int pid, int tid, const std::optional<PythonRuntime>& python) {
    ThreadStack t;
    t.tid = static_cast<uint32_t>(tid);
    t.name = read_thread_name(pid, tid);
    StopResult stopped = seize_and_stop(tid);
    if (stopped == StopResult::CannotAttach) {
        t.error = std::string("cannot attach: ") + strerror(errno);
        return t;
    }
    if (stopped == StopResult::Gone) {
        t.error = "the thread exited while being read";
        ptrace(PTRACE_DETACH, tid, nullptr, nullptr);
        return t;
    }
    user_regs_struct regs{};
    // Tests interrupt a dump here, with this thread stopped.
    if (auto hold = test_hook_number(GTRACE_TEST_HOOK("DUMP_HOLD_MS"))) usleep(*hold * 1000);
    if (ptrace(PTRACE_GETREGS, tid, nullptr, &regs) == 0) {
        for (const NativeFrame& f : unwind_stopped(tid, kMaxNativeFrames, false)) t.native.push_back(f.ip);
        if (python) t.python = walk_python(pid, regs.fs_base, python->layout);
    } else {
        t.error = std::string("cannot read registers: ") + strerror(errno);
    }
    ptrace(PTRACE_DETACH, tid, nullptr, nullptr);
    return t;
}

} // namespace

std::vector<ThreadStack> read_thread_stacks(int pid, const std::optional<PythonRuntime>& python,
                                            const std::atomic<int>& stop) {
    std::vector<ThreadStack> out;
    for (int tid : list_threads(pid)) {
        if (stop.load()) break;
        out.push_back(read_one(pid, tid, python));
    }
    return out;
}

} // namespace gtrace

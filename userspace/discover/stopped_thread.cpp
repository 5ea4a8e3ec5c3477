#include "discover/stopped_thread.h"

#include <elfutils/libdwfl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include <cerrno>
#include <memory>

namespace gtrace {

StopResult seize_and_stop(int tid) {
    if (ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0) return StopResult::CannotAttach;
    if (ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0) return StopResult::Gone;
    int status = 0;
    pid_t waited;
    while ((waited = waitpid(tid, &status, __WALL)) < 0 && errno == EINTR) {
    }
    return waited == tid && WIFSTOPPED(status) ? StopResult::Stopped : StopResult::Gone;
}

namespace {

// Unwinding needs .eh_frame, which is in the objects themselves: no separate debug files are
// looked for (nor fetched from a debuginfod server).
int no_debuginfo(Dwfl_Module*, void**, const char*, Dwarf_Addr, const char*, const char*, GElf_Word, char**) {
    return -1;
}

const Dwfl_Callbacks kProcCallbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = no_debuginfo,
    .section_address = nullptr,
    .debuginfo_path = nullptr,
};

struct Walk {
    Dwfl* dwfl;
    size_t max_frames;
    bool with_names;
    std::vector<NativeFrame>* frames;
};

int on_frame(Dwfl_Frame* state, void* arg) {
    auto* w = static_cast<Walk*>(arg);
    Dwarf_Addr pc = 0;
    bool activation = false;
    if (!dwfl_frame_pc(state, &pc, &activation) || pc == 0) return DWARF_CB_ABORT;
    NativeFrame f{pc, {}};
    if (w->with_names) {
        // A return address may be the first byte after its function: name the call instruction.
        Dwarf_Addr at = activation ? pc : pc - 1;
        if (Dwfl_Module* m = dwfl_addrmodule(w->dwfl, at))
            if (const char* name = dwfl_module_addrname(m, at)) f.name = name;
    }
    w->frames->push_back(std::move(f));
    return w->frames->size() < w->max_frames ? DWARF_CB_OK : DWARF_CB_ABORT;
}

} // namespace

std::vector<NativeFrame> unwind_stopped(int tid, size_t max_frames, bool with_names) {
    std::vector<NativeFrame> frames;
    std::unique_ptr<Dwfl, decltype(&dwfl_end)> dwfl(dwfl_begin(&kProcCallbacks), &dwfl_end);
    if (!dwfl) return frames;
    // /proc/<tid> is the thread's process; the thread is already in a ptrace stop (true: libdw
    // neither attaches nor detaches it).
    dwfl_report_begin(dwfl.get());
    int reported = dwfl_linux_proc_report(dwfl.get(), tid);
    if (dwfl_report_end(dwfl.get(), nullptr, nullptr) != 0 || reported != 0) return frames;
    if (dwfl_linux_proc_attach(dwfl.get(), tid, true) != 0) return frames;
    Walk walk{dwfl.get(), max_frames, with_names, &frames};
    dwfl_getthread_frames(dwfl.get(), tid, on_frame, &walk); // a stack cut short keeps its frames
    return frames;
}

} // namespace gtrace

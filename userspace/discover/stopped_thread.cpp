#include "discover/stopped_thread.h"

#include <libunwind-ptrace.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include <cerrno>

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

std::vector<NativeFrame> unwind_stopped(int tid, size_t max_frames, bool with_names) {
    std::vector<NativeFrame> frames;
    unw_addr_space_t as = unw_create_addr_space(&_UPT_accessors, 0);
    void* upt = _UPT_create(tid);
    unw_cursor_t cursor;
    if (as && upt && unw_init_remote(&cursor, as, upt) == 0) {
        do {
            unw_word_t ip = 0;
            if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0) break;
            NativeFrame f{ip, {}};
            char name[256];
            unw_word_t offset = 0;
            if (with_names && unw_get_proc_name(&cursor, name, sizeof name, &offset) == 0) f.name = name;
            frames.push_back(std::move(f));
        } while (frames.size() < max_frames && unw_step(&cursor) > 0);
    }
    if (upt) _UPT_destroy(upt);
    if (as) unw_destroy_addr_space(as);
    return frames;
}

} // namespace gtrace

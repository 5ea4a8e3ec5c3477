#include "capture/sample_events.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace gtrace {

namespace {

// A native stack's outermost frame is a thread's root unless frame-pointer unwinding stopped
// early at a function built without frame pointers.
bool is_thread_root(const std::string& name) {
    return name == "_start" || name == "start_thread" || name == "clone" || name == "clone3" ||
           name == "__libc_start_call_main" || name == "__libc_start_main" || name.starts_with("__clone");
}

} // namespace

void SampleEvents::on_sample(const gt_sample_event& e) {
    std::vector<PyFrame> stack; // outermost first
    if (PyStackRef py = s_.stacks.find(e.pid, e.py_stack)) {
        stack.assign(py->frames.rbegin(), py->frames.rend());
    } else if (e.native_bytes > 0) {
        size_t n = std::min<size_t>(static_cast<size_t>(e.native_bytes) / 8, GT_NATIVE_MAX_FRAMES);
        for (size_t i = n; i-- > 0;) {
            // Return addresses point after the call: look up the call itself.
            std::string name = s_.addresses.name_at(e.pid, i == 0 ? e.native[i] : e.native[i] - 1);
            if (!name.empty()) stack.push_back({std::move(name), {}, 0});
        }
        if (!stack.empty() && !is_thread_root(stack.front().qualname)) stack.insert(stack.begin(), {"[stack cut: no frame pointer]", {}, 0});
    }
    std::string comm(e.comm, strnlen(e.comm, sizeof e.comm));
    if (stack.empty()) stack.push_back({fmt::format("[{}]", comm), {}, 0});
    tracks_.add(e.pid, e.tid, e.ts_ns, comm, stack);
}

} // namespace gtrace

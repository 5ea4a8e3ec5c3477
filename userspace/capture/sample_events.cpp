#include "capture/sample_events.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "decode/off_cpu.h"

namespace gtrace {

namespace {

// A native stack's outermost frame is a thread's root unless frame-pointer unwinding stopped
// early at a function built without frame pointers.
bool is_thread_root(const std::string& name) {
    return name == "_start" || name == "start_thread" || name == "clone" || name == "clone3" ||
           name == "__libc_start_call_main" || name == "__libc_start_main" || name.starts_with("__clone");
}

} // namespace

std::vector<std::string> SampleEvents::native_names(uint32_t pid, const unsigned long long* ips, int bytes, size_t max_frames) {
    std::vector<std::string> names;
    size_t n = bytes > 0 ? std::min<size_t>(static_cast<size_t>(bytes) / 8, max_frames) : 0;
    for (size_t i = 0; i < n; ++i) // return addresses point after the call: look up the call itself
        names.push_back(addresses_.name_at(pid, i == 0 ? ips[i] : ips[i] - 1));
    return names;
}

void SampleEvents::on_sample(const gt_sample_event& e) {
    std::vector<PyFrame> stack; // outermost first
    if (PyStackRef py = stacks_.find(e.pid, e.py_stack)) {
        stack.assign(py->frames.rbegin(), py->frames.rend());
    } else {
        std::vector<std::string> names = native_names(e.pid, e.native, e.native_bytes, GT_NATIVE_MAX_FRAMES);
        for (auto it = names.rbegin(); it != names.rend(); ++it)
            if (!it->empty()) stack.push_back({std::move(*it), {}, 0});
        if (!stack.empty() && !is_thread_root(stack.front().qualname)) stack.insert(stack.begin(), {"[stack cut: no frame pointer]", {}, 0});
    }
    std::string comm(e.comm, strnlen(e.comm, sizeof e.comm));
    if (stack.empty()) stack.push_back({fmt::format("[{}]", comm), {}, 0});
    tracks_.add(e.pid, e.tid, e.ts_ns, comm, stack);
}

void SampleEvents::on_off_cpu(const gt_offcpu_event& e) {
    // Only where a step breakdown is made (analyze/step_analysis.h): a rank, or a process with
    // CUDA calls — not the launcher's monitor loop, nor a DataLoader worker waiting for work.
    const ProcessInfo* p = model_.find(e.pid);
    if (!p || p->forked_from || (!p->ranks.rank && p->total_calls() == 0)) {
        ++off_cpu_left_out_;
        return;
    }
    std::vector<std::string> native = native_names(e.pid, e.native, e.native_bytes, GT_OFFCPU_NATIVE_FRAMES);
    PyStackRef python = stacks_.find(e.pid, e.py_stack);
    static const std::vector<PyFrame> kNoFrames;
    TorchRange slice{e.pid, e.tid, e.off_ns, e.on_ns, off_cpu_slice_name(blocked_in(native, python ? python->frames : kNoFrames, e.syscall)),
                     python, nullptr, true};
    if (!slice.stack) { // no Python stack: the native frames the thread slept in
        std::vector<PyFrame> frames;
        for (auto& name : native)
            if (!name.empty()) frames.push_back({std::move(name), {}, 0});
        if (!frames.empty()) slice.stack = make_py_stack(std::move(frames), false);
    }
    out_.torch_range(slice);
    ++off_cpu_slices_;
}

} // namespace gtrace

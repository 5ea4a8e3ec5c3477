// The Python stacks of a capture, interned: BPF sends a stack's frames once, with its id, and
// every later event names only the id (gtrace/pystack.h). Each definition is symbolized when it
// arrives — its code objects are alive then — and shared by every event that names it.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "decode/python_frames.h"
#include "foundation/process_observer.h"

namespace gtrace {

struct PyStack {
    std::vector<PyFrame> frames;    // innermost first
    std::vector<std::string> texts; // "qualname (file:line)" per frame, then "[truncated …]" if cut
    std::string source;             // the innermost frame outside torch and CUDA libraries, as text
    int source_index = -1;          // ... and its index in frames (-1: none)
    bool truncated = false;         // deeper than the walk's limit: the outermost frames are missing
    const PyFrame* source_frame() const { return source_index >= 0 ? &frames[static_cast<size_t>(source_index)] : nullptr; }
};
using PyStackRef = std::shared_ptr<const PyStack>;

// A stack from its frames (innermost first): texts and source worked out; null if no frames.
PyStackRef make_py_stack(std::vector<PyFrame> frames, bool truncated);

// Thread-safe: definitions may be read on a thread of their own (capture/stack_definitions.h)
// while the capture loop names them.
class PythonStacks final : public ProcessObserver {
public:
    explicit PythonStacks(PythonFrames& symbolizer) : symbolizer_(symbolizer) {}

    // A stack's first sighting: symbolize and keep it (a torn stack is kept as unknown). Nothing
    // is kept for a process without a known interpreter (forgotten: it exited).
    void define(const gt_py_stack_event& e);
    // The stack an event named; null for id 0, a torn stack, or an id whose definition was lost.
    // An id not defined yet first has `pending` read (definitions not taken yet, elsewhere).
    PyStackRef find(uint32_t pid, uint64_t id);
    void set_pending(std::function<void()> pending) { pending_ = std::move(pending); }
    // The process exec'ed or exited: its ids mean nothing any more.
    void forget_process(uint32_t pid);
    void process_exec(uint32_t pid) override { forget_process(pid); }
    void process_exited(uint32_t pid) override { forget_process(pid); }

    uint64_t unknown_ids() const; // events naming an id never defined (lost)
    size_t size() const;

private:
    const PyStackRef* lookup(uint32_t pid, uint64_t id) const; // under mutex_; null: not defined

    PythonFrames& symbolizer_;
    std::function<void()> pending_;
    mutable std::mutex mutex_; // by_pid_ and unknown_; never held while pending_ runs
    std::unordered_map<uint32_t, std::unordered_map<uint64_t, PyStackRef>> by_pid_;
    uint64_t unknown_ = 0;
};

} // namespace gtrace

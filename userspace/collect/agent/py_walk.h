// The calling thread's Python stack, walked inside the process with the layout gtrace found
// (gtrace/pystack.h): the same frames, hash and stack id as BPF's walk, without a trap per call.
// The thread state comes from the interpreter's autoTSSkey slot, so threads that released the
// GIL (PyTorch does around every op) are walked too; a thread has exclusive use of its own frames
// while it is inside a CUDA call, so they are read in place.
//
// A wrong layout must never crash the job: until the walker has checked the layout — the first
// walks read through process_vm_readv, which fails instead of faulting, and every code object
// found must have PyCode_Type as its type — it reads nothing in place. A layout that fails the
// check is refused for good (counted).
#pragma once
#include <atomic>
#include <cstdint>

#include "gtrace/pystack.h"

namespace gtrace::agent {

struct PyWalkResult {
    uint8_t status = GT_PY_NONE; // enum gt_py_status
    uint16_t nframes = 0;
    bool truncated = false;
    uint64_t id = 0; // 0 unless status is GT_PY_OK
};

class PyWalker {
public:
    // A new layout (epoch changes with each): checked again from scratch.
    void set_layout(const gt_py_layout& layout, uint32_t pid);
    uint32_t epoch() const { return layout_.epoch; }
    bool refused() const { return state_.load(std::memory_order_relaxed) == kRefused; }
    // Fills frames[0..GT_PY_MAX_FRAMES) innermost first.
    PyWalkResult walk(gt_py_frame* frames);

private:
    enum : int { kChecking = 0, kTrusted = 1, kRefused = 2 };
    bool read(uint64_t addr, void* out, size_t len, bool in_place) const;
    gt_py_layout layout_{};
    uint32_t pid_ = 0;
    uint64_t code_type_ = 0; // &PyCode_Type in this process
    std::atomic<int> state_{kChecking};
    std::atomic<int> checked_walks_{0};
};

} // namespace gtrace::agent

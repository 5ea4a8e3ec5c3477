// The CUDA API probes' BPF object, in the best form the kernel offers:
// - Session (6.13+): one program runs at entry and return; untraced processes and calls nested
//   in a traced one return 1 at entry and cost no return trap;
// - Multi (6.6+): entry and return programs on multi-uprobe links;
// - PerProbe: the same programs, one link per probe.
// Whichever is loaded owns the maps the other objects share (Python layouts, stacks sent).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "foundation/result.h"

struct gtrace_proctree;
struct gtrace_cuda_api;
struct gtrace_cuda_api_session;
struct bpf_map;
struct bpf_program;

namespace gtrace {

enum class CudaProbeMode { Session, Multi, PerProbe };
const char* mode_name(CudaProbeMode m);

class CudaObject {
public:
    // Joins the process-tree object's session. Environment (tests): GTRACE_TEST_NO_UPROBE_SESSION,
    // GTRACE_TEST_NO_UPROBE_MULTI force the older forms.
    static Result<std::unique_ptr<CudaObject>> load(const gtrace_proctree* proc, uint32_t py_stack_every);
    ~CudaObject();

    CudaProbeMode mode() const { return mode_; }
    bpf_program* entry() const;  // the session program in Session mode
    bpf_program* exit() const;   // null in Session mode
    bpf_program* announce() const;
    bpf_map* py_stacks_sent() const;
    bpf_map* py_stack_defs() const; // the ring Python stack definitions go to
    std::vector<bpf_program*> programs() const;

private:
    CudaObject() = default;
    CudaProbeMode mode_ = CudaProbeMode::PerProbe;
    gtrace_cuda_api* classic_ = nullptr;
    gtrace_cuda_api_session* session_ = nullptr;
};

} // namespace gtrace

#include "attach/cuda_object.h"
#include "foundation/test_hooks.h"

#include <cerrno>
#include <cstdlib>

#include "attach/bpf_objects.h"
#include "attach/kernel_features.h"
#include "attach/uprobe_multi.h"
#include "cuda_api.skel.h"
#include "cuda_api_session.skel.h"
#include "proctree.skel.h"

namespace gtrace {

const char* mode_name(CudaProbeMode m) {
    switch (m) {
    case CudaProbeMode::Session: return "uprobe sessions";
    case CudaProbeMode::Multi: return "multi-uprobe links";
    default: return "one link per probe";
    }
}

Result<std::unique_ptr<CudaObject>> CudaObject::load(const gtrace_proctree* proc, uint32_t py_stack_every) {
    std::unique_ptr<CudaObject> o(new CudaObject());
    // Asked of the kernel before loading: a program declared for a link type a kernel lacks may
    // still load (6.1 accepts attach types it does not know), and then every link fails.
    bool multi = !GTRACE_TEST_HOOK("NO_UPROBE_MULTI") && probe_uprobe_multi().support == Support::Yes;
    bool session = multi && !GTRACE_TEST_HOOK("NO_UPROBE_SESSION") && probe_uprobe_session().support == Support::Yes;
    if (session) {
        o->session_ = gtrace_cuda_api_session__open();
        if (!o->session_) return bpf_error("opening the CUDA API BPF object", errno);
        o->session_->rodata->py_stack_every = py_stack_every;
        if (auto r = join_session(o->session_, proc); !r) return r.error();
        bpf_program__set_expected_attach_type(o->session_->progs.cuda_api_session, static_cast<bpf_attach_type>(kTraceUprobeSession));
        // A multi-uprobe link for the agent's announce too: a perf uprobe needs CAP_SYS_ADMIN on
        // recent kernels, a link only CAP_BPF and CAP_PERFMON (gtrace with file capabilities).
        bpf_program__set_expected_attach_type(o->session_->progs.agent_announce, static_cast<bpf_attach_type>(kTraceUprobeMulti));
        if (int err = gtrace_cuda_api_session__load(o->session_))
            return bpf_error("loading the CUDA API BPF program (uprobe sessions)", err);
        o->mode_ = CudaProbeMode::Session;
        return o;
    }
    o->classic_ = gtrace_cuda_api__open();
    if (!o->classic_) return bpf_error("opening the CUDA API BPF object", errno);
    o->classic_->rodata->py_stack_every = py_stack_every;
    if (auto r = join_session(o->classic_, proc); !r) return r.error();
    if (multi)
        for (bpf_program* p : {o->classic_->progs.cuda_api_enter, o->classic_->progs.cuda_api_exit, o->classic_->progs.agent_announce})
            bpf_program__set_expected_attach_type(p, static_cast<bpf_attach_type>(kTraceUprobeMulti));
    if (int err = gtrace_cuda_api__load(o->classic_)) return bpf_error("loading the CUDA API BPF programs", err);
    o->mode_ = multi ? CudaProbeMode::Multi : CudaProbeMode::PerProbe;
    return o;
}

CudaObject::~CudaObject() {
    if (session_) gtrace_cuda_api_session__destroy(session_);
    if (classic_) gtrace_cuda_api__destroy(classic_);
}

bpf_program* CudaObject::entry() const { return session_ ? session_->progs.cuda_api_session : classic_->progs.cuda_api_enter; }
bpf_program* CudaObject::exit() const { return session_ ? nullptr : classic_->progs.cuda_api_exit; }
bpf_program* CudaObject::announce() const { return session_ ? session_->progs.agent_announce : classic_->progs.agent_announce; }
bpf_map* CudaObject::py_stacks_sent() const { return session_ ? session_->maps.py_stacks_sent : classic_->maps.py_stacks_sent; }
bpf_map* CudaObject::py_stack_defs() const { return session_ ? session_->maps.py_stack_defs : classic_->maps.py_stack_defs; }

std::vector<bpf_program*> CudaObject::programs() const {
    if (session_) return {session_->progs.cuda_api_session, session_->progs.agent_announce};
    return {classic_->progs.cuda_api_enter, classic_->progs.cuda_api_exit, classic_->progs.agent_announce};
}

} // namespace gtrace

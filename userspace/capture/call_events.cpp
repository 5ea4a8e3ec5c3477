// Where each process's CUDA calls come from. A uprobe costs a trap per call — about 6 µs on an
// H100 host (bench/README.md), more than the PyTorch profiler's whole cost per launch — while the
// agent already sees every call in its CUPTI callbacks. So a process whose agent holds the
// callbacks records its own calls (with their Python stacks, walked in the process), and the
// CUDA uprobes come off as soon as no live process needs them: one without an agent (yet), one
// whose agent failed or lost the callbacks to another tool, every process under --no-gpu or
// --api-capture uprobes. A fork that did not exec needs none: it cannot use its parent's CUDA.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "foundation/printable.h"
#include "capture/call_events.h"
#include "foundation/test_hooks.h"
#include "decode/api_call.h"
#include "format/api_table.h"

namespace gtrace {

void CallEvents::on_api(const gt_api_event& e) {
    ApiCall call = decode_api_call(e);
    if ((e.flags & GT_API_EV_AGENT_RECORDS) || recorded_by_agent(call)) { // the probes were still on while its agent took over
        ++uprobe_calls_dropped_;
        return;
    }
    ++uprobe_calls_;
    call.stack = s_.stacks.find(e.pid, e.py_stack);
    if (call.launch) call.kernel = s_.kernel_names.name_of(call);
    take(call);
}

void CallEvents::take(ApiCall& call) {
    s_.model.record_call(call);
    if (!call.stack) {
        const ProcessInfo* p = s_.model.find(call.pid);
        auto t = p->threads.find(call.tid); // named by record_call
        auto origin = s_.backward.origin_of(call.pid, t->second.name, call.start_ns);
        call.stack = std::move(origin.stack);
        call.stack_thread = origin.tid;
    }
    if (s_.options.autograd_links)
        if (auto link = s_.autograd.link_of(call.pid, call.tid, call.start_ns)) {
            call.sequence_nr = link->sequence_nr;
            call.forward_stack = std::move(link->forward_stack);
        }
    s_.out.call(call);
    if (call.api == GT_API_CUDA_MALLOC || call.api == GT_API_CUDA_FREE) s_.memory.on_call(call);
    if (s_.agents) s_.join.add_call(call);
}

void CallEvents::update_sources(const std::map<uint32_t, std::string>& gpu_warnings) {
    const CaptureOptions& options = s_.options;
    auto& agents = s_.agents;
    if (!agents || !options.agent_calls) return;
    if (lagging_for_test()) return;
    bool need_uprobes = false;
    for (const auto& [pid, p] : s_.model.processes()) {
        if (p.exited || !s_.cuda_probes.maps_cuda(static_cast<int>(pid))) continue;
        // Asked as soon as its ring is ours, before its session begins (the agent waits for
        // that in attach mode): it records the calls from its first GPU record on. An agent
        // without CUPTI's callbacks (another tool holds them) never begins: the uprobes stay.
        if (agents->has_agent(pid)) agent_adopted(pid); // at adoption already, unless the process was not known then
        if (agents->has_callbacks(pid)) {
            if (uint64_t since = agents->calls_since(pid)) {
                calls_since_[pid] = since;
                continue;
            }
        } else if (p.forked_from && calls_since_.contains(*p.forked_from)) {
            continue;
        } else if (options.launched && !agents->has_agent(pid) && !gpu_warnings.contains(pid)) {
            continue; // its CUDA starts the agent at initialization, before any call
        }
        need_uprobes = true;
    }
    // Until an agent records calls, the probes stay: they also catch the first calls of a
    // process that dlopens CUDA later (probed up front, before its mapping is even seen).
    if (calls_since_.empty()) need_uprobes = true;
    if (need_uprobes == s_.cuda_probes.attached()) return;
    if (auto r = s_.cuda_probes.set_attached(need_uprobes); !r) s_.errors.defer(r.error());
    else if (!options.quiet)
        print_safe(stderr, "gtrace: CUDA uprobes {}\n",
                   need_uprobes ? "back on: a process needs them" : "off: every CUDA process records its own calls (agent)");
    ++uprobe_switches_;
}

// GTRACE_TEST_SOURCES_LAG_MS: look at the agents only this often, so that a test sees calls the
// uprobes caught after an agent began recording, before this loop learned it (as on a busy host).
bool CallEvents::lagging_for_test() {
    static const long lag_ms = [] {
        const char* v = GTRACE_TEST_HOOK("SOURCES_LAG_MS");
        return v ? atol(v) : 0L;
    }();
    if (lag_ms <= 0) return false;
    auto now = std::chrono::steady_clock::now();
    if (now - last_sources_update_ < std::chrono::milliseconds(lag_ms)) return true;
    last_sources_update_ = now;
    return false;
}

void CallEvents::set_python_layout(uint32_t pid, const gt_py_layout& layout) {
    py_layouts_[pid] = layout;
    if (requested_calls_.contains(pid)) s_.agents->request_calls(pid, layout, s_.options.py_stack_every, s_.options.call_source);
}

void CallEvents::agent_adopted(uint32_t pid) {
    if (!s_.agents || !s_.options.agent_calls || requested_calls_.contains(pid)) return;
    const ProcessInfo* p = s_.model.find(pid);
    if (!p || p->exited) return;
    requested_calls_.insert(pid);
    auto layout = py_layouts_.find(pid);
    s_.agents->request_calls(pid, layout == py_layouts_.end() ? gt_py_layout{} : layout->second, s_.options.py_stack_every,
                             s_.options.call_source);
}

void CallEvents::forget_process(uint32_t pid) {
    py_layouts_.erase(pid);
    requested_calls_.erase(pid);
    calls_since_.erase(pid);
    calls_until_.erase(pid);
}

void CallEvents::agent_stopped_calls(uint32_t pid, uint64_t ts_ns) { calls_until_[pid] = ts_ns; }

bool CallEvents::recorded_by_agent(const ApiCall& call) {
    auto it = calls_since_.find(call.pid);
    if (it == calls_since_.end()) {
        // The agent may have begun since update_sources last looked (a loop behind, longer on a
        // busy host): ask its ring now, or a call it recorded too would be in the trace twice.
        if (!requested_calls_.contains(call.pid)) return false;
        uint64_t since = s_.agents->calls_since(call.pid);
        if (!since) return false;
        it = calls_since_.emplace(call.pid, since).first;
    }
    auto until = calls_until_.find(call.pid); // it gave CUPTI's callbacks up: the uprobes record from then on
    return call.start_ns >= it->second && (until == calls_until_.end() || call.start_ns < until->second);
}

void CallEvents::on_agent_call(uint32_t pid, const gt_gpu_header& h) {
    if (h.type == GT_GPU_PYSTACK) {
        if (h.size < sizeof(gt_gpu_pystack)) return;
        const auto& s = reinterpret_cast<const gt_gpu_pystack&>(h);
        gt_py_stack_event e{};
        e.cls = GT_EV_PYSTACK;
        e.pid = pid;
        e.id = s.id;
        e.truncated = s.truncated;
        size_t room = (h.size - sizeof(gt_gpu_pystack)) / sizeof(gt_py_frame);
        e.nframes = static_cast<uint16_t>(std::min<size_t>({s.nframes, room, GT_PY_MAX_FRAMES}));
        std::memcpy(e.frames, s.frames, e.nframes * sizeof(gt_py_frame));
        s_.stacks.define(e);
        return;
    }
    if (h.size < sizeof(gt_gpu_call)) return;
    const auto& c = reinterpret_cast<const gt_gpu_call&>(h);
    if (c.api >= GT_API_COUNT || c.end < c.start) return; // a hostile or torn record
    ApiCall call;
    call.api = static_cast<gt_cuda_api>(c.api);
    call.pid = pid;
    call.tid = c.tid;
    call.start_ns = c.start;
    call.end_ns = c.end;
    call.correlation = h.correlation;
    call.ret = c.ret;
    call.by_agent = true;
    call.stack = s_.stacks.find(pid, c.py_stack);
    ++agent_calls_;
    agent_call_pids_.insert(pid);
    take(call);
}

nlohmann::json CallEvents::facts() const {
    nlohmann::json pids = nlohmann::json::array();
    for (uint32_t pid : agent_call_pids_) pids.push_back(pid);
    const AgentTotals totals = s_.agents ? s_.agents->totals() : AgentTotals{};
    return {{"mode", s_.options.agent_calls && s_.agents ? "agent" : "uprobes"},
            {"calls_by_agent", agent_calls_},
            {"calls_by_uprobes", uprobe_calls_},
            {"uprobe_calls_dropped_as_recorded_by_agent", uprobe_calls_dropped_},
            {"processes_recorded_by_agent", pids},
            {"uprobes_attached_at_end", s_.cuda_probes.attached()},
            {"requested_source", s_.options.call_source == GT_CALLS_FROM_RECORDS ? "records" : "callbacks"},
            {"agents_recording_from_api_records", totals.calls_from_records},
            {"call_stacks_missed", totals.call_stacks_missed},
            {"uprobe_switches", uprobe_switches_}};
}

void CallEvents::print_summary() const {
    if (agent_calls_ || !calls_since_.empty())
        print_safe(stderr, "  calls recorded by the agent (CUPTI {}) in {} processes: {}; by uprobes: {}; uprobes {} at the end\n",
                   s_.agents && s_.agents->totals().calls_from_records ? "API records" : "callbacks", agent_call_pids_.size(),
                   agent_calls_, uprobe_calls_, s_.cuda_probes.attached() ? "on" : "off");
}

} // namespace gtrace

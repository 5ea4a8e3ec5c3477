#include "capture/gpu_events.h"

#include <limits.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "attach/agent_injector.h"
#include "decode/gpu_activity.h"
#include "foundation/elf_symbols.h"
#include "foundation/printable.h"
#include "foundation/privilege.h"

namespace gtrace {
namespace {

constexpr int kInjectPatienceMs = 300; // per try; the capture loop must keep draining BPF events
constexpr int kMaxInjectTries = 10;    // one try per rescan (about a second apart)
constexpr int kDetachTimeoutMs = 3000;
constexpr int kAgentStartTimeoutMs = 5000; // an agent reads its mailbox within 0.1 s (10 ms after loading)
constexpr int kMaxReasks = 5; // an agent that withdrew its offer is asked again, this many times

std::string agent_library() {
    if (const char* p = own_env("GTRACE_AGENT")) return p;
    char exe[PATH_MAX] = {};
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    std::string dir = n > 0 ? std::string(exe, static_cast<size_t>(n)) : std::string(".");
    dir = dir.substr(0, dir.rfind('/'));
    for (const char* rel : {"/libgtrace_agent.so", "/../lib/gtrace/libgtrace_agent.so"})
        if (access((dir + rel).c_str(), R_OK) == 0) return dir + rel;
    return dir + "/libgtrace_agent.so";
}

std::vector<std::string> split_paths(const std::string& list) {
    std::vector<std::string> out;
    for (size_t p = 0; p <= list.size();) {
        size_t colon = std::min(list.find(':', p), list.size());
        if (colon > p) out.push_back(list.substr(p, colon - p));
        p = colon + 1;
    }
    return out;
}

} // namespace

std::pair<std::string, std::vector<std::string>> GpuEvents::cupti_for(int pid) {
    const std::string& all = s_.options.cupti;
    if (all.empty() || !Privilege::privileged()) return {all, {}};
    // Privileged, a --cupti library goes only into a process that could load it itself: its
    // path, resolved in the process's root with its credentials (launched: the invoker's, who
    // the command runs as), must be the very file checked.
    std::string kept;
    std::vector<std::string> refused;
    for (const std::string& path : split_paths(all)) {
        struct stat host {};
        bool same = false;
        auto is_host = [&](const InputFile& f) { return f.stat().st_dev == host.st_dev && f.stat().st_ino == host.st_ino; };
        if (stat(path.c_str(), &host) == 0) {
            if (s_.options.launched) {
                AsInvoker as_invoker;
                auto f = open_input_file(path);
                same = as_invoker.ok() && f && is_host(*f);
            } else {
                for (auto& [p, f] : s_.target_files.open_in_root(pid, {path})) same = is_host(f);
            }
        }
        if (same) kept += (kept.empty() ? "" : ":") + path;
        else refused.push_back(path);
    }
    return {kept, refused};
}

Result<void> GpuEvents::start() {
    if (!s_.options.gpu) return {};
    agent_path_ = agent_library();
    if (access(agent_path_.c_str(), R_OK) != 0)
        return make_error(ExitCode::Internal, fmt::format("the agent library {} is missing; rebuild gtrace or pass --no-gpu", agent_path_));
    // Privileged, gtrace loads into other processes only a library no one but root can change.
    if (Privilege::privileged()) {
        auto safe = check_root_owned_path(agent_path_);
        if (!safe)
            return make_error(ExitCode::Usage, fmt::format("the agent library refused: {} ({}); install gtrace where only root can "
                                                           "change it (the package under /opt or /usr/local), or pass --no-gpu",
                                                           printable(safe.error().message), Privilege::reason()));
        agent_path_ = *safe;
    }
    std::unordered_set<std::string_view> only = {GT_AGENT_ANNOUNCE_SYMBOL};
    auto syms = ElfSymbols::load(agent_path_, &only);
    const ElfSymbol* announce = syms ? (*syms)->find(GT_AGENT_ANNOUNCE_SYMBOL) : nullptr;
    auto offset = announce ? (*syms)->vaddr_to_offset(announce->vaddr) : std::nullopt;
    if (!offset) return make_error(ExitCode::Internal, fmt::format("{} lacks {}; rebuild gtrace", agent_path_, GT_AGENT_ANNOUNCE_SYMBOL));
    if (auto [kept, refused] = cupti_for(s_.options.pid); !refused.empty())
        return make_error(ExitCode::Usage, fmt::format("--cupti {} refused: PID {} could not load it itself (its root names another file "
                                                       "there, or its user may not read it); a privileged gtrace loads only what the "
                                                       "process could ({})", printable(refused.front()), s_.options.pid, Privilege::reason()));
    auto link = s_.bpf.attach_agent_probe(agent_path_, *offset);
    if (!link) return link.error();
    agent_link_.emplace(std::move(*link));
    auto channel = AgentChannel::create(agent_path_);
    if (!channel) return channel.error();
    s_.agents.emplace(std::move(*channel));
    s_.agents->time_agents_self(s_.options.bpf_stats);
    return {};
}

// Launch mode: the agent waits in CUDA's initialization until gtrace asks it for the calls
// (await_calls), so that none is missed. Only here: an agent a process already holds from an
// older gtrace would refuse the key.
std::string GpuEvents::agent_config() const {
    if (!s_.agents) return {};
    return s_.agents->config(s_.options.cupti) + (s_.options.agent_calls ? ";await_calls=1" : ""); // checked at start()
}

void GpuEvents::warn_no_gpu(uint32_t pid, const std::string& why) {
    warnings_[pid] = why;
    if (!s_.options.quiet) print_safe(stderr, "gtrace: warning: no GPU data from pid {}: {}; its CPU side is traced\n", pid, why);
}

bool GpuEvents::inject_if_cuda(int pid, const std::vector<Mapping>& maps) {
    auto& agents = s_.agents;
    const CaptureOptions& options = s_.options;
    if (!agents) return false;
    uint32_t upid = static_cast<uint32_t>(pid);
    int& tries = injection_tries_[upid];
    if (tries < 0 || tries >= kMaxInjectTries || agents->has_agent(upid)) return false;
    const ProcessInfo* p = s_.model.find(upid);
    // A child forked after its parent initialized CUDA cannot use CUDA; CUPTI must stay out.
    if (!p || p->forked_from) return false;
    bool uses_cuda = false;
    for (const auto& m : maps)
        if (m.executable && s_.cuda_probes.objects().contains({m.dev, m.inode}) && s_.cuda_probes.objects().at({m.dev, m.inode}).mapped)
            uses_cuda = true;
    if (!uses_cuda) return false;
    // The agent is mapped (dormant from an earlier capture, just loaded by us, or started by
    // CUDA in launch mode): ask it through its mailbox, or take what it offers us.
    if (uint64_t mailbox = agents->mailbox_address(maps)) {
        // Attach mode: the agent also serves the NVTX tables of the modules loaded now.
        auto [cupti, refused] = cupti_for(pid);
        if (!refused.empty() && !options.quiet)
            print_safe(stderr, "gtrace: warning: pid {} could not load --cupti {} itself; its agent uses the process's own libcupti\n",
                       pid, refused.front());
        std::string config = agents->config(cupti) + (options.launched ? "" : nvtx_.tables_config(upid, maps));
        auto asked = agents->ask(upid, mailbox, config, !options.launched);
        if (!asked) {
            tries = -1;
            warn_no_gpu(upid, asked.error().message);
        } else if (*asked != AgentAsk::Waiting) {
            tries = -1;
        } else if (!options.launched) {
            return true; // the agent was busy answering: ask again after this batch
        }
        return false;
    }
    if (options.launched) return false; // CUDA loads it at initialization
    if (auto it = injected_at_.find(upid); it != injected_at_.end()) {
        if (std::chrono::steady_clock::now() - it->second > std::chrono::milliseconds(kAgentStartTimeoutMs)) {
            tries = -1;
            warn_no_gpu(upid, "the agent library did not load");
        }
        return false; // its dlopen is under way: a later scan finds the mailbox
    }
    ++tries;
    auto r = load_agent(pid, agent_path_, kInjectPatienceMs);
    if (r) {
        injected_at_[upid] = std::chrono::steady_clock::now();
        return true;
    }
    if (r.error().code == ExitCode::ProcessExited) {
        tries = -1;
        return false;
    }
    if (tries >= kMaxInjectTries || r.error().message.find("no safe point") == std::string::npos) {
        tries = kMaxInjectTries;
        warn_no_gpu(upid, r.error().message);
    }
    return false; // no safe point this time: the next rescan tries again
}

void GpuEvents::on_gpu_record(uint32_t pid, const gt_gpu_header& h, int64_t clock_offset_ns) {
    if (h.type == GT_GPU_CALL || h.type == GT_GPU_PYSTACK) {
        calls_.on_agent_call(pid, h);
        return;
    }
    if (h.type == GT_GPU_NVTX_RANGE || h.type == GT_GPU_NVTX_MODULE) {
        nvtx_.on_record(pid, h);
        return;
    }
    if (h.type == GT_GPU_API) {
        if (auto a = decode_gpu_api(pid, h, clock_offset_ns)) s_.join.add_api_record(*a);
        return;
    }
    if (h.type == GT_GPU_MEMORY_STATE) {
        const auto& m = reinterpret_cast<const gt_gpu_memory_state&>(h);
        if (h.size >= sizeof(gt_gpu_memory_state) && m.device < kMaxDevices && memory_states_seen_.emplace(pid, m.device).second)
            on_memory_state(pid, m);
        else
            ++memory_states_refused_;
        return;
    }
    if (h.type == GT_GPU_CALLBACKS_YIELDED) {
        if (h.size >= sizeof(gt_gpu_callbacks_yielded)) on_callbacks_yielded(pid, reinterpret_cast<const gt_gpu_callbacks_yielded&>(h));
        return;
    }
    if (h.type == GT_GPU_SHARED_CUPTI) {
        if (h.size >= sizeof(gt_gpu_shared_cupti)) on_job_window(pid, reinterpret_cast<const gt_gpu_shared_cupti&>(h));
        return;
    }
    if (h.type == GT_GPU_MEMORY) {
        if (h.size >= sizeof(gt_gpu_memory)) {
            const auto& m = reinterpret_cast<const gt_gpu_memory&>(h);
            s_.memory.on_record(pid, m, gpu_to_monotonic(m.ts, clock_offset_ns));
        }
        return;
    }
    auto op = decode_gpu_op(pid, h, clock_offset_ns);
    if (!op) return;
    if (op->kind == GpuOpKind::Sync) { // a wait, not GPU work: only the Kineto writer keeps it (cuda_sync)
        s_.out.gpu_op(*op);
        return;
    }
    s_.join.add_op(*op); // its flow first, when its call is known: a writer may put the link on the op itself
    s_.out.gpu_op(*op);
}

namespace {

const char* torch_status_text(uint8_t status) {
    switch (status) {
    case GT_TORCH_READ: return "read";
    case GT_TORCH_NO_PYTHON: return "not read: no initialized CPython in the process";
    case GT_TORCH_NOT_IMPORTED: return "none: no PyTorch with CUDA initialized in the process";
    case GT_TORCH_GIL_TIMEOUT: return "not read: the Python interpreter did not let the agent in within 1 s";
    case GT_TORCH_ERROR: return "not read: torch.cuda.memory_reserved/memory_allocated raised";
    case GT_TORCH_NO_DEVICE: return "not read: torch counts fewer devices";
    default: return "not read";
    }
}

// The agents' own time on the job's threads: per CUPTI API callback (its Python walk included)
// and per walk. Taken only with --bpf-stats (two clock reads each).
nlohmann::json agent_self_time(const AgentTotals& t, bool asked) {
    if (!asked) return "not measured: --bpf-stats measures it";
    auto per = [](uint64_t ns, uint64_t n) { return n ? static_cast<double>(ns) / static_cast<double>(n) : 0.0; };
    return {{"callbacks", t.self_callbacks}, {"callback_ns", t.self_callback_ns},
            {"ns_per_callback", per(t.self_callback_ns, t.self_callbacks)}, {"py_walks", t.self_py_walks},
            {"py_walk_ns", t.self_py_walk_ns}, {"ns_per_py_walk", per(t.self_py_walk_ns, t.self_py_walks)}};
}

} // namespace

void GpuEvents::on_memory_state(uint32_t pid, const gt_gpu_memory_state& m) {
    s_.memory.on_state(pid, m, m.ts); // the agent stamped it on CLOCK_MONOTONIC
    const bool torch = m.have & GT_MEMSTATE_TORCH;
    nlohmann::json fact = {{"device", m.device}, {"torch", torch_status_text(m.torch)},
                           {"curve_starts_at", torch ? "torch_reserved" : "device_used"}};
    if (m.have & GT_MEMSTATE_DEVICE) fact["device_used_bytes"] = m.device_used, fact["device_total_bytes"] = m.device_total;
    if (torch) fact["torch_reserved_bytes"] = m.torch_reserved, fact["torch_allocated_bytes"] = m.torch_allocated;
    memory_at_attach_[std::to_string(pid)].push_back(fact);
    if (s_.options.quiet) return;
    auto mib = [](uint64_t b) { return static_cast<double>(b) / (1 << 20); };
    print_safe(stderr, "gtrace: pid {} GPU {} at attach: {:.1f} of {:.1f} MiB in use on the device; torch: {}", pid,
               m.device, mib(m.device_used), mib(m.device_total), torch_status_text(m.torch));
    if (torch) print_safe(stderr, " (reserved {:.1f} MiB, allocated {:.1f} MiB)", mib(m.torch_reserved), mib(m.torch_allocated));
    print_safe(stderr, "\n");
}

double GpuEvents::since_start_s(uint64_t ns) const { return ns > started_ns_ ? static_cast<double>(ns - started_ns_) / 1e9 : 0.0; }

std::string GpuEvents::job_window_text(const JobProfilerWindow& w) const {
    std::string text = fmt::format("its own profiler (torch.profiler, dynolog, a tool) had CUPTI's records on from {:.3f} s{}",
                                   since_start_s(w.from_ns), w.found_open ? " (open already when gtrace attached)" : "");
    text += w.to_ns ? fmt::format(" to {:.3f} s", since_start_s(w.to_ns)) : std::string(" to the end of the capture");
    text += w.found_by_kinds ? " after gtrace started: gtrace recorded beside it; its records until gtrace found the window by their kinds "
                               "(no buffer of its own was in CUPTI when gtrace attached) went to gtrace's buffers, not to it, and "
                               "every later one to it"
                             : " after gtrace started: gtrace recorded beside it, and gave it back all its records";
    if (w.buffers_lost)
        text = fmt::format("{} but {} buffers: their callback was not known to gtrace, so its own trace misses them", text, w.buffers_lost);
    return text;
}

void GpuEvents::on_callbacks_yielded(uint32_t pid, const gt_gpu_callbacks_yielded& y) {
    const double at_s = since_start_s(y.ts);
    const char* calls = y.calls == GT_YIELD_CALLS_FROM_RECORDS ? "; its calls come from CUPTI's API records, without Python stacks"
                        : y.calls == GT_YIELD_CALLS_TO_UPROBES  ? "; the uprobes record its calls again"
                                                                : "";
    std::string text = fmt::format("its own profiler took CUPTI's callback API at {:.3f} s (one subscriber before CUDA 13.3): gtrace "
                                   "let it go, so that the profiler keeps its GPU records; GPU work is joined to its calls through "
                                   "CUPTI's API records from then on{}", at_s, calls);
    callbacks_yielded_[std::to_string(pid)] = {{"at_s", at_s}, {"text", text}};
    if (y.calls == GT_YIELD_CALLS_TO_UPROBES) calls_.agent_stopped_calls(pid, y.ts);
    if (!s_.options.quiet) print_safe(stderr, "gtrace: pid {}: {}\n", pid, text);
}

void GpuEvents::on_job_window(uint32_t pid, const gt_gpu_shared_cupti& w) {
    job_windows_.push_back({pid, w.from, w.to, w.buffers_lost, w.found_open != 0, w.found_by_kinds != 0});
    if (!s_.options.quiet) print_safe(stderr, "gtrace: pid {}: {}\n", pid, job_window_text(job_windows_.back()));
}

void GpuEvents::on_agent_state(uint32_t pid, const gt_agent_ring& ring) {
    std::string message(ring.message, strnlen(ring.message, sizeof ring.message));
    if (ring.state == GT_AGENT_ACTIVE) {
        if (!s_.options.quiet)
            print_safe(stderr, "gtrace: GPU agent active in pid {} ({})\n", pid,
                       std::string(ring.cupti_path, strnlen(ring.cupti_path, sizeof ring.cupti_path)));
        if (!message.empty()) {
            warnings_[pid] = message;
            if (!s_.options.quiet) print_safe(stderr, "gtrace: pid {}: {}\n", pid, message);
        }
        if (ring.flags & GT_AGENT_MULTI_SUBSCRIBER) {
            std::string text = "a tool in it (its own profiler) had put CUPTI in multi-subscriber mode (CUDA 13.3+): gtrace "
                               "records as a subscriber of its own beside it, each with its own records";
            beside_subscribers_[std::to_string(pid)] = text;
            if (!s_.options.quiet) print_safe(stderr, "gtrace: pid {}: {}\n", pid, text);
        }
    } else if (ring.state == GT_AGENT_FAILED) {
        warn_no_gpu(pid, message);
    }
    // A detached agent's slots stay known to BPF: a call still in flight then keeps its id.
}

void GpuEvents::poll() {
    if (!s_.agents) return;
    auto answers = s_.agents->poll(*this);
    for (const auto& [pid, why] : answers.refused) warn_no_gpu(pid, why);
    for (const auto& [pid, seconds] : answers.withdrawn) {
        // Taken too late (a busy host, a slow attach of many processes): the next rescan asks
        // again — a rescan of known code is quick, so the new offer is taken in time.
        std::string why = fmt::format("its agent withdrew its offer: this gtrace did not take it within {:.1f} s "
                                      "(a busy host, or a slow attach of many processes)", seconds);
        if (int& asked = reasked_[pid]; asked < kMaxReasks) {
            ++asked;
            injection_tries_[pid] = 0;
            if (!s_.options.quiet) print_safe(stderr, "gtrace: pid {}: {}; asking again\n", pid, why);
        } else {
            warn_no_gpu(pid, fmt::format("{}; asked {} times", why, kMaxReasks + 1));
        }
    }
    for (uint32_t pid : s_.agents->unanswered_requests(kAgentStartTimeoutMs)) {
        if (!s_.model.find(pid) || s_.model.find(pid)->exited) continue;
        warn_no_gpu(pid, fmt::format("the agent did not answer within {} s", kAgentStartTimeoutMs / 1000));
    }
}

void GpuEvents::process_exited(uint32_t pid) {
    // Ended while its agent was loading or had not answered (a short job, a busy host): its GPU
    // work is not in the trace, which the totals alone would not say.
    if (s_.agents && !s_.agents->has_agent(pid) && !warnings_.contains(pid) &&
        (injected_at_.contains(pid) || s_.agents->has_pending_request(pid)))
        warn_no_gpu(pid, "it exited before its agent answered");
    injection_tries_.erase(pid);
    injected_at_.erase(pid);
    reasked_.erase(pid);
    if (s_.agents) s_.agents->retire(pid, *this);
    s_.join.forget_process(pid);
}

void GpuEvents::finish() {
    if (!s_.agents) return;
    // A process whose agent had not answered yet (a short capture, a busy host) is named: its
    // GPU work is missing from the trace, which the totals alone would not say.
    for (uint32_t pid : s_.agents->unanswered_requests(0))
        if (const ProcessInfo* p = s_.model.find(pid); p && !p->exited)
            warn_no_gpu(pid, "its agent had not answered when the capture ended");
    s_.agents->detach_all(*this, kDetachTimeoutMs);
    update_lost();
}

void GpuEvents::update_lost() {
    if (!s_.agents) return;
    AgentTotals t = s_.agents->totals();
    s_.model.agent_ring_lost = t.ring_dropped;
    s_.model.cupti_lost = t.cupti_dropped;
}

nlohmann::json GpuEvents::job_windows_json() const {
    nlohmann::json windows = nlohmann::json::array();
    for (const auto& w : job_windows_) {
        windows.push_back({{"pid", w.pid}, {"from_s", since_start_s(w.from_ns)},
                           {"to_s", w.to_ns ? nlohmann::json(since_start_s(w.to_ns)) : nlohmann::json()},
                           {"found_open", w.found_open}, {"found_by_its_kinds", w.found_by_kinds}, {"buffers_not_given_back", w.buffers_lost},
                           {"gtrace", "recorded beside it"}, {"text", job_window_text(w)}});
    }
    return windows;
}

nlohmann::json GpuEvents::facts() const {
    if (!s_.agents) return {{"enabled", false}};
    AgentTotals t = s_.agents->totals();
    const JoinStats& j = s_.join.stats();
    Unlinked u = s_.join.unlinked();
    nlohmann::json warnings = nlohmann::json::object();
    for (const auto& [pid, w] : warnings_) warnings[std::to_string(pid)] = w;
    return {{"enabled", true},
            {"agents", t.agents},
            {"agents_active", t.active},
            {"agents_failed", t.failed},
            {"records", t.records},
            {"gpu_ops", j.gpu_ops},
            {"joined_to_call", j.joined},
            {"joined_by_cupti_api_record", j.joined_by_api_record},
            {"calls_with_correlation", j.calls_with_correlation},
            {"unlinked", {{"before_first_call", u.before_first_call}, {"untraced_call", u.untraced_call},
                          {"after_last_call", u.after_last_call}, {"no_traced_call", u.no_traced_call}}},
            {"lost_ring_full", t.ring_dropped},
            {"ring_records_corrupt", t.ring_corrupt + memory_states_refused_},
            {"lost_by_cupti", t.cupti_dropped},
            {"cupti_buffers_refused", t.buffers_refused},
            {"ops_of_calls_in_flight_at_stop_left_out", t.trimmed_at_stop},
            {"memory_at_attach", memory_at_attach_},
            {"job_profiler_windows", job_windows_json()},
            {"callbacks_given_to_job_profiler", callbacks_yielded_},
            {"cupti_multi_subscriber", beside_subscribers_},
            {"agent_self_time", agent_self_time(t, s_.options.bpf_stats)},
            {"warnings", warnings}};
}

void GpuEvents::print_summary() const {
    if (!s_.agents) {
        print_safe(stderr, "  GPU: off (--no-gpu)\n");
        return;
    }
    AgentTotals t = s_.agents->totals();
    const JoinStats& j = s_.join.stats();
    print_safe(stderr, "  GPU: {} agents ({} active, {} failed), {} kernels/copies/sets, {} linked to their CPU call\n",
               t.agents, t.active, t.failed, j.gpu_ops, j.joined);
    for (const auto& w : job_windows_) print_safe(stderr, "  pid {}: {}\n", w.pid, job_window_text(w));
    if (j.joined < j.gpu_ops) {
        Unlinked u = s_.join.unlinked();
        print_safe(stderr, "  WARNING: {} GPU ops are not linked to a CPU call:", j.gpu_ops - j.joined);
        const std::pair<uint64_t, const char*> why[] = {
            {u.before_first_call, "issued before the first traced call (in flight at attach)"},
            {u.untraced_call, "issued by a call gtrace did not trace (an API it does not probe, or a lost call event)"},
            {u.after_last_call, "issued after the last traced call (its call event never arrived)"},
            {u.no_traced_call, "in a process none of whose calls carried a correlation id"}};
        const char* sep = " ";
        for (const auto& [n, text] : why)
            if (n) {
                print_safe(stderr, "{}{} {}", sep, n, text);
                sep = "; ";
            }
        print_safe(stderr, " (otherData.gpu.unlinked)\n");
    }
    if (t.ring_corrupt + memory_states_refused_)
        print_safe(stderr, "  WARNING: {} positions or records in the agents' rings made no sense and were skipped\n",
                   t.ring_corrupt + memory_states_refused_);
}

} // namespace gtrace

#include "capture/process_events.h"
#include "foundation/test_hooks.h"

#include <algorithm>
#include <cstdlib>
#include <unistd.h>

#include <fmt/format.h>

#include "discover/proc_tree.h"
#include "discover/python_runtime.h"
#include "foundation/bounded_call.h"
#include "foundation/printable.h"
#include "foundation/privilege.h"

namespace gtrace {

namespace {

bool process_alive(int pid) {
    auto st = read_proc_stat(pid);
    return st && st->state != 'Z' && st->state != 'X';
}

} // namespace

template <typename Step>
void ProcessEvents::guarded(int pid, const char* step, Step&& run) {
    try {
        run();
    } catch (const std::exception& e) {
        skip(static_cast<uint32_t>(pid), fmt::format("{}: {}", step, e.what()));
        return;
    }
    // Its files did not answer within the deadline (a file system that hangs): what it names
    // is not looked at again, and the process is left out.
    if (s_.target_files.hung(pid))
        skip(static_cast<uint32_t>(pid), fmt::format("{}: its files did not answer within {} ms (a file system that hangs)", step,
                                                     kTargetFsDeadline.count()));
}

std::string ProcessEvents::not_ours(int pid) const {
    if (s_.options.allow_other_users || Privilege::invoker().real_root()) return {};
    auto creds = read_credentials(pid);
    uint32_t ours = Privilege::invoker().uid;
    if (!creds || creds->all_uids(ours)) return {};
    return fmt::format("owned by uid {} (effective {}), not by uid {} for whom gtrace runs; root may add --allow-other-users",
                       creds->real_uid(), creds->uid[1], ours);
}

void ProcessEvents::skip(uint32_t pid, const std::string& reason) {
    if (skipped_.skip(pid, reason) && !s_.options.quiet)
        print_safe(stderr, "gtrace: warning: pid {} left out: {}; the capture goes on\n", pid, printable(reason));
    s_.bpf.untrack(pid);
    if (const ProcessInfo* p = s_.model.find(pid); p && !p->exited) exited(pid, 0);
}

Result<void> ProcessEvents::track_tree(uint64_t root_start_ticks) {
    // Fork events are live before the tree is entered into the map: a child forked while we
    // walk /proc is either found by the next walk or reported by BPF. Walk until stable.
    if (auto delay = test_hook_number(GTRACE_TEST_HOOK("ATTACH_DELAY_MS"))) usleep(*delay * 1000);
    for (size_t known = 0;;) {
        std::vector<int> tree = list_tree(s_.options.pid, getpid()); // never gtrace itself, nor its children
        for (int pid : tree) {
            if (s_.model.find(static_cast<uint32_t>(pid))) continue;
            auto st = read_proc_stat(pid);
            if (!st || skipped_.skipped(static_cast<uint32_t>(pid))) continue;
            if (std::string why = not_ours(pid); !why.empty()) {
                if (skipped_.skip(static_cast<uint32_t>(pid), why) && !s_.options.quiet)
                    print_safe(stderr, "gtrace: warning: pid {} left out: {}\n", pid, why);
                continue;
            }
            if (auto r = s_.bpf.track(static_cast<uint32_t>(pid)); !r) return r;
            s_.model.add_process(static_cast<uint32_t>(pid), static_cast<uint32_t>(st->ppid), true, std::nullopt);
        }
        if (s_.model.processes().size() == known) break;
        known = s_.model.processes().size();
    }
    // Interpreters before probes: a probe serves every process mapping its file at once. (Even
    // with --py-stacks off: samples and torch ranges use the interpreter too.)
    std::vector<int> tracked;
    for (const auto& [pid, p] : s_.model.processes()) tracked.push_back(static_cast<int>(pid));
    for (int pid : tracked) guarded(pid, "Python detection", [&] { detect_python(pid, read_maps(pid)); });
    for (int pid : tracked) {
        Result<void> global; // an error that is not the process's (privileges, the kernel) ends the capture
        guarded(pid, "scan", [&] {
            if (auto r = scan(pid); !r) global = r;
            else if (auto c = s_.cuda_probes.probe_candidates(pid); !c) global = c.error();
        });
        if (!global) return global;
    }
    // Attaching takes a while; the target may have exited, or its PID been reused, meanwhile.
    auto root = read_proc_stat(s_.options.pid);
    if (!root || root->start_time_ticks != root_start_ticks || root->state == 'Z')
        return make_error(ExitCode::ProcessExited,
                          fmt::format("process {} exited while gtrace was attaching; start gtrace while the job runs",
                                      s_.options.pid));
    if (!s_.cuda_probes.any_mapped()) {
        waiting_for_cuda_ = true;
        if (!s_.options.quiet)
            print_safe(stderr,
                       "gtrace: waiting for CUDA: no process in the tree of PID {} has loaded libcudart or libcuda yet; "
                       "probes attach as soon as one does\n",
                       s_.options.pid);
    }
    return {};
}

Result<void> ProcessEvents::scan(int pid) {
    std::vector<Mapping> maps = read_maps(pid);
    // The interpreter first: the probes' first calls then already carry Python stacks.
    if (!s_.python_frames.has_runtime(static_cast<uint32_t>(pid)) &&
        !python_unsupported_.contains(static_cast<uint32_t>(pid)))
        detect_python(pid, maps);
    // Every live process is scanned again each second; its executable mappings rarely change,
    // and the probe scanners open each mapped file to know it (hundreds for a torch process).
    uint64_t fingerprint = code_fingerprint(maps);
    if (auto known = scanned_code_.find(static_cast<uint32_t>(pid)); known == scanned_code_.end() || known->second != fingerprint) {
        // GTRACE_TEST_SCAN_DELAY_MS: each new scan late, as from a gtrace on a busy host.
        static const auto scan_delay = test_hook_number(GTRACE_TEST_HOOK("SCAN_DELAY_MS"));
        if (scan_delay) usleep(*scan_delay * 1000);
        auto added = s_.cuda_probes.scan_maps(pid, maps);
        if (!added) return added.error();
        if (auto torch = s_.torch_probes.scan_maps(pid, maps); !torch) return torch.error();
        if (auto comm = s_.comm_probes.scan_maps(pid, maps); !comm) return comm.error();
        scanned_code_[static_cast<uint32_t>(pid)] = fingerprint;
    }
    if (gpu_.inject_if_cuda(pid, maps)) pending_scan_.insert(pid);
    s_.addresses.set_maps(static_cast<uint32_t>(pid), std::move(maps));
    if (waiting_for_cuda_ && s_.cuda_probes.any_mapped()) {
        waiting_for_cuda_ = false;
        if (!s_.options.quiet) print_safe(stderr, "\ngtrace: CUDA loaded in pid {}; tracing its calls\n", pid);
    }
    return {};
}

void ProcessEvents::detect_python(int pid, const std::vector<Mapping>& maps) {
    PythonDetection d = gtrace::detect_python(pid, maps, s_.target_files);
    if (d.runtime) {
        // The symbolizer first: BPF walks the stacks from the next call on, and their definitions
        // are read on a thread of their own (capture/stack_definitions.h).
        s_.python_frames.set_runtime(static_cast<uint32_t>(pid), *d.runtime);
        auto r = s_.bpf.set_python_layout(static_cast<uint32_t>(pid), d.runtime->layout);
        if (!r) {
            s_.python_frames.forget_process(static_cast<uint32_t>(pid));
            s_.errors.defer(r.error());
            return;
        }
        calls_.set_python_layout(static_cast<uint32_t>(pid), *r);
        // Test only: tells a case when this image's calls carry their Python stacks, so that it
        // waits for that rather than for a time.
        if (GTRACE_TEST_HOOK("SAY_PYTHON")) print_safe(stderr, "gtrace-test: Python stacks ready in pid {}\n", pid);
    } else if (!d.unsupported.empty() && python_unsupported_.insert(static_cast<uint32_t>(pid)).second && !s_.options.quiet) {
        print_safe(stderr, "gtrace: warning: pid {}: {}; its CUDA calls are traced without Python frames\n", pid,
                   d.unsupported);
    }
}

std::vector<std::string> ProcessEvents::exec_argv(const gt_proc_event& e) {
    std::vector<std::string> argv;
    size_t n = std::min<size_t>(e.argv_len, sizeof e.argv);
    for (size_t pos = 0; pos < n;) {
        size_t end = pos;
        while (end < n && e.argv[end] != '\0') ++end;
        argv.emplace_back(e.argv + pos, end - pos);
        pos = end + 1;
    }
    if (!argv.empty() && n == sizeof e.argv - 1 && e.argv[n - 1] != '\0') argv.back() += "…"; // cut at the event's size
    return argv;
}

uint64_t ProcessEvents::code_fingerprint(const std::vector<Mapping>& maps) {
    uint64_t h = 1469598103934665603ull; // FNV-1a over what the scanners look at
    auto mix = [&h](const void* p, size_t n) {
        for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ull;
    };
    for (const Mapping& m : maps) {
        if (!m.executable || !m.is_file()) continue;
        uint64_t fields[] = {m.start, m.end, m.offset, m.dev, m.inode};
        mix(fields, sizeof fields);
        mix(m.path.data(), m.path.size() + 1);
    }
    return h;
}

void ProcessEvents::forget_python(uint32_t pid) {
    python_unsupported_.erase(pid);
    s_.bpf.clear_python_layout(pid);
}

void ProcessEvents::on_proc(const gt_proc_event& e) {
    switch (e.kind) {
    case GT_PROC_FORK:
        skipped_.forget(e.pid); // a new process in a PID the lists may hold from before
        s_.model.add_process(e.pid, e.ppid, false, e.ppid);
        lifecycle_.forked(e.pid, e.ppid);
        pending_scan_.insert(static_cast<int>(e.pid)); // a forked interpreter: same layout, own memory
        break;
    case GT_PROC_EXEC:
        if (!s_.model.find(e.pid)) s_.model.add_process(e.pid, 0, false, std::nullopt);
        // Test only: GTRACE_TEST_EXEC_ARGV_ONLY names exec'ed processes from the event alone, as
        // when the process is gone before /proc can be read (a race a test cannot force).
        static const bool exec_argv_only = GTRACE_TEST_HOOK("EXEC_ARGV_ONLY") != nullptr;
        s_.model.refresh_identity(e.pid, exec_argv(e), exec_argv_only);
        lifecycle_.exec(e.pid);
        scanned_code_.erase(e.pid);
        forget_python(e.pid); // BPF dropped its layout and agent slots at the exec itself
        // A setuid program a user's job started is not the user's to trace.
        if (std::string why = not_ours(static_cast<int>(e.pid)); !why.empty()) {
            skip(e.pid, why);
            break;
        }
        // Scan at once: the new image may call CUDA and exit before the next poll.
        guarded(static_cast<int>(e.pid), "exec", [&] {
            if (auto r = s_.cuda_probes.probe_candidates(static_cast<int>(e.pid)); !r) s_.errors.defer(r.error());
            if (auto r = scan(static_cast<int>(e.pid)); !r) s_.errors.defer(r.error());
        });
        break;
    case GT_PROC_EXIT:
        exited(e.pid, e.exit_code);
        break;
    default:
        break;
    }
}

void ProcessEvents::exited(uint32_t pid, int exit_code) {
    // Only the model keeps the process (for the trace and the report); the rest is let go, so a
    // capture left on for days holds nothing per process that came and went.
    s_.model.mark_exited(pid, exit_code);
    lifecycle_.exited(pid);
    forget_python(pid);
    pending_scan_.erase(static_cast<int>(pid));
    scanned_code_.erase(pid);
    gone_.emplace_back(pid, std::chrono::steady_clock::now());
}

std::vector<uint32_t> ProcessEvents::take_gone(std::chrono::steady_clock::duration after) {
    std::vector<uint32_t> out;
    auto now = std::chrono::steady_clock::now();
    while (!gone_.empty() && gone_.front().second + after <= now) {
        out.push_back(gone_.front().first);
        gone_.pop_front();
    }
    return out;
}

void ProcessEvents::on_mmap(const gt_mmap_event& e) {
    // The mapping is reported at syscall entry: scan now (usually done by then) and again
    // after this batch of events.
    if (skipped_.skipped(e.pid)) return;
    guarded(static_cast<int>(e.pid), "scan", [&] {
        if (auto r = scan(static_cast<int>(e.pid)); !r) s_.errors.defer(r.error());
    });
    pending_scan_.insert(static_cast<int>(e.pid));
}

void ProcessEvents::rescan_pending() {
    auto pending = std::move(pending_scan_);
    pending_scan_.clear();
    for (int pid : pending)
        if (!skipped_.skipped(static_cast<uint32_t>(pid))) {
            guarded(pid, "scan", [&] {
                if (auto r = scan(pid); !r) s_.errors.defer(r.error());
            });
            // An agent asked in this scan answers within milliseconds and withdraws its offer
            // if it waits too long: taken now, not after the other processes' scans (each can
            // take long on a busy host: hundreds of mapped files).
            gpu_.poll();
        }
}

void ProcessEvents::rescan_all() {
    // Normally the exit tracepoint reports exits; this catches one whose event was lost.
    for (const auto& [pid, p] : s_.model.processes())
        if (!p.exited && !process_alive(static_cast<int>(pid))) {
            s_.bpf.untrack(pid);
            exited(pid, 0);
        }
    for (const auto& [pid, p] : s_.model.processes())
        if (!p.exited) pending_scan_.insert(static_cast<int>(pid));
}

} // namespace gtrace

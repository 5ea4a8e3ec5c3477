#include "foundation/printable.h"
#include "capture/capture_script.h"

#include <algorithm>
#include <csignal>
#include <cstring>

#include <fmt/format.h>

#include "output/clocks.h"

namespace gtrace {

std::atomic<int> g_trigger_count{0};
std::atomic<uint64_t> g_trigger_ns[2] = {0, 0};

namespace {

constexpr uint64_t kNever = UINT64_MAX;

// Whole steps seen: the first marker only ends the step that was running at attach.
int64_t steps_completed(int64_t markers_seen) { return markers_seen > 0 ? markers_seen - 1 : 0; }

} // namespace

void CaptureScript::start(std::chrono::steady_clock::time_point capture_started) {
    step_regex_ = std::regex(options_.step_marker, std::regex::ECMAScript | std::regex::optimize);
    if (options_.max_events) admission_.set_max_events(options_.max_events);
    uint64_t now = monotonic_now_ns();
    // --delay and --duration both count from gtrace's start, before attaching took its time.
    started_ns_ = now - static_cast<uint64_t>(
                            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - capture_started).count());
    record_from_ns_ = started_ns_ + static_cast<uint64_t>(options_.delay_s * 1e9);
    if (options_.start_at_unix_ns) { // to the nanosecond of every node's wall clock, not of this gtrace's start
        ClockReading c = read_clocks();
        const uint64_t at = *options_.start_at_unix_ns;
        record_from_ns_ = c.monotonic_ns + (at > c.realtime_ns ? at - c.realtime_ns : 0);
        if (at < c.realtime_ns) { // attaching took longer than the lead given: steps before now are lost
            late_s_ = static_cast<double>(c.realtime_ns - at) / 1e9;
            print_safe(stderr, "gtrace: warning: --start-at passed {:.1f} s ago, while attaching: recording from now{}; give "
                               "more lead time so that every node's capture is on before it\n",
                       late_s_, options_.steps ? ", steps counted from the next step marker (other nodes' may differ)" : "");
        }
    }
    window_open_ns_ = record_from_ns_;
    if (options_.steps || options_.trigger_signal) window_open_ns_ = kNever; // until the step or the signal
    else if (options_.delay_s == 0) window_open_ns_ = 0;                     // everything, as it comes
    admission_.set_window(window_open_ns_, window_close_ns_);
}

void CaptureScript::poll() {
    // (Without --trigger, SIGUSR1 is the flight recorder's: flight_dumps.cpp counts it.)
    for (int t = options_.trigger_signal ? g_trigger_count.load() : 0; triggers_seen_ < t && stop_request_.empty(); ++triggers_seen_) {
        uint64_t now = monotonic_now_ns();
        if (triggers_seen_ < 2 && g_trigger_ns[triggers_seen_].load()) now = std::min(now, g_trigger_ns[triggers_seen_].load());
        if (window_open_ns_ == kNever) {
            window_open_ns_ = now;
            if (!options_.quiet) print_safe(stderr, "\ngtrace: {}: recording\n", strsignal(options_.trigger_signal));
        } else {
            window_close_ns_ = now;
            stop_request_ = fmt::format("stopped by the trigger ({})", strsignal(options_.trigger_signal));
        }
        admission_.set_window(window_open_ns_, window_close_ns_);
    }
    if (options_.max_events && admission_.full() && stop_request_.empty())
        stop_request_ = fmt::format("event limit reached ({} events)", options_.max_events);
}

void CaptureScript::on_range(uint32_t pid, const std::string& range, uint64_t end_ns) {
    ++torch_ranges_;
    bool counts_steps = options_.steps || options_.slow_step_factor > 0;
    if (!counts_steps || !stop_request_.empty() || !std::regex_search(range, step_regex_)) return;
    if (options_.delay_s > 0 && end_ns < record_from_ns_) return; // steps count from --delay / --start-at
    if (!lead_pid_) {
        // Rank 0's steps when the job has ranks; otherwise the first process that makes steps.
        lead_pid_ = pid;
        for (const auto& [other, p] : model_.processes())
            if (p.ranks.rank == 0 && !p.forked_from && !p.exited) lead_pid_ = other;
    }
    if (pid != lead_pid_) return;
    if (!options_.steps) { // --on-slow-step: the lead's step times (the flight dumps count them)
        if (on_lead_step_) on_lead_step_(end_ns);
        return;
    }
    auto [first, last] = *options_.steps;
    int64_t index = markers_seen_++; // marker 0 ends the step in progress at attach
    if (index == static_cast<int64_t>(first) - 1) {
        window_open_ns_ = end_ns;
        if (!options_.quiet) print_safe(stderr, "\ngtrace: step {} begins: recording\n", first);
    }
    if (index == static_cast<int64_t>(last)) {
        window_close_ns_ = end_ns;
        stop_request_ = fmt::format("steps {}:{} captured", first, last);
    }
    admission_.set_window(window_open_ns_, window_close_ns_);
}

std::string CaptureScript::incomplete() const {
    if (!options_.steps || stop_request_.starts_with("steps")) return {};
    auto [first, last] = *options_.steps;
    if (!lead_pid_)
        return fmt::format("--steps {}:{}: no step seen: no PyTorch or NVTX range matched --step-marker '{}' ({} ranges traced)", first,
                           last, options_.step_marker, torch_ranges_);
    return fmt::format("--steps {}:{}: the capture ended after step {} of pid {}, before step {}", first, last,
                       steps_completed(markers_seen_), lead_pid_, last);
}

nlohmann::json CaptureScript::facts() const {
    nlohmann::json j = {{"events_outside_window", admission_.events_outside_window()},
                        {"events_over_limit", admission_.events_over_limit()},
                        {"torch_ranges", torch_ranges_},
                        {"step_marker", options_.step_marker},
                        {"capture_start_ns", started_ns_}};
    if (window_open_ns_ != kNever) j["window_open_ns"] = window_open_ns_;
    if (window_close_ns_ != kNever) j["window_close_ns"] = window_close_ns_;
    if (options_.delay_s > 0) j["delay_s"] = options_.delay_s;
    if (options_.start_at_unix_ns) j["start_at_unix_ns"] = *options_.start_at_unix_ns;
    if (late_s_ > 0) j["start_at_late_s"] = late_s_;
    if (options_.steps) {
        j["steps"] = fmt::format("{}:{}", options_.steps->first, options_.steps->second);
        j["steps_seen"] = steps_completed(markers_seen_);
    }
    if (options_.max_events) j["max_events"] = options_.max_events;
    if (options_.trigger_signal) j["trigger"] = strsignal(options_.trigger_signal);
    return j;
}

} // namespace gtrace

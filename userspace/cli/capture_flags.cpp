#include "cli/capture_flags.h"
#include "foundation/test_hooks.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <regex>

#include <fmt/format.h>

#include "cli/command_line.h"
#include "cli/option_values.h"
#include "foundation/printable.h"
#include "foundation/privilege.h"

namespace gtrace {

namespace po = boost::program_options;

namespace {

// --help shows CaptureOptions' defaults, written there once.
const CaptureOptions kDefaults;

std::string py_stacks_text(uint32_t every) { return every == 0 ? "off" : every == 1 ? "all" : std::to_string(every); }

std::string api_capture_text(const CaptureOptions& o) {
    if (!o.agent_calls) return "uprobes";
    return o.call_source == GT_CALLS_FROM_RECORDS ? "agent-records" : "agent";
}

// The options attach and record share.
void add_capture_options(po::options_description& o) {
    o.add_options()("help,h", "show this help")                                              //
        ("duration,d", po::value<std::string>(),
         "stop after this long: seconds, or with a unit (500ms, 10s, 5m, 1h), from 1ms to 720h; default: until Ctrl-C, "
         "SIGTERM, or every traced process has exited")
        ("output,o", po::value<std::string>(),
         "trace file (Kineto: a directory); default gtrace-<host>-<pid>-<yyyymmdd-hhmmss>.pftrace (.json, .kineto/ with --format)")
        ("format", po::value<std::string>(),
         "pftrace (Perfetto protobuf, the default), json (Chrome trace JSON) or kineto (PyTorch profiler JSON, a file "
         "per rank, for Holistic Trace Analysis); default: by the -o extension (.json: json), else pftrace")
        ("force,f", "replace existing output files (regular files only: a link there is refused) and a killed "
                    "capture's FILE.partial")
        ("quiet,q", "print nothing but errors (no live status, no summary)")
        ("buffer-size", po::value<std::string>()->default_value(std::to_string(kDefaults.ring_buffer_bytes >> 20)),
         "BPF ring buffer size: a power of two from 4K to 2G, in MiB or with K/M/G; raise it if events are lost")
        ("py-stacks", po::value<std::string>()->default_value(py_stacks_text(kDefaults.py_stack_every)),
         "Python stack of each CUDA call: all, N (every Nth call of a thread, 1 to 1000000), or off")
        ("sample-hz", po::value<std::string>()->default_value(std::to_string(kDefaults.sample_hz)),
         "timer samples per second of the tree's on-CPU threads, with Python and native stacks; 0 (off) to 10000")
        ("folded", po::value<std::string>(), "also write the samples as folded stacks per rank (flamegraph.pl, speedscope)")
        ("delay", po::value<std::string>(),
         "record from this long after attach (seconds or 500ms, 2m; 1ms to 720h); --duration counts from then")
        ("start-at", po::value<std::string>(),
         "record from this UTC wall-clock time (2026-11-26T03:00:00Z, or @SECONDS since the epoch; up to 720h ahead): "
         "one time for every node's gtrace, so their windows and --steps match; --duration counts from then")
        ("steps", po::value<std::string>(),
         "A:B: record from the start of the A-th to the end of the B-th training step after attach, then stop "
         "(steps of rank 0, ended by --step-marker; 1 <= A <= B <= 1000000)")
        ("step-marker", po::value<std::string>()->default_value(kDefaults.step_marker),
         "regex (ECMAScript) on the names of PyTorch record_function ranges and NVTX ranges (their message): a matching range ends a step")
        ("max-events", po::value<std::string>(), "stop once the trace holds this many events (1 to 10^12)")
        ("summary-json", po::value<std::string>(),
         "at the end, write the capture's facts and findings (verdicts, step breakdowns) as JSON to this file")
        ("trigger", po::value<std::string>(),
         "SIGUSR1 or SIGUSR2: record nothing until gtrace gets this signal, then record until it gets it again")
        ("flight-recorder", po::value<std::string>(),
         "keep only the last DURATION (1s to 1h: 30s, 5m) in bounded memory and write nothing until SIGUSR1 or a slow "
         "step: then that window goes to OUT-N.ext (N = 1, 2, ...; its verdict to OUT-N.report.txt) and recording goes "
         "on; at the end (--duration, Ctrl-C, the job's exit) the last window is the last dump")
        ("flight-memory", po::value<std::string>(),
         fmt::format("--flight-recorder's memory bound (16M to 64G; default {}M): past it the oldest events go, and the "
                     "window is shorter", kDefaults.flight_max_bytes >> 20).c_str())
        ("on-slow-step", po::value<std::string>(),
         "with --flight-recorder: dump when a step of rank 0 (ended by --step-marker) takes longer than this factor of "
         "the running median step, such as 2x (above 1, up to 100); at most one such dump per window")
        ("no-gpu", "CPU side only: do not load the CUPTI agent into the processes")
        ("api-capture", po::value<std::string>()->default_value(api_capture_text(kDefaults)),
         "agent (= agent-callbacks): a process whose agent holds CUPTI's callbacks records its own CUDA calls and the "
         "CUDA uprobes come off (a trap per call costs more); agent-records: the calls from CUPTI's API records, a "
         "callback only to walk the Python stack (none with --py-stacks off); uprobes: always trace calls with uprobes")
        ("no-off-cpu", "do not record when main threads sleep (sched_switch): the step breakdown then counts time "
                       "blocked inside a range as CPU Exec")
        ("autograd-links", "link each backward launch to the forward op whose gradient it computes: its Python source "
                           "(forward_source) and autograd sequence number, as the PyTorch profiler does; costs a probe hit "
                           "per autograd node in forward and in backward, and a Python stack walk per forward node")
        ("bpf-stats", "count the runs and run time of each gtrace BPF program (kernel BPF statistics, on while gtrace "
                      "runs) into the trace's otherData.bpf_stats")
        ("cupti", po::value<std::string>(), "libcupti to use (colon-separated paths tried first); default: the one matching "
                                            "each process's libcudart")
        ("no-redact", "keep secret values of command lines (--password=..., *_TOKEN=...) in the trace and summary; "
                      "by default they are written as ***");
}

const char* const kPidHelp = "PID of the process to attach to, with all its descendants (required; 1 to 4194304)";
const char* const kSystemWideHelp = "allow a --pid whose tree is the whole host: PID 1, or a tree with processes of several users";
const char* const kAllowOtherUsersHelp =
    "run through sudo, trace processes of users other than the one who ran sudo (refused to a gtrace running on file "
    "capabilities); without it a privileged gtrace traces only its caller's processes";

} // namespace

po::options_description attach_options() {
    po::options_description o("gtrace attach options");
    add_capture_options(o);
    o.add_options()("pid,p", po::value<std::string>(), kPidHelp)("system-wide", kSystemWideHelp)
        ("allow-other-users", kAllowOtherUsersHelp);
    return o;
}

const char* allow_other_users_help() { return kAllowOtherUsersHelp; }

po::options_description record_options(bool parsing) {
    po::options_description o("gtrace record options");
    add_capture_options(o);
    o.add_options()("on-stop", po::value<std::string>()->default_value("term"),
                    "when the capture stops before the command exits (--duration, --steps, Ctrl-C): term (SIGTERM "
                    "to its tree, then up to 10 s for it to exit), kill (SIGKILL), or keep (leave it running)");
    // attach's own, accepted only to say what to do instead; not in record's --help.
    if (parsing)
        o.add_options()("pid,p", po::value<std::string>(), kPidHelp)("system-wide", kSystemWideHelp)
            ("allow-other-users", kAllowOtherUsersHelp);
    return o;
}

void check_step_marker(const std::string& marker) {
    try {
        std::regex check(marker, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
        fail(make_error(ExitCode::Usage, fmt::format("--step-marker {}: not a valid regular expression ({})", marker, e.what())));
    }
}

OnStop parse_on_stop(const std::string& text) {
    if (text == "term") return OnStop::Term;
    if (text == "kill") return OnStop::Kill;
    if (text == "keep") return OnStop::Keep;
    fail(make_error(ExitCode::Usage, fmt::format("invalid --on-stop '{}': give term, kill or keep", text)));
}

namespace {

// --delay, --steps, --step-marker, --max-events, --trigger.
// --flight-recorder, --flight-memory, --on-slow-step: SIGUSR1 is the flight recorder's then.
void read_flight_options(const po::variables_map& vm, CaptureOptions& options) {
    if (!vm.count("flight-recorder")) {
        for (const char* opt : {"flight-memory", "on-slow-step"})
            if (vm.count(opt))
                fail(make_error(ExitCode::Usage, fmt::format("--{} needs --flight-recorder DURATION; add it", opt)));
        return;
    }
    options.flight_window_s = or_fail(parse_flight_window(vm["flight-recorder"].as<std::string>()));
    if (vm.count("flight-memory")) options.flight_max_bytes = or_fail(parse_memory_size(vm["flight-memory"].as<std::string>(), "--flight-memory"));
    if (vm.count("on-slow-step")) options.slow_step_factor = or_fail(parse_slow_step_factor(vm["on-slow-step"].as<std::string>()));
    for (const char* opt : {"trigger", "steps", "max-events", "start-at"})
        if (vm.count(opt))
            fail(make_error(ExitCode::Usage, fmt::format("--{} and --flight-recorder both decide what is written (with "
                                                         "--flight-recorder, SIGUSR1 writes the window); give one", opt)));
}

void read_script_options(const po::variables_map& vm, CaptureOptions& options) {
    if (vm.count("delay")) options.delay_s = or_fail(parse_duration(vm["delay"].as<std::string>(), "--delay"));
    if (vm.count("start-at")) {
        if (vm.count("delay")) fail(make_error(ExitCode::Usage, "--start-at and --delay both say when to record; give one"));
        auto now = static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
        options.start_at_unix_ns = or_fail(parse_start_at(vm["start-at"].as<std::string>(), now));
        options.delay_s = std::max(1e-3, static_cast<double>(*options.start_at_unix_ns - now) / 1e9);
    }
    if (vm.count("steps")) options.steps = or_fail(parse_steps(vm["steps"].as<std::string>()));
    options.step_marker = vm["step-marker"].as<std::string>();
    check_step_marker(options.step_marker);
    if (vm.count("summary-json")) options.summary_json = vm["summary-json"].as<std::string>();
    // Test only: GTRACE_TEST_MAX_REPORT_BYTES lowers the live analysis's budget (a test cannot fill 256 MiB).
    if (auto v = test_hook_number<uint64_t>(GTRACE_TEST_HOOK("MAX_REPORT_BYTES"))) options.analysis_max_bytes = *v;
    if (vm.count("max-events")) options.max_events = or_fail(parse_max_events(vm["max-events"].as<std::string>()));
    if (vm.count("trigger")) {
        std::string sig = vm["trigger"].as<std::string>();
        if (sig == "SIGUSR1" || sig == "USR1") options.trigger_signal = SIGUSR1;
        else if (sig == "SIGUSR2" || sig == "USR2") options.trigger_signal = SIGUSR2;
        else fail(make_error(ExitCode::Usage, fmt::format("--trigger {}: use SIGUSR1 or SIGUSR2", sig)));
        if (options.steps) fail(make_error(ExitCode::Usage, "--trigger and --steps both decide when to record; give one"));
        if (options.start_at_unix_ns) fail(make_error(ExitCode::Usage, "--trigger and --start-at both decide when to record; give one"));
    }
    read_flight_options(vm, options);
}

} // namespace

void read_capture_options(const po::variables_map& vm, CaptureOptions& options) {
    if (vm.count("duration")) options.duration_s = or_fail(parse_duration(vm["duration"].as<std::string>(), "--duration"));
    options.ring_buffer_bytes = or_fail(parse_ring_size(vm["buffer-size"].as<std::string>(), "--buffer-size"));
    options.py_stack_every = or_fail(parse_py_stacks(vm["py-stacks"].as<std::string>()));
    options.sample_hz = or_fail(parse_rate(vm["sample-hz"].as<std::string>(), "--sample-hz"));
    if (vm.count("folded")) {
        options.folded = vm["folded"].as<std::string>();
        if (!options.sample_hz) fail(make_error(ExitCode::Usage, "--folded needs sampling; drop --sample-hz 0"));
    }
    read_script_options(vm, options);
    options.force = vm.count("force") > 0;
    options.quiet = vm.count("quiet") > 0;
    options.gpu = vm.count("no-gpu") == 0;
    const std::string capture = vm["api-capture"].as<std::string>();
    if (capture != "agent" && capture != "agent-callbacks" && capture != "agent-records" && capture != "uprobes")
        fail(make_error(ExitCode::Usage, fmt::format("invalid --api-capture '{}': give agent, agent-callbacks, "
                                                     "agent-records or uprobes", capture)));
    options.agent_calls = capture != "uprobes";
    options.call_source = capture == "agent-records" ? GT_CALLS_FROM_RECORDS : GT_CALLS_FROM_CALLBACKS;
    options.bpf_stats = vm.count("bpf-stats") > 0;
    options.autograd_links = vm.count("autograd-links") > 0;
    options.off_cpu = vm.count("no-off-cpu") == 0;
    options.redact = vm.count("no-redact") == 0;
    options.system_wide = vm.count("system-wide") > 0;
    options.allow_other_users = vm.count("allow-other-users") > 0;
    if (vm.count("cupti")) {
        options.cupti = vm["cupti"].as<std::string>();
        if (!options.gpu) fail(make_error(ExitCode::Usage, "--cupti and --no-gpu contradict each other; drop one"));
        // In the privileged mode each library must be root's on a path only root can change; it is
        // then named by its real path, so that no link a user owns can point elsewhere later.
        std::string checked;
        for (size_t p = 0; p <= options.cupti.size();) {
            size_t colon = std::min(options.cupti.find(':', p), options.cupti.size());
            std::string path = options.cupti.substr(p, colon - p);
            p = colon + 1;
            if (path.empty()) continue;
            if (Privilege::privileged()) {
                auto safe = check_root_owned_path(path);
                if (!safe)
                    fail(make_error(ExitCode::Usage, fmt::format("--cupti {} refused: {} ({})", printable(path),
                                                                 printable(safe.error().message), Privilege::reason())));
                path = *safe;
            } else if (access(path.c_str(), R_OK) != 0) {
                fail(make_error(ExitCode::Usage, fmt::format("--cupti {}: no such readable file; give the path of a libcupti.so",
                                                             printable(path))));
            }
            checked += (checked.empty() ? "" : ":") + path;
        }
        options.cupti = checked;
    }
}

int capture_signal(const CaptureOptions& options) { return options.flight_window_s ? SIGUSR1 : options.trigger_signal; }

} // namespace gtrace

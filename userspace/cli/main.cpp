// gtrace command line: subcommands, options, signals and exit codes. Exceptions stop here.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <ctime>
#include <iostream>
#include <regex>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include "cli/capture.h"
#include "cli/dump_command.h"
#include "cli/record_command.h"
#include "cli/recover_command.h"
#include "cli/report_command.h"
#include "cli/option_values.h"
#include "cli/stale_captures.h"
#include "cli/version_command.h"
#include "foundation/exit_codes.h"
#include "foundation/output_file.h"
#include "cli/preflight.h"
#include "foundation/exit_codes.h"

namespace po = boost::program_options;
using namespace gtrace;

namespace {

constexpr const char* kUsage =
    "gtrace — trace the CUDA calls of a running PyTorch/CUDA job, with no restart and no code change.\n\n"
    "Usage:\n"
    "  gtrace attach --pid PID [--duration SECONDS] [-o FILE] [--force] [-q] [options]\n"
    "  gtrace record [options] -- COMMAND [ARGS...]\n"
    "  gtrace dump --pid PID\n"
    "  gtrace report TRACE... [--json FILE] [--html FILE] [--force]\n"
    "  gtrace recover PARTIAL [-o FILE] [--force]\n"
    "  gtrace <command> --help\n"
    "  gtrace --version       version, git commit and the kernel features found\n\n"
    "Commands:\n"
    "  attach   attach to a running process tree (e.g. torchrun and its ranks) and write a trace\n"
    "  record   start a command with the GPU agent loaded from its start, and trace it like attach\n"
    "  report   step time breakdown and bottleneck verdict per rank, from traces gtrace wrote\n"
    "  recover  complete the partial trace (FILE.partial) of a capture that was killed\n"
    "  dump     print the Python and native stack of every thread in the tree once, grouped across ranks\n\n";

[[noreturn]] void fail(const Error& e) {
    fmt::print(stderr, "gtrace: error: {}\n", e.message);
    std::exit(to_int(e.code));
}

template <typename T>
T or_fail(Result<T> r) {
    if (!r) fail(r.error());
    return std::move(r.value());
}

void or_fail(Result<void> r) {
    if (!r) fail(r.error());
}

void on_stop_signal(int sig) { g_stop_signal.store(sig); }
void on_trigger_signal(int) { g_trigger_count.fetch_add(1); }

// SIGINT/SIGTERM stop; a --trigger signal (0: none) opens, then closes, the capture's window.
void install_signal_handlers(int trigger_signal = 0) {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; // no SA_RESTART: poll() returns at once
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN); // a file size limit (ulimit -f) is a write error (EFBIG), not death
    if (trigger_signal) {
        sa.sa_handler = on_trigger_signal;
        sigaction(trigger_signal, &sa, nullptr);
    }
}

std::string default_output(int pid, TraceFormat format) {
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    return default_output_name(format, fmt::format("gtrace-{}-{}", pid, stamp));
}

// -o and --format: the format, and the output's name (the default one has the format's extension).
void read_output_options(const po::variables_map& vm, int pid, CaptureOptions& options) {
    std::string format = vm.count("format") ? vm["format"].as<std::string>() : std::string();
    std::string output = vm.count("output") ? vm["output"].as<std::string>() : std::string();
    options.format = or_fail(choose_format(output, format));
    options.output = vm.count("output") ? output : default_output(pid, options.format);
}

po::options_description attach_options() {
    po::options_description o("gtrace attach options");
    o.add_options()("help,h", "show this help")                                              //
        ("pid,p", po::value<std::string>(), "PID of the process to attach to, with all its descendants (required; 1 to 4194304)")
        ("system-wide", "allow a --pid whose tree is the whole host: PID 1, or a tree with processes of several users")
        ("duration,d", po::value<std::string>(),
         "stop after this long: seconds, or with a unit (500ms, 10s, 5m, 1h), from 1ms to 720h; default: until Ctrl-C, "
         "SIGTERM, or every traced process has exited")
        ("output,o", po::value<std::string>(),
         "trace file (Kineto: a directory); default gtrace-<pid>-<yyyymmdd-hhmmss>.pftrace (.json, .kineto/ with --format)")
        ("format", po::value<std::string>(),
         "pftrace (Perfetto protobuf, the default), json (Chrome trace JSON) or kineto (PyTorch profiler JSON, a file "
         "per rank, for Holistic Trace Analysis); default: by the -o extension (.json: json), else pftrace")
        ("force,f", "replace existing output files (regular files only: a link there is refused) and a killed "
                    "capture's FILE.partial")
        ("quiet,q", "print nothing but errors (no live status, no summary)")
        ("buffer-size", po::value<std::string>()->default_value("64"),
         "BPF ring buffer size: a power of two from 4K to 2G, in MiB or with K/M/G; raise it if events are lost")
        ("py-stacks", po::value<std::string>()->default_value("all"),
         "Python stack of each CUDA call: all, N (every Nth call of a thread, 1 to 1000000), or off")
        ("sample-hz", po::value<std::string>()->default_value("100"),
         "timer samples per second of the tree's on-CPU threads, with Python and native stacks; 0 (off) to 10000")
        ("folded", po::value<std::string>(), "also write the samples as folded stacks per rank (flamegraph.pl, speedscope)")
        ("delay", po::value<std::string>(),
         "record from this long after attach (seconds or 500ms, 2m; 1ms to 720h); --duration counts from then")
        ("steps", po::value<std::string>(),
         "A:B: record from the start of the A-th to the end of the B-th training step after attach, then stop "
         "(steps of rank 0, ended by --step-marker; 1 <= A <= B <= 1000000)")
        ("step-marker", po::value<std::string>()->default_value("^Optimizer\\.step"),
         "regex (ECMAScript) on PyTorch record_function range names: a matching range ends a step")
        ("max-events", po::value<std::string>(), "stop once the trace holds this many events (1 to 10^12)")
        ("summary-json", po::value<std::string>(),
         "at the end, write the capture's facts and findings (verdicts, step breakdowns) as JSON to this file")
        ("trigger", po::value<std::string>(),
         "SIGUSR1 or SIGUSR2: record nothing until gtrace gets this signal, then record until it gets it again")
        ("no-gpu", "CPU side only: do not load the CUPTI agent into the processes")
        ("api-capture", po::value<std::string>()->default_value("agent"),
         "agent (= agent-callbacks): a process whose agent holds CUPTI's callbacks records its own CUDA calls and the "
         "CUDA uprobes come off (a trap per call costs more); agent-records: the calls from CUPTI's API records, a "
         "callback only to walk the Python stack (none with --py-stacks off); uprobes: always trace calls with uprobes")
        ("bpf-stats", "count the runs and run time of each gtrace BPF program (kernel BPF statistics, on while gtrace "
                      "runs) into the trace's otherData.bpf_stats")
        ("cupti", po::value<std::string>(), "libcupti to use (colon-separated paths tried first); default: the one matching "
                                            "each process's libcudart")
        ("no-redact", "keep secret values of command lines (--password=..., *_TOKEN=...) in the trace and summary; "
                      "by default they are written as ***");
    return o;
}

po::options_description record_options() {
    po::options_description o = attach_options();
    o.add_options()("on-stop", po::value<std::string>()->default_value("term"),
                    "record: when the capture stops before the command exits (--duration, --steps, Ctrl-C): term (SIGTERM "
                    "to its tree, then up to 10 s for it to exit), kill (SIGKILL), or keep (leave it running)");
    return o;
}

OnStop parse_on_stop(const std::string& text) {
    if (text == "term") return OnStop::Term;
    if (text == "kill") return OnStop::Kill;
    if (text == "keep") return OnStop::Keep;
    fail(make_error(ExitCode::Usage, fmt::format("invalid --on-stop '{}': give term, kill or keep", text)));
}

// Parses a command's options; an argument that is neither an option, an option's value nor a
// declared positional one is an error (it used to be ignored).
po::variables_map parse_options(const std::vector<std::string>& args, const po::options_description& desc,
                                const std::string& command, const po::positional_options_description* positional = nullptr) {
    po::command_line_parser parser(args);
    parser.options(desc);
    if (positional) parser.positional(*positional);
    po::parsed_options parsed = parser.run();
    for (const auto& opt : parsed.options)
        if (opt.string_key.empty() && !opt.original_tokens.empty())
            fail(make_error(ExitCode::Usage, fmt::format("unexpected argument '{}'; {}see gtrace {} --help", opt.original_tokens.front(),
                                                         command == "record" ? "the command goes after --; " : "", command)));
    po::variables_map vm;
    po::store(parsed, vm);
    po::notify(vm);
    return vm;
}

void check_step_marker(const std::string& marker) {
    try {
        std::regex check(marker, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
        fail(make_error(ExitCode::Usage, fmt::format("--step-marker {}: not a valid regular expression ({})", marker, e.what())));
    }
}

// --delay, --steps, --step-marker, --max-events, --trigger.
void read_script_options(const po::variables_map& vm, CaptureOptions& options) {
    if (vm.count("delay")) options.delay_s = or_fail(parse_duration(vm["delay"].as<std::string>(), "--delay"));
    if (vm.count("steps")) options.steps = or_fail(parse_steps(vm["steps"].as<std::string>()));
    options.step_marker = vm["step-marker"].as<std::string>();
    check_step_marker(options.step_marker);
    if (vm.count("summary-json")) options.summary_json = vm["summary-json"].as<std::string>();
    if (vm.count("max-events")) options.max_events = or_fail(parse_max_events(vm["max-events"].as<std::string>()));
    if (vm.count("trigger")) {
        std::string sig = vm["trigger"].as<std::string>();
        if (sig == "SIGUSR1" || sig == "USR1") options.trigger_signal = SIGUSR1;
        else if (sig == "SIGUSR2" || sig == "USR2") options.trigger_signal = SIGUSR2;
        else fail(make_error(ExitCode::Usage, fmt::format("--trigger {}: use SIGUSR1 or SIGUSR2", sig)));
        if (options.steps) fail(make_error(ExitCode::Usage, "--trigger and --steps both decide when to record; give one"));
    }
}

// Options common to attach and record; --pid is attach's own.
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
    options.redact = vm.count("no-redact") == 0;
    options.system_wide = vm.count("system-wide") > 0;
    if (vm.count("cupti")) {
        options.cupti = vm["cupti"].as<std::string>();
        if (!options.gpu) fail(make_error(ExitCode::Usage, "--cupti and --no-gpu contradict each other; drop one"));
        for (size_t p = 0; p <= options.cupti.size();) {
            size_t colon = std::min(options.cupti.find(':', p), options.cupti.size());
            std::string path = options.cupti.substr(p, colon - p);
            if (!path.empty() && access(path.c_str(), R_OK) != 0)
                fail(make_error(ExitCode::Usage, fmt::format("--cupti {}: no such readable file; give the path of a libcupti.so", path)));
            p = colon + 1;
        }
    }
}

// The capture's findings, as `gtrace report` gives them: printed when a process did CUDA work —
// a rank, or a plain `python train.py` (unless quiet) — and written with the capture's facts for
// --summary-json. One pass over the trace.
void report_capture(const CaptureOptions& options, const CaptureResult& result) {
    constexpr uintmax_t kMaxPrintBytes = 256ull << 20; // larger traces: run gtrace report yourself
    bool print = !options.quiet;
    if (print) {
        std::error_code ec;
        uintmax_t size = std::filesystem::file_size(result.output, ec);
        if (ec) print = false;
        else if (size > kMaxPrintBytes) {
            fmt::print(stderr, "gtrace: for the step breakdown and verdict run: gtrace report {}\n", result.output);
            print = false;
        }
    }
    if (!print && options.summary_json.empty()) return;
    ReportOptions report;
    report.json_path = options.summary_json;
    report.processes_required = false;
    report.print = print;
    report.analysis.step_marker = options.step_marker;
    report.analysis.redact = options.redact;
    if (!options.summary_json.empty()) {
        report.capture = result.facts;
        report.capture["trace"] = result.output;
        if (!result.script_incomplete.empty()) report.capture["script_incomplete"] = result.script_incomplete;
    }
    if (auto r = run_report({result.output}, report); !r) {
        if (!options.summary_json.empty()) fail(r.error());
        fmt::print(stderr, "gtrace: no verdict: {}\n", r.error().message);
    }
}

// The end of attach and record: the verdict, and exit code 12 when --steps fell short.
int finish_capture(const CaptureOptions& options, const CaptureResult& result) {
    if (!result.write_failure.empty()) {
        if (!result.write_failure_reported) fmt::print(stderr, "gtrace: error: {}\n", result.write_failure);
        return to_int(ExitCode::WriteFailed);
    }
    report_capture(options, result);
    if (!result.script_incomplete.empty()) {
        fmt::print(stderr, "gtrace: error: {}; the trace holds what was captured\n", result.script_incomplete);
        return to_int(ExitCode::ScriptIncomplete);
    }
    return 0;
}

// Every output of attach/record, before anything is attached: the trace, its partial file,
// --summary-json and --folded. Then what killed captures left is listed.
void prepare_outputs(const po::variables_map& vm, const CaptureOptions& options) {
    std::vector<OutputSpec> outputs;
    for (const char* opt : {"summary-json", "folded"})
        if (vm.count(opt)) outputs.push_back({fmt::format("--{}", opt), vm[opt].as<std::string>(), false});
    or_fail(check_trace_outputs({options.format, options.output, options.step_marker}, outputs, options.force));
    sweep_stale_captures(options.quiet);
}

int run_attach(const std::vector<std::string>& args) {
    auto desc = attach_options();
    po::variables_map vm = parse_options(args, desc, "attach");
    if (vm.count("help")) {
        std::cout << "Usage: gtrace attach --pid PID [options]\n\n"
                  << "Attaches to PID and every process under it, including ones started later (forks, execs),\n"
                  << "probes every CUDA runtime/driver library they load, and writes a trace that opens in\n"
                  << "Perfetto UI. Stops at --duration, on Ctrl-C/SIGTERM, or when every traced process exits;\n"
                  << "the trace is complete whatever stops it.\n\n"
                  << desc << "\n" << kExitCodeHelp;
        return 0;
    }
    if (!vm.count("pid")) fail(make_error(ExitCode::Usage, "missing --pid: give the PID of the job to trace (e.g. torchrun's)"));
    CaptureOptions options;
    options.pid = or_fail(parse_pid(vm["pid"].as<std::string>()));
    read_capture_options(vm, options);
    read_output_options(vm, options.pid, options);
    prepare_outputs(vm, options);

    install_signal_handlers(options.trigger_signal);
    auto capture = or_fail(Capture::attach(options));
    if (!options.quiet)
        fmt::print(stderr, "gtrace: attached to PID {} and its children; writing {}{}\n", options.pid, options.output,
                   options.duration_s ? fmt::format(" for {:g} s", *options.duration_s) : " until Ctrl-C");
    return finish_capture(options, or_fail(capture->run()));
}

int run_record(std::vector<std::string> args) {
    auto sep = std::find(args.begin(), args.end(), "--");
    std::vector<std::string> command(sep == args.end() ? sep : sep + 1, args.end());
    args.erase(sep, args.end());
    auto desc = record_options();
    po::variables_map vm = parse_options(args, desc, "record");
    if (vm.count("help")) {
        std::cout << "Usage: gtrace record [options] -- COMMAND [ARGS...]\n\n"
                  << "Starts COMMAND with the CUPTI agent loaded by CUDA itself (CUDA_INJECTION64_PATH) and traces\n"
                  << "it and every process it starts exactly as attach does. Stops when they have all exited,\n"
                  << "at --duration, or on Ctrl-C.\n\n"
                  << desc << "\n" << kExitCodeHelp;
        return 0;
    }
    if (vm.count("pid")) fail(make_error(ExitCode::Usage, "record starts its own command; use gtrace attach --pid for a running one"));
    if (vm.count("system-wide")) fail(make_error(ExitCode::Usage, "--system-wide is attach's: record traces only the command it starts"));
    if (command.empty()) fail(make_error(ExitCode::Usage, "missing command: gtrace record [options] -- COMMAND [ARGS...]"));
    CaptureOptions options;
    read_capture_options(vm, options);
    OnStop on_stop = parse_on_stop(vm["on-stop"].as<std::string>());
    options.launched = true;
    read_output_options(vm, 0, options);
    prepare_outputs(vm, options);
    install_signal_handlers(options.trigger_signal);
    return finish_capture(options, or_fail(record_command(options, command, on_stop)));
}

int run_report_command(const std::vector<std::string>& args) {
    po::options_description desc("gtrace report options");
    desc.add_options()("help,h", "show this help")("json", po::value<std::string>(), "also write the findings as JSON")
        ("html", po::value<std::string>(), "also write a self-contained HTML report with charts")
        ("force,f", "replace an existing --json or --html file (a regular file only: a link there is refused)")
        ("step-marker", po::value<std::string>()->default_value("^Optimizer\\.step"),
         "regex (ECMAScript) on PyTorch record_function range names: a matching range ends a step")
        ("no-redact", "keep secret values in the command lines of the traces' process labels (hidden as *** by default)")
        ("trace", po::value<std::vector<std::string>>(), "trace files");
    po::positional_options_description pos;
    pos.add("trace", -1);
    po::variables_map vm = parse_options(args, desc, "report", &pos);
    if (vm.count("help")) {
        std::cout << "Usage: gtrace report TRACE... [--json FILE] [--html FILE] [--force]\n\n"
                  << "Per rank: steps, where the step time goes (Kernel, Memcpy, Memset, Communication, Runtime,\n"
                  << "DataLoader, CPU Exec, Other, adding up to the step), GPU utilization, launch statistics, and\n"
                  << "a verdict with the figures behind it; then one for the whole job. A partial trace\n"
                  << "(FILE.partial, left by a capture that was killed) is read up to its last whole event.\n\n"
                  << desc << "\n" << kExitCodeHelp;
        return 0;
    }
    if (!vm.count("trace")) fail(make_error(ExitCode::Usage, "missing trace file: gtrace report TRACE... [--json FILE] [--html FILE]"));
    auto path = [&](const char* opt) { return vm.count(opt) ? vm[opt].as<std::string>() : std::string(); };
    auto traces = vm["trace"].as<std::vector<std::string>>();
    ReportOptions options;
    options.json_path = path("json");
    options.html_path = path("html");
    options.force = vm.count("force") > 0;
    std::vector<OutputSpec> outputs;
    for (const char* opt : {"json", "html"})
        if (vm.count(opt)) outputs.push_back({fmt::format("--{}", opt), path(opt), false});
    or_fail(check_outputs(outputs, traces, options.force));
    options.analysis.step_marker = vm["step-marker"].as<std::string>();
    options.analysis.redact = vm.count("no-redact") == 0;
    check_step_marker(options.analysis.step_marker);
    or_fail(run_report(traces, options));
    return 0;
}

int run_recover_command(const std::vector<std::string>& args) {
    po::options_description desc("gtrace recover options");
    desc.add_options()("help,h", "show this help")
        ("output,o", po::value<std::string>(), "where the trace goes; default: PARTIAL without .partial")
        ("force,f", "replace an existing output file")
        ("partial", po::value<std::vector<std::string>>(), "the partial trace");
    po::positional_options_description pos;
    pos.add("partial", -1);
    po::variables_map vm;
    po::store(po::command_line_parser(args).options(desc).positional(pos).run(), vm);
    po::notify(vm);
    if (vm.count("help")) {
        std::cout << "Usage: gtrace recover PARTIAL [-o FILE] [--force]\n\n"
                  << "A capture that was killed (kill -9, a crash) leaves its events in OUTPUT.partial; the next\n"
                  << "gtrace attach or record lists it. This completes it into a trace: its whole events, then an\n"
                  << "otherData that says it was recovered. It is completed in place and renamed to FILE.\n\n"
                  << desc << "\n" << kExitCodeHelp;
        return 0;
    }
    if (!vm.count("partial") || vm["partial"].as<std::vector<std::string>>().size() != 1)
        fail(make_error(ExitCode::Usage, "give one partial trace: gtrace recover PARTIAL [-o FILE] [--force]"));
    RecoverOptions options;
    options.partial = vm["partial"].as<std::vector<std::string>>()[0];
    if (vm.count("output")) {
        options.output = vm["output"].as<std::string>();
        if (options.output.empty()) fail(make_error(ExitCode::Usage, "-o '': an empty file name; give a file name"));
    }
    options.force = vm.count("force") > 0;
    or_fail(run_recover(options));
    return 0;
}

int run_dump_command(const std::vector<std::string>& args) {
    po::options_description desc("gtrace dump options");
    desc.add_options()("help,h", "show this help")                                              //
        ("pid,p", po::value<std::string>(), "PID of the job (e.g. torchrun's); its whole tree is dumped")
        ("system-wide", "allow a --pid whose tree is the whole host: PID 1, or a tree with processes of several users");
    po::variables_map vm = parse_options(args, desc, "dump");
    if (vm.count("help")) {
        std::cout << "Usage: gtrace dump --pid PID\n\n"
                  << "Prints, once, the Python and native stack of every thread of PID and its descendants, with\n"
                  << "each rank's blocking call first and identical stacks grouped across ranks. Each thread is\n"
                  << "stopped only while its own stack is read; none is left stopped, even on Ctrl-C.\n\n"
                  << desc << "\n" << kExitCodeHelp;
        return 0;
    }
    if (!vm.count("pid")) fail(make_error(ExitCode::Usage, "missing --pid: give the PID of the job to dump (e.g. torchrun's)"));
    install_signal_handlers();
    or_fail(run_dump(or_fail(parse_pid(vm["pid"].as<std::string>())), vm.count("system-wide") > 0, g_stop_signal));
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    std::string command_name = "attach";
    try {
        if (args.empty())
            fail(make_error(ExitCode::Usage, "missing command; usage: gtrace attach|record|report|dump ...; see gtrace --help"));
        if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
            std::cout << kUsage << record_options() << "\n" << kExitCodeHelp;
            return 0;
        }
        if (args[0] == "--version" || args[0] == "-V") return run_version();
        std::string command = args[0];
        command_name = command;
        args.erase(args.begin());
        if (command == "attach") return run_attach(args);
        if (command == "dump") return run_dump_command(args);
        if (command == "record") return run_record(args);
        if (command == "report") return run_report_command(args);
        if (command == "recover") return run_recover_command(args);
        fail(make_error(ExitCode::Usage, fmt::format("unknown command '{}'; see gtrace --help", command)));
    } catch (const po::error& e) {
        fail(make_error(ExitCode::Usage, fmt::format("{}; see gtrace {} --help", e.what(), command_name)));
    } catch (const std::exception& e) {
        fail(make_error(ExitCode::Internal, e.what()));
    }
}

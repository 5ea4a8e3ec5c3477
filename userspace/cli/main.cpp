// gtrace command line: subcommands, options, signals and exit codes. Exceptions stop here.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cctype>
#include <ctime>
#include <filesystem>
#include <iostream>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include "foundation/printable.h"
#include "capture/capture.h"
#include "foundation/test_hooks.h"
#include "cli/capture_flags.h"
#include "cli/command_line.h"
#include "cli/dump_command.h"
#include "cli/exit_code_help.h"
#include "cli/merge_command.h"
#include "cli/option_values.h"
#include "cli/ps_command.h"
#include "capture/launch.h"
#include "cli/recover_command.h"
#include "cli/report_command.h"
#include "output/flight_recorder.h"
#include "analyze/report_json.h"
#include "output/stale_captures.h"
#include "cli/version_command.h"
#include "foundation/exit_codes.h"
#include "foundation/output_file.h"
#include "foundation/privilege.h"
#include "capture/preflight.h"
#include "output/clocks.h"

namespace po = boost::program_options;
using namespace gtrace;

namespace {

constexpr const char* kUsage =
    "gtrace — trace the CUDA calls of a running PyTorch/CUDA job, with no restart and no code change.\n\n"
    "Usage:\n"
    "  gtrace ps [--json]\n"
    "  gtrace attach --pid PID [--duration SECONDS] [-o FILE] [--force] [-q] [options]\n"
    "  gtrace record [options] -- COMMAND [ARGS...]\n"
    "  gtrace dump --pid PID\n"
    "  gtrace report TRACE... [--json FILE] [--html FILE] [--force]\n"
    "  gtrace recover PARTIAL [-o FILE] [--force]\n"
    "  gtrace merge -o JOB.pftrace TRACE.pftrace... [--force]\n"
    "  gtrace <command> --help\n"
    "  gtrace --version       version, git commit and the kernel features found\n\n"
    "Commands:\n"
    "  ps       list the running jobs gtrace can attach to: torchrun agents, their ranks, CUDA processes\n"
    "  attach   attach to a running process tree (e.g. torchrun and its ranks) and write a trace\n"
    "  record   start a command with the GPU agent loaded from its start, and trace it like attach\n"
    "  report   step time breakdown and bottleneck verdict per rank, from traces gtrace wrote\n"
    "  recover  complete the partial trace (FILE.partial) of a capture that was killed\n"
    "  merge    join the traces of a job's nodes into one, their clocks aligned by the collectives\n"
    "  dump     print the Python and native stack of every thread in the tree once, grouped across ranks\n\n";

void on_stop_signal(int sig) { g_stop_signal.store(sig); }
void on_trigger_signal(int) {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts); // async-signal-safe
    int n = g_trigger_count.fetch_add(1);
    if (n < 2) g_trigger_ns[n].store(static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec));
}

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

// The host's name as a file name's part: one trace per node of a job can share a directory.
std::string host_for_file_name() {
    std::string host = host_name().substr(0, 64);
    for (char& c : host)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
    return host.empty() || host[0] == '.' ? "host" : host;
}

std::string default_output(int pid, TraceFormat format) {
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    return default_output_name(format, fmt::format("gtrace-{}-{}-{}", host_for_file_name(), pid, stamp));
}

// -o and --format: the format, and the output's name (the default one has the format's extension).
void read_output_options(const po::variables_map& vm, int pid, CaptureOptions& options) {
    std::string format = vm.count("format") ? vm["format"].as<std::string>() : std::string();
    std::string output = vm.count("output") ? vm["output"].as<std::string>() : std::string();
    options.format = or_fail(choose_format(output, format));
    options.output = vm.count("output") ? output : default_output(pid, options.format);
}

// The capture's findings, as `gtrace report` gives them on its trace: printed when a process did
// CUDA work — a rank, or a plain `python train.py` (unless quiet) — and written with the
// capture's facts for --summary-json. From the spans the capture's live analysis built of the
// events it wrote (analyze/live_trace.h): the trace is not read back. Past that analysis's memory
// budget (an hour of a busy job) it closes the steps that are over (analyze/closed_steps.h), and
// the report still covers the whole capture.
void report_capture(const CaptureOptions& options, const CaptureResult& result) {
    bool print = !options.quiet;
    if (!result.analysis) return; // nobody reads a report (capture/capture.cpp makes none then)
    nlohmann::json capture;
    if (!options.summary_json.empty()) {
        capture = result.facts;
        capture["trace"] = result.output;
        if (!result.script_incomplete.empty()) capture["script_incomplete"] = result.script_incomplete;
        capture["live_analysis"] = {{"steps_closed", result.analysis->steps_closed}, {"late_spans", result.analysis->late_spans},
                                    {"max_bytes", options.analysis_max_bytes}, {"recent_window_only", result.analysis->spans_from_ns.has_value()}};
    }
    ReportOptions report;
    report.json_path = options.summary_json;
    report.processes_required = false;
    report.print = print;
    report.analysis.step_marker = options.step_marker;
    report.analysis.redact = options.redact;
    report.capture = std::move(capture);
    if (auto r = present_report(analyze_capture(*result.analysis, result.output, report.analysis), report); !r) fail(r.error());
}

// The end of attach and record: the verdict, and exit code 12 when --steps fell short.
int finish_capture(const CaptureOptions& options, const CaptureResult& result) {
    if (!result.write_failure.empty()) {
        if (!result.write_failure_reported) print_safe(stderr, "gtrace: error: {}\n", result.write_failure);
        return to_int(ExitCode::WriteFailed);
    }
    report_capture(options, result);
    if (!result.script_incomplete.empty()) {
        print_safe(stderr, "gtrace: error: {}; the trace holds what was captured\n", result.script_incomplete);
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
    // A flight recorder writes OUT-1.ext, OUT-2.ext, ... and OUT-N.report.txt: the first of each
    // is checked, and no other output may take a dump's name (a later dump would replace it).
    std::string trace = options.output;
    if (options.flight_window_s) {
        for (const auto& o : outputs)
            if (is_flight_dump_file(options.output, o.path))
                fail(make_error(ExitCode::Usage, fmt::format("{} {} is where a flight recorder dump of -o {} goes; give it another path",
                                                             o.option, o.path, options.output)));
        trace = flight_dump_path(options.output, 1);
        outputs.push_back({"-o's first dump report", flight_report_path(trace), false});
    }
    or_fail(check_trace_outputs({options.format, trace, options.step_marker}, outputs, options.force));
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
                  << desc << "\n" << exit_code_help("attach");
        return 0;
    }
    if (!vm.count("pid")) fail(make_error(ExitCode::Usage, "missing --pid: give the PID of the job to trace (e.g. torchrun's)"));
    CaptureOptions options;
    options.pid = or_fail(parse_pid(vm["pid"].as<std::string>()));
    // Before anything reads gtrace's environment or the options' files: whose process it is
    // (once gtrace has the privileges to trace at all: without them, that is what to fix first).
    or_fail(check_privileges());
    or_fail(check_target_owner(options.pid, vm.count("allow-other-users") > 0));
    read_capture_options(vm, options);
    read_output_options(vm, options.pid, options);
    prepare_outputs(vm, options);

    install_signal_handlers(capture_signal(options));
    auto capture = or_fail(Capture::attach(options));
    if (!options.quiet)
        print_safe(stderr, "gtrace: attached to PID {} and its children; {}{}\n", options.pid, output_description(options),
                   options.duration_s ? fmt::format(" for {:g} s", *options.duration_s) : " until Ctrl-C");
    return finish_capture(options, or_fail(capture->run()));
}

int run_record(std::vector<std::string> args) {
    auto sep = std::find(args.begin(), args.end(), "--");
    std::vector<std::string> command(sep == args.end() ? sep : sep + 1, args.end());
    args.erase(sep, args.end());
    po::variables_map vm = parse_options(args, record_options(true), "record");
    if (vm.count("help")) {
        std::cout << "Usage: gtrace record [options] -- COMMAND [ARGS...]\n\n"
                  << "Starts COMMAND with the CUPTI agent loaded by CUDA itself (CUDA_INJECTION64_PATH) and traces\n"
                  << "it and every process it starts exactly as attach does. Stops when they have all exited,\n"
                  << "at --duration, or on Ctrl-C.\n\n"
                  << record_options() << "\n" << exit_code_help("record");
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
    install_signal_handlers(capture_signal(options));
    return finish_capture(options, or_fail(record_command(options, command, on_stop)));
}

int run_report_command(const std::vector<std::string>& args) {
    po::options_description desc("gtrace report options");
    desc.add_options()("help,h", "show this help")("json", po::value<std::string>(), "also write the findings as JSON")
        ("html", po::value<std::string>(), "also write a self-contained HTML report with charts")
        ("force,f", "replace an existing --json or --html file (a regular file only: a link there is refused)")
        ("step-marker", po::value<std::string>()->default_value(kDefaultStepMarker),
         "regex (ECMAScript) on the names of PyTorch record_function ranges and NVTX ranges (their message): a matching range ends a step")
        ("no-redact", "keep secret values in the command lines of the traces' process labels (hidden as *** by default)")
        ("summaries", "the files are nodes' summaries (gtrace report --json, attach/record --summary-json), not traces: "
                      "merge them into the job's report without reading a trace");
    po::options_description all = desc;
    all.add_options()("trace", po::value<std::vector<std::string>>(), "trace files"); // positional, not in --help
    po::positional_options_description pos;
    pos.add("trace", -1);
    po::variables_map vm = parse_options(args, all, "report", &pos);
    if (vm.count("help")) {
        std::cout << "Usage: gtrace report TRACE... [--json FILE] [--html FILE] [--force]\n"
                  << "       gtrace report --summaries SUMMARY.json... [--json FILE] [--force]\n\n"
                  << "Per rank: steps, where the step time goes (Kernel, Memcpy, Memset, Communication, Runtime,\n"
                  << "DataLoader, CPU Exec, Other, adding up to the step), GPU utilization, launch statistics, and\n"
                  << "a verdict with the figures behind it; then one for the whole job. A partial trace\n"
                  << "(FILE.partial, left by a capture that was killed) is read up to its last whole event.\n\n"
                  << desc << "\n" << exit_code_help("report");
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
    options.summaries = vm.count("summaries") > 0;
    if (options.summaries) {
        // A summary holds each rank's figures, found and redacted when it was written.
        if (vm.count("html")) fail(make_error(ExitCode::Usage, "--html needs traces: summaries hold no per-step rows to chart"));
        if (!vm["step-marker"].defaulted() || vm.count("no-redact"))
            fail(make_error(ExitCode::Usage, "--step-marker and --no-redact apply to traces: a summary's steps were found, and its "
                                             "command lines redacted, when it was written"));
    }
    check_step_marker(options.analysis.step_marker);
    or_fail(run_report(traces, options));
    return 0;
}

int run_recover_command(const std::vector<std::string>& args) {
    po::options_description desc("gtrace recover options");
    desc.add_options()("help,h", "show this help")
        ("output,o", po::value<std::string>(), "where the trace goes; default: PARTIAL without .partial")
        ("force,f", "replace an existing output file");
    po::options_description all = desc;
    all.add_options()("partial", po::value<std::vector<std::string>>(), "the partial trace"); // positional, not in --help
    po::positional_options_description pos;
    pos.add("partial", -1);
    po::variables_map vm = parse_options(args, all, "recover", &pos);
    if (vm.count("help")) {
        std::cout << "Usage: gtrace recover PARTIAL [-o FILE] [--force]\n\n"
                  << "A capture that was killed (kill -9, a crash) leaves its events in OUTPUT.partial; the next\n"
                  << "gtrace attach or record lists it. This completes it into a trace: its whole events, then an\n"
                  << "otherData that says it was recovered. It is completed in place and renamed to FILE.\n\n"
                  << desc << "\n" << exit_code_help("recover");
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
        ("json", po::value<std::string>(), "also write where the ranks stand and every thread's stacks as JSON to this file "
                                           "(one per node: gtrace dump --merge reads them)")
        ("merge", po::value<std::vector<std::string>>()->multitoken(),
         "FILE...: where the ranks stand across several nodes' dumps (their --json files); no --pid")
        ("force,f", "replace an existing --json file")
        ("system-wide", "allow a --pid whose tree is the whole host: PID 1, or a tree with processes of several users")
        ("allow-other-users", allow_other_users_help());
    po::variables_map vm = parse_options(args, desc, "dump");
    if (vm.count("help")) {
        std::cout << "Usage: gtrace dump --pid PID [--json FILE]\n       gtrace dump --merge FILE...\n\n"
                  << "Prints, once, the Python and native stack of every thread of PID and its descendants, with\n"
                  << "each rank's blocking call first and identical stacks grouped across ranks. Each thread is\n"
                  << "stopped only while its own stack is read; none is left stopped, even on Ctrl-C. Then where the\n"
                  << "ranks stand: grouped by the collective or sync each main thread is in (else its frame), with the\n"
                  << "user's line, and the odd ones out — the ranks the others wait for.\n\n"
                  << desc << "\n" << exit_code_help("dump");
        return 0;
    }
    if (vm.count("merge")) {
        if (vm.count("pid") || vm.count("json")) fail(make_error(ExitCode::Usage, "--merge reads dumps: give it no --pid or --json"));
        or_fail(run_dump_merge(vm["merge"].as<std::vector<std::string>>()));
        return 0;
    }
    if (!vm.count("pid")) fail(make_error(ExitCode::Usage, "missing --pid: give the PID of the job to dump (e.g. torchrun's)"));
    DumpOptions options;
    options.pid = or_fail(parse_pid(vm["pid"].as<std::string>()));
    options.system_wide = vm.count("system-wide") > 0;
    options.force = vm.count("force") > 0;
    if (vm.count("json")) {
        options.json_path = vm["json"].as<std::string>();
        or_fail(check_outputs({{"--json", options.json_path, false}}, {}, options.force));
    }
    or_fail(check_ptrace_privileges());
    or_fail(check_target_owner(options.pid, vm.count("allow-other-users") > 0));
    install_signal_handlers();
    or_fail(run_dump(options, g_stop_signal));
    return 0;
}

int run_ps_command(const std::vector<std::string>& args) {
    po::options_description desc("gtrace ps options");
    desc.add_options()("help,h", "show this help")("json", "print the list as one JSON object (processes: pid, ppid, role, "
                                                           "job, rank, local_rank, world_size, cuda, argv)")
        ("no-redact", "keep secret values of command lines (--password=..., *_TOKEN=...); hidden as *** by default");
    po::variables_map vm = parse_options(args, desc, "ps");
    if (vm.count("help")) {
        std::cout << "Usage: gtrace ps [--json]\n\n"
                  << "Lists the running jobs gtrace can attach to, job by job: each torchrun agent (torchrun, python -m\n"
                  << "torch.distributed.run or .launch) with its ranks (RANK, LOCAL_RANK, WORLD_SIZE from their\n"
                  << "environment; no other variable is read out), ranks started without torchrun, and any other\n"
                  << "process with libcudart or libcuda loaded. Processes under a listed one (DataLoader workers) are\n"
                  << "traced with it and not listed. Trace a job with gtrace attach --pid <its agent's PID>. As root,\n"
                  << "every process is seen; as a user, only your own processes' ranks and libraries.\n\n"
                  << desc << "\n" << exit_code_help("ps");
        return 0;
    }
    or_fail(run_ps({.json = vm.count("json") > 0, .redact = vm.count("no-redact") == 0}));
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    Privilege::decide(); // first: whether gtrace's own environment may be read at all
    std::vector<std::string> args(argv + 1, argv + argc);
    std::string command_name = "attach";
    try {
        if (args.empty())
            fail(make_error(ExitCode::Usage, "missing command; usage: gtrace ps|attach|record|report|merge|dump ...; see gtrace --help"));
        if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
            std::cout << kUsage << attach_options() << "\n"
                      << "gtrace record takes the same options but --pid and --system-wide, and --on-stop term|kill|keep\n"
                      << "(see gtrace record --help). Each command's --help shows its own options and exit codes.\n\n"
                      << exit_code_help("");
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
        if (command == "merge") return run_merge_command(args);
        if (command == "ps") return run_ps_command(args);
        fail(make_error(ExitCode::Usage, fmt::format("unknown command '{}'; see gtrace --help", command)));
    } catch (const po::error& e) {
        fail(make_error(ExitCode::Usage, fmt::format("{}; see gtrace {} --help", e.what(), command_name)));
    } catch (const std::exception& e) {
        fail(make_error(ExitCode::Internal, e.what()));
    }
}

// The command line of gtrace attach, record and dump: Boost's parse (cli/command_line.cpp), then
// every option's value (cli/capture_flags.cpp, cli/option_values.cpp, the --format/-o choice).
// The input is the arguments, separated by NUL bytes; the first picks the command. Nothing is
// attached: only what gtrace decides before it touches a process.
#include <algorithm>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "cli/capture_flags.h"
#include "cli/command_line.h"
#include "cli/option_values.h"
#include "output/trace_formats.h"

namespace gtrace {

// In place of cli/fail.cpp's, which ends the process: a usage error is an answer here.
struct Failed {
    Error error;
};
void fail(const Error& e) { throw Failed{e}; }

} // namespace gtrace

namespace {

namespace po = boost::program_options;
using namespace gtrace;

std::vector<std::string> split_arguments(const uint8_t* data, size_t size) {
    std::vector<std::string> args(1);
    for (size_t i = 0; i < size; ++i) {
        if (data[i]) args.back() += static_cast<char>(data[i]);
        else args.emplace_back();
    }
    return args;
}

std::string value(const po::variables_map& vm, const char* option) {
    return vm.count(option) ? vm[option].as<std::string>() : std::string();
}

void parse_capture(std::vector<std::string> args, bool record) {
    if (record) args.erase(std::find(args.begin(), args.end(), "--"), args.end()); // the command, as main() cuts it
    po::variables_map vm = parse_options(args, record ? record_options(true) : attach_options(), record ? "record" : "attach");
    CaptureOptions options;
    if (!record && vm.count("pid")) options.pid = or_fail(parse_pid(value(vm, "pid")));
    read_capture_options(vm, options);
    if (record) parse_on_stop(value(vm, "on-stop"));
    options.format = or_fail(choose_format(value(vm, "output"), value(vm, "format")));
    (void)capture_signal(options);
}

void parse_dump(const std::vector<std::string>& args) {
    po::options_description desc("gtrace dump options");
    desc.add_options()("help,h", "")("pid,p", po::value<std::string>(), "")("system-wide", "");
    po::variables_map vm = parse_options(args, desc, "dump");
    if (vm.count("pid")) or_fail(parse_pid(value(vm, "pid")));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::vector<std::string> args = split_arguments(data, size);
    std::string command = args.front();
    args.erase(args.begin());
    try {
        if (command == "attach") parse_capture(args, false);
        else if (command == "record") parse_capture(args, true);
        else if (command == "dump") parse_dump(args);
        else {
            // The value parsers on their own, each on the whole text.
            std::string text = args.empty() ? command : args.front();
            (void)parse_duration(text, "--duration");
            (void)parse_ring_size(text, "--buffer-size");
            (void)parse_memory_size(text, "--flight-memory");
            (void)parse_steps(text);
            (void)parse_slow_step_factor(text);
            (void)parse_py_stacks(text);
            (void)parse_max_events(text);
            (void)parse_rate(text, "--sample-hz");
        }
    } catch (const Failed&) {
    } catch (const po::error&) { // main() turns these into a usage error (exit 2)
    }
    return 0;
}

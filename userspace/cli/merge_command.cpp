#include "foundation/printable.h"
#include "cli/merge_command.h"

#include <iostream>
#include <map>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analyze/job_report.h"
#include "cli/command_line.h"
#include "cli/exit_code_help.h"
#include "foundation/output_file.h"
#include "output/pftrace_merge.h"
#include "analyze/report_text.h"

namespace gtrace {
namespace {

namespace po = boost::program_options;

constexpr const char* kUsage = "gtrace merge -o JOB.pftrace TRACE.pftrace TRACE.pftrace... [--force]";

// One job: a rank in two traces means they are not one trace per node of one job.
Result<void> check_one_job(const JobReport& report) {
    std::map<int, size_t> node_of_rank;
    for (const auto& p : report.processes) {
        if (!p.rank) continue;
        auto [it, added] = node_of_rank.try_emplace(*p.rank, p.node);
        if (!added && it->second != p.node)
            return make_error(ExitCode::Usage, fmt::format("{} and {} both hold rank {}: give one trace per node of one job",
                                                           report.nodes[it->second].trace, report.nodes[p.node].trace, *p.rank));
    }
    return {};
}

nlohmann::json merged_facts(const JobReport& report) {
    nlohmann::json nodes = nlohmann::json::array();
    for (const auto& n : report.nodes) {
        nlohmann::json node = {{"name", n.name}, {"host", n.host}, {"trace", n.trace}, {"ranks", n.ranks},
                               {"offset_ns", n.clock.offset_ns()}, {"clock_offset_ns", n.clock.clock_offset_ns},
                               {"refined_ns", n.clock.refined_ns}, {"matched_collectives", n.clock.matched}, {"method", n.clock.method}};
        if (n.clock.residual_ns) node["residual_skew_us"] = static_cast<double>(*n.clock.residual_ns) / 1e3;
        nodes.push_back(node);
    }
    return {{"nodes", nodes}};
}

} // namespace

int run_merge_command(const std::vector<std::string>& args) {
    po::options_description desc("gtrace merge options");
    desc.add_options()("help,h", "show this help")("output,o", po::value<std::string>(), "the merged trace (.pftrace)")
        ("force,f", "replace an existing output file");
    po::options_description all = desc;
    all.add_options()("trace", po::value<std::vector<std::string>>(), "trace files"); // positional, not in --help
    po::positional_options_description pos;
    pos.add("trace", -1);
    po::variables_map vm = parse_options(args, all, "merge", &pos);
    if (vm.count("help")) {
        std::cout << "Usage: " << kUsage << "\n\n"
                  << "Joins the traces of a job's nodes (one .pftrace per node, each from its own gtrace attach) into one\n"
                  << "trace, each node's processes named with its host. Times go onto the first trace's clock: first by\n"
                  << "the clock readings each trace holds (CLOCK_REALTIME against CLOCK_MONOTONIC), then corrected by\n"
                  << "the ends of the same collectives on every rank (a collective ends on all ranks together). The\n"
                  << "offsets and the residual skew are printed; gtrace report on the same traces names the straggler\n"
                  << "node.\n\n"
                  << desc << "\n" << exit_code_help("merge");
        return 0;
    }
    if (!vm.count("output") || vm["output"].as<std::string>().empty())
        fail(make_error(ExitCode::Usage, fmt::format("missing -o: give the merged trace's file name: {}", kUsage)));
    auto traces = vm.count("trace") ? vm["trace"].as<std::vector<std::string>>() : std::vector<std::string>();
    if (traces.size() < 2) fail(make_error(ExitCode::Usage, fmt::format("give two traces or more, one per node: {}", kUsage)));
    const std::string output = vm["output"].as<std::string>();
    const bool force = vm.count("force") > 0;
    or_fail(check_outputs({{"-o", output, false}}, traces, force));
    auto report = or_fail(analyze_job(traces, {}));
    or_fail(check_one_job(report));
    std::vector<MergeInput> inputs;
    for (const auto& n : report.nodes) inputs.push_back({n.trace, n.name, n.clock.offset_ns()});
    auto summary = or_fail(merge_pftraces(inputs, output, force, merged_facts(report).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
    print_safe(stderr, "gtrace: merged {} traces ({} ranks) into {}; times on {}'s clock\n", traces.size(), report.rank_count(), output,
               report.nodes[0].name);
    for (size_t i = 0; i < report.nodes.size(); ++i) {
        const JobNode& n = report.nodes[i];
        print_safe(stderr, "  node {} ({}): {}{}\n", n.name, n.trace, clock_alignment_text(n.clock),
                   summary.pid_shift[i] ? fmt::format("; its PIDs raised by {} (they collide with another node's)", summary.pid_shift[i]) : "");
    }
    return 0;
}

} // namespace gtrace

// gtrace report --summaries: a node's summary reads back into the figures its report was made
// of, and summaries of several nodes merge into the job's verdict without a trace — the rank
// the others wait for named across nodes, bad and hostile files refused in one line.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <chrono>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analyze/job_report.h"
#include "analyze/report_json.h"
#include "analyze/report_text.h"
#include "analyze/summary_reader.h"
#include "analyze/verdict.h"
#include "temp_dir.h"

using namespace gtrace;

namespace {

// One rank of a node's summary: `comm` of its 100 ms step in collectives, the rest CPU Exec.
nlohmann::json rank_entry(int rank, double comm, const std::string& verdict) {
    nlohmann::json share = {{"Kernel", 0.1}, {"Memcpy", 0.0},     {"Memset", 0.0},     {"Communication", comm}, {"Runtime", 0.0},
                            {"DataLoader", 0.0}, {"Blocked", 0.0}, {"CPU Exec", 0.9 - comm}, {"Other", 0.0}};
    return {{"rank", rank}, {"name", fmt::format("rank {}", rank)}, {"pid", 1000 + rank}, {"steps", 50}, {"step_ms", 100.0},
            {"breakdown_share", share}, {"kernel_ms_per_step", 10.0}, {"verdict", verdict}, {"evidence", "own figures"},
            {"cause_share", 0.5}, {"per_step", nlohmann::json::array({{{"wall_ms", 100.0}}})},
            {"collectives", {{{"name", "all_reduce"}, {"on", "cpu"}, {"count", 50}, {"ms", comm * 100 * 50}, {"wait_ms", 0.0},
                              {"waited_for_ms", nlohmann::json::object()}}}}};
}

// A node's --summary-json: its capture's host and CPU pressure, its ranks.
std::string write_node(TempDir& dir, const std::string& host, std::vector<nlohmann::json> ranks, double pressure = 0.02) {
    nlohmann::json j = {{"traces", {host + ".pftrace"}}, {"verdict", {{"job", "mixed"}}}, {"ranks", ranks},
                        {"capture", {{"host", host}, {"cpu_pressure", {{"some", pressure}, {"source", "/proc/pressure/cpu"}}}}}};
    return dir.write(host + ".summary.json", j.dump());
}

} // namespace

TEST_CASE("a report's JSON reads back into the figures it was made of") {
    ProcessAnalysis p;
    p.rank = 3, p.pid = 77, p.name = "rank 3", p.step_rule = "steps end at each Optimizer.step range";
    p.steps.resize(4);
    p.step_ms = 12.5, p.kernel_ms_per_step = 4.0, p.gpu_utilization = 0.3, p.launches_per_step = 9;
    p.share[kKernel] = 0.3, p.share[kCommunication] = 0.5, p.share[kCpuExec] = 0.2;
    p.collectives.push_back({"all_reduce", 8, 25.0, 20.0, {{1, 20.0}}, false});
    p.collective_wait_ms_per_step = 5.0;
    p.waits.collective = 6.0, p.waits.dataloader = 0.5;
    p.blocked.push_back({"a lock", "train (t.py:3)", 0.25});
    p.top_kernels_ms.emplace_back("gemm", 16.0);
    p.memory.peak_bytes = 1 << 20, p.memory.peak_ms = 3.5;
    p.verdict = "communication", p.evidence = "waits", p.cause_share = 0.5;
    p.causes = {{kCommunication, 0.5}, {kKernel, 0.3}};
    JobReport report;
    report.processes.push_back(p);
    JobNode node;
    node.host = "node-7", node.cpu_pressure = 0.25;
    report.nodes.push_back(node);
    auto back = read_node_summary(report_json(report), "s.json");
    REQUIRE(back);
    CHECK(back->host == "node-7");
    CHECK(back->cpu_pressure == 0.25);
    REQUIRE(back->processes.size() == 1);
    const ProcessAnalysis& q = back->processes[0];
    CHECK(q.rank == 3);
    CHECK(q.pid == 77);
    CHECK(q.step_count() == 4);
    CHECK(q.steps.empty());
    CHECK(q.step_ms == 12.5);
    CHECK(q.share == p.share);
    REQUIRE(q.collectives.size() == 1);
    CHECK(q.collectives[0].name == "all_reduce");
    CHECK(q.collectives[0].count == 8);
    CHECK(q.collectives[0].waited_for_ms == p.collectives[0].waited_for_ms);
    CHECK(q.waits.collective == 6.0);
    CHECK(q.blocked[0].where == "train (t.py:3)");
    CHECK(q.top_kernels_ms == p.top_kernels_ms);
    CHECK(q.memory.peak_bytes == p.memory.peak_bytes);
    CHECK(q.verdict == "communication");
    CHECK(q.causes == p.causes);
    CHECK(q.cause_share == 0.5);
    // Written again, the same text: nothing the report prints was lost on the way.
    JobReport again;
    again.processes = back->processes;
    CHECK(format_report(again) == format_report(report));
}

TEST_CASE("summaries of three nodes: the rank that spends least in collectives is the one the others wait for") {
    TempDir dir("unit-summaries");
    std::vector<std::string> paths = {write_node(dir, "node-a", {rank_entry(0, 0.40, "communication"), rank_entry(1, 0.42, "communication")}),
                                      write_node(dir, "node-b", {rank_entry(2, 0.41, "communication"), rank_entry(3, 0.02, "cpu")}),
                                      write_node(dir, "node-c", {rank_entry(4, 0.39, "communication"), rank_entry(5, 0.40, "communication")})};
    auto r = merge_summaries(paths);
    REQUIRE(r);
    CHECK(r->from_summaries);
    REQUIRE(r->processes.size() == 6);
    REQUIRE(r->verdict.straggler);
    CHECK(r->verdict.verdict == "straggler");
    CHECK(r->verdict.straggler->rank == 3);
    CHECK(r->verdict.straggler->waiting_rank == 1);
    CHECK(r->verdict.straggler->inferred);
    INFO(r->verdict.evidence);
    CHECK(r->verdict.evidence.starts_with("rank 3 spends least of its step in collectives (2.00 ms per step; the other ranks 40.00 ms"));
    CHECK(r->verdict.evidence.find("inferred") != std::string::npos);
    auto j = report_json(*r);
    CHECK(j["straggler_node"] == "node-b");
    CHECK(j["from_summaries"] == true);
    CHECK(j["ranks"][3]["steps"] == 50);
    std::string text = format_report(*r);
    CHECK(text.find("6 ranks from 3 node summaries (no trace read)") != std::string::npos);
    CHECK(text.find("straggler: node node-b rank 3") != std::string::npos);

    // Every rank alike: no one is waited for.
    std::vector<std::string> even = {write_node(dir, "node-d", {rank_entry(0, 0.40, "communication")}),
                                     write_node(dir, "node-e", {rank_entry(1, 0.38, "communication")})};
    auto e = merge_summaries(even);
    REQUIRE(e);
    CHECK_FALSE(e->verdict.straggler);
}

TEST_CASE("many ranks from summaries: verdicts by rank ranges, rows for the ranks the verdict names") {
    TempDir dir("unit-summaries-many");
    std::vector<std::string> paths;
    for (int node = 0; node < 8; ++node) {
        std::vector<nlohmann::json> ranks;
        for (int i = 0; i < 8; ++i) {
            int rank = node * 8 + i;
            ranks.push_back(rank == 37 ? rank_entry(rank, 0.01, "cpu") : rank_entry(rank, 0.45, "communication"));
        }
        paths.push_back(write_node(dir, fmt::format("n{}", node), ranks));
    }
    auto r = merge_summaries(paths);
    REQUIRE(r);
    REQUIRE(r->verdict.straggler);
    CHECK(r->verdict.straggler->rank == 37);
    std::string text = format_report(*r);
    INFO(text);
    CHECK(text.find("rank verdicts: cpu: rank 37; straggler: ranks 0-36, 38-63\n") != std::string::npos);
    CHECK(text.find("   rank 37 ") != std::string::npos);
    CHECK(text.find("   rank 12 ") == std::string::npos); // no row: neither named nor bounding
    CHECK(text.find("n4 ") != std::string::npos);          // the nodes' table: rank 37's node among them
}

TEST_CASE("summaries: a rank in two is taken once; a node's contended CPUs are said") {
    TempDir dir("unit-summaries-dup");
    std::vector<std::string> paths = {write_node(dir, "node-a", {rank_entry(0, 0.40, "communication")}),
                                      write_node(dir, "node-b", {rank_entry(1, 0.01, "cpu"), rank_entry(0, 0.5, "communication")}, 0.6)};
    auto r = merge_summaries(paths);
    REQUIRE(r);
    CHECK(r->processes.size() == 2);
    REQUIRE(r->notes.size() == 1);
    CHECK(r->notes[0].starts_with("rank 0 is in "));
    REQUIRE(r->verdict.straggler);
    CHECK(r->verdict.host_cpu_pressure == 0.6);
}

TEST_CASE("summaries that are not: one line, exit 11, quickly") {
    TempDir dir("unit-summaries-bad");
    auto refused = [&](const std::string& path, const std::string& says) {
        auto started = std::chrono::steady_clock::now();
        auto r = merge_summaries({path});
        CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(2));
        REQUIRE_FALSE(r);
        CHECK(r.error().code == ExitCode::BadTrace);
        INFO(r.error().message);
        CHECK(r.error().message.find(says) != std::string::npos);
        CHECK(r.error().message.find('\n') == std::string::npos);
    };
    refused(dir.write("trace.json", R"({"traceEvents": []})"), "not a gtrace summary");
    refused(dir.write("junk.json", "\x01\x02 not json"), "not JSON");
    refused(dir.write("deep.json", std::string(100000, '[') + std::string(100000, ']')), "nested deeper than 64");
    std::string fifo = dir.at("fifo.json");
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0); // nobody writes it: reading would block for ever
    refused(fifo, "not a regular file");
    refused(dir.at("missing.json"), "missing.json");
    // A rank number and figures of the wrong type or range read as absent, not trusted.
    auto r = merge_summaries({write_node(dir, "odd", {{{"rank", -4}, {"steps", "many"}, {"step_ms", -1}}, {{"rank", 1e300}}})});
    REQUIRE(r);
    for (const auto& p : r->processes) {
        CHECK_FALSE(p.rank);
        CHECK(p.step_ms == 0);
        CHECK(p.step_count() == 0);
    }
}

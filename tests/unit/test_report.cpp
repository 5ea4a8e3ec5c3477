// `gtrace report`'s analysis on traces built span by span: which processes it reports and how it
// names them, verdicts with and without a dominant cause, the job's verdict, times from the
// capture's start, the memory curve, and the JSON and text rendering.
#include <catch2/catch.hpp>

#include <algorithm>

#include "analyze/job_report.h"
#include "analyze/memory_curve.h"
#include "analyze/step_analysis.h"
#include "analyze/verdict.h"
#include "analyze/report_json.h"
#include "analyze/report_text.h"
#include "ns_units.h"

using namespace gtrace;

namespace {

constexpr uint64_t kCaptureStart = 7'000'000'000; // the capture's first event

// What each 10 ms step holds, in ms, one part after the other: a DataLoader range, a copy, a
// kernel, a CPU range; the rest is Other. Steps end at Optimizer.step ranges.
struct StepShape {
    double loader = 0, copy = 0, kernel = 0, cpu = 0;
};

void add_steps(TraceData& t, ProcessData& p, StepShape shape, int steps = 6, double kernel_factor = 1) {
    auto ns = [](double ms) { return static_cast<uint64_t>(ms * 1e6); };
    uint64_t at = kCaptureStart + 5 * kMs; // the first event: a call at kCaptureStart
    p.calls.push_back({{kCaptureStart, kCaptureStart + 1000}, t.strings.intern("cudaMalloc"), {}, {}, 0, p.pid, 0});
    for (int i = 0; i <= steps; ++i, at += 10 * kMs) {
        uint64_t t0 = at;
        if (shape.loader) p.ranges.push_back({{t0, t0 + ns(shape.loader)}, t.strings.intern("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"), p.pid});
        t0 += ns(shape.loader);
        if (shape.copy) p.gpu.push_back({{t0, t0 + ns(shape.copy)}, t.strings.intern("Memcpy HtoD"), t.strings.intern("HtoD"), 1 << 20, 0, GpuKind::Memcpy});
        t0 += ns(shape.copy);
        uint32_t corr = static_cast<uint32_t>(i + 1);
        p.calls.push_back({{t0, t0 + 5000}, t.strings.intern("cudaLaunchKernel"), {}, {}, 0, p.pid, corr});
        if (shape.kernel)
            p.gpu.push_back({{t0 + 5000, t0 + 5000 + ns(shape.kernel * kernel_factor)}, t.strings.intern("gemm"), {}, 0, corr, GpuKind::Kernel});
        t0 += ns(shape.kernel * kernel_factor);
        if (shape.cpu) p.ranges.push_back({{t0, t0 + ns(shape.cpu)}, t.strings.intern("forward"), p.pid});
        uint64_t end = at + 10 * kMs;
        p.ranges.push_back({{end - 1000, end}, t.strings.intern("Optimizer.step#Adam.step"), p.pid});
    }
    // GPU work after the last step: steps past the GPU records' end are left out.
    p.gpu.push_back({{at, at + 1000}, t.strings.intern("gemm"), {}, 0, 0, GpuKind::Kernel});
}

ProcessData& process(TraceData& t, uint32_t pid, std::optional<int> rank, const std::string& cmdline = "/usr/bin/python3 train.py") {
    ProcessData& p = t.processes[pid];
    p.pid = pid, p.rank = rank, p.cmdline = cmdline;
    p.label = (rank ? "rank " + std::to_string(*rank) + " · " : "") + "python3 train.py (pid " + std::to_string(pid) + ")";
    return p;
}

JobReport judged(TraceData& t) {
    JobReport r;
    r.traces = {"trace.json"};
    r.processes = analyze_processes(t);
    for (auto& p : r.processes) judge_process(p, "^Optimizer\\.step");
    r.verdict = judge_job(r.processes);
    return r;
}

double share(const ProcessAnalysis& p, Category c) { return p.share[static_cast<size_t>(c)]; }

} // namespace

TEST_CASE("a process without a rank that did CUDA work is reported, named by pid and command line") {
    TraceData t;
    add_steps(t, process(t, 30, std::nullopt, "/usr/bin/python3 train.py --password=hunter2"), {.kernel = 8});
    ProcessData& worker = process(t, 31, std::nullopt); // a DataLoader worker: a forked copy
    worker.forked = true;
    worker.calls.push_back({{kCaptureStart, kCaptureStart + 10}, t.strings.intern("cudaMalloc"), {}, {}, 0, 31, 0});
    process(t, 32, std::nullopt); // no CUDA work: the launcher
    add_steps(t, process(t, 20, 1), {.kernel = 8});
    add_steps(t, process(t, 21, 0), {.kernel = 8});

    auto ps = analyze_processes(t);
    REQUIRE(ps.size() == 3);
    CHECK(ps[0].name == "rank 0");
    CHECK(ps[1].name == "rank 1");
    CHECK(ps[2].name == "pid 30 (python3 train.py --password=***)");
    CHECK_FALSE(ps[2].rank);
    CHECK(ps[2].steps.size() == 6);
}

TEST_CASE("a single process's verdict is the job's, and attach/record have something to print") {
    TraceData t;
    add_steps(t, process(t, 30, std::nullopt), {.copy = 6, .kernel = 1});
    JobReport r = judged(t);
    REQUIRE(r.processes.size() == 1);
    CHECK(r.processes[0].verdict == "copy");
    CHECK(r.verdict.verdict == "copy");
    CHECK(r.verdict.remedy == remedy("copy"));
    std::string text = format_report(r);
    CHECK(text.find("1 process without a rank") != std::string::npos);
    CHECK(text.find("pid 30 (python3 train.py): copy: Memcpy 60% of the step") != std::string::npos);
    CHECK(text.find("JOB VERDICT: copy") != std::string::npos);
    auto j = report_json(r);
    CHECK(j["ranks"][0]["rank"].is_null());
    CHECK(j["ranks"][0]["name"] == "pid 30 (python3 train.py)");
    CHECK(j["verdict"]["ranks"] == nlohmann::json{{"pid 30", "copy"}});
}

TEST_CASE("a cause dominates with half of the step, or twice every other part; else the step is mixed") {
    struct Case {
        StepShape shape;
        const char* verdict;
        const char* leading;
    } cases[] = {
        {{.loader = 5.5, .copy = 1, .kernel = 2}, "data_loading", ""},   // 55%
        {{.loader = 4, .copy = 1.5, .kernel = 1.5, .cpu = 1.5}, "data_loading", ""}, // 40%, the rest 15% at most
        {{.loader = 4, .copy = 1.5, .kernel = 2.5}, "mixed", "data_loading"}, // 40% against 25% of kernels
        {{.loader = 3.5, .kernel = 3, .cpu = 3}, "mixed", "data_loading"},
        {{.kernel = 4.5, .cpu = 4}, "mixed", "gpu"}, // the largest part, though under the gpu threshold
        {{.kernel = 8}, "gpu", ""},
    };
    for (const auto& c : cases) {
        TraceData t;
        add_steps(t, process(t, 20, 0), c.shape);
        JobReport r = judged(t);
        INFO("loader " << c.shape.loader << " copy " << c.shape.copy << " kernel " << c.shape.kernel << " cpu " << c.shape.cpu);
        const ProcessAnalysis& p = r.processes.at(0);
        CHECK(p.verdict == c.verdict);
        CHECK(p.leading == c.leading);
        // The parts, ranked, add up to the step.
        double sum = 0;
        for (size_t i = 0; i < p.causes.size(); ++i) {
            sum += p.causes[i].second;
            if (i) CHECK(p.causes[i - 1].second >= p.causes[i].second);
        }
        CHECK(sum == Approx(1.0));
        if (std::string(c.verdict) == "mixed") {
            CHECK(p.evidence.starts_with("no dominant cause"));
            CHECK(p.evidence.find(category_name(p.causes[0].first)) != std::string::npos);
            CHECK(format_report(r).find(std::string("JOB VERDICT: mixed — no dominant cause; leading cause: ") + c.leading) != std::string::npos);
            CHECK(r.verdict.remedy.find(remedy(c.leading)) != std::string::npos);
        }
    }
}

namespace {

// Steps of 10 ms: a DataLoader range, then `launches` launches 40 µs apart (5 µs calls, 10 µs
// kernels: longer than the call, yet the GPU finishes each long before the next arrives) inside a
// CPU range.
void add_launch_steps(TraceData& t, ProcessData& p, double loader_ms, int launches = 100, int steps = 6) {
    p.calls.push_back({{kCaptureStart, kCaptureStart + 1000}, t.strings.intern("cudaMalloc"), {}, {}, 0, p.pid, 0});
    uint64_t at = kCaptureStart + 5 * kMs;
    uint32_t corr = 0;
    for (int i = 0; i <= steps; ++i, at += 10 * kMs) {
        uint64_t t0 = at + static_cast<uint64_t>(loader_ms * 1e6);
        if (loader_ms > 0) p.ranges.push_back({{at, t0}, t.strings.intern("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"), p.pid});
        p.ranges.push_back({{t0, t0 + static_cast<uint64_t>(launches) * 40'000}, t.strings.intern("forward"), p.pid});
        for (int k = 0; k < launches; ++k, t0 += 40'000) {
            p.calls.push_back({{t0, t0 + 5000}, t.strings.intern("cudaLaunchKernel"), {}, {}, 0, p.pid, ++corr});
            p.gpu.push_back({{t0 + 8000, t0 + 18'000}, t.strings.intern("tiny"), {}, 0, corr, GpuKind::Kernel});
        }
        uint64_t end = at + 10 * kMs;
        p.ranges.push_back({{end - 1000, end}, t.strings.intern("Optimizer.step#Adam.step"), p.pid});
    }
    p.gpu.push_back({{at, at + 1000}, t.strings.intern("tiny"), {}, 0, 0, GpuKind::Kernel});
}

} // namespace

TEST_CASE("launch-bound from the CPU's launch pace; against the DataLoader's wait, the larger time decides") {
    SECTION("kernels shorter than the interval to the next launch: launch_overhead") {
        TraceData t;
        add_launch_steps(t, process(t, 20, 0), 3); // DataLoader 30%, Runtime and CPU Exec about 40%
        const ProcessAnalysis p = judged(t).processes.at(0);
        CHECK(p.launches_per_step == Approx(100));
        CHECK(p.median_launch_interval_us == Approx(40));
        CHECK(p.kernels_shorter_than_launch == Approx(1.0));
        CHECK(share(p, kDataLoader) >= 0.25);
        CHECK(p.verdict == "launch_overhead");
        CHECK(p.evidence.find("launch interval 40.0 µs") != std::string::npos);
        CHECK(report_json(judged(t))["ranks"][0]["median_launch_interval_us"] == Approx(40));
        CHECK(format_report(judged(t)).find("median interval to the thread's next launch 40.0 µs") != std::string::npos);
    }
    SECTION("a longer wait for batches than the time issuing work: data_loading") {
        TraceData t;
        add_launch_steps(t, process(t, 20, 0), 5.5); // DataLoader 55%, Runtime and CPU Exec about 40%
        const ProcessAnalysis p = judged(t).processes.at(0);
        CHECK(p.kernels_shorter_than_launch == Approx(1.0));
        CHECK(p.verdict == "data_loading");
    }
    SECTION("few launches: not launch-bound") {
        TraceData t;
        add_launch_steps(t, process(t, 20, 0), 0, 20);
        CHECK(judged(t).processes.at(0).verdict != "launch_overhead");
    }
}

TEST_CASE("the rank that waits least bounds the job; a slow rank makes the job a straggler's") {
    SECTION("the others wait for the rank that waits least") {
        TraceData t;
        add_steps(t, process(t, 20, 0), {.loader = 3, .kernel = 1}); // 60% blocked (Other): waits for rank 1
        add_steps(t, process(t, 21, 1), {.loader = 8, .kernel = 1}); // waits for its batches
        JobReport r = judged(t);
        CHECK(r.processes[0].verdict == "mixed");
        CHECK(r.processes[1].verdict == "data_loading");
        CHECK(r.verdict.verdict == "data_loading");
        CHECK(r.verdict.evidence.starts_with("rank 1 waits least for the others (10% of its step in Other, Blocked and Communication)"));
        CHECK(r.verdict.causes == r.processes[1].causes);
    }
    SECTION("and when that rank has no dominant cause, neither has the job") {
        TraceData t;
        add_steps(t, process(t, 20, 0), {.loader = 5.5, .kernel = 2}); // data_loading, 25% Other
        add_steps(t, process(t, 21, 1), {.loader = 3, .kernel = 2, .cpu = 3}); // mixed, 20% Other
        JobReport r = judged(t);
        CHECK(r.processes[0].verdict == "data_loading");
        CHECK(r.processes[1].verdict == "mixed");
        CHECK(r.verdict.verdict == "mixed");
        CHECK(r.verdict.leading == "data_loading");
        CHECK(r.verdict.causes.front().second == Approx(share(r.processes[1], kDataLoader)).margin(0.01));
    }
    SECTION("processes without ranks: the most common verdict") {
        TraceData t;
        add_steps(t, process(t, 30, std::nullopt), {.kernel = 2, .cpu = 3}); // mixed
        add_steps(t, process(t, 31, std::nullopt), {.kernel = 8});
        add_steps(t, process(t, 32, std::nullopt), {.kernel = 7});
        JobReport r = judged(t);
        CHECK(r.verdict.verdict == "gpu");
        CHECK(r.verdict.evidence.starts_with("the verdict of 2 of 3 processes, e.g. pid 31 (python3 train.py)"));
    }
    SECTION("straggler") {
        TraceData t;
        add_steps(t, process(t, 20, 0), {.kernel = 2});
        add_steps(t, process(t, 21, 1), {.kernel = 2}, 6, 3.0);
        JobReport r = judged(t);
        REQUIRE(r.verdict.straggler);
        CHECK(r.verdict.verdict == "straggler");
        CHECK(r.verdict.straggler->rank == 1);
        CHECK(r.processes[0].verdict == "straggler");
        CHECK(r.processes[0].evidence.starts_with("waits for rank 1"));
    }
}

TEST_CASE("every time counts from the capture's start") {
    TraceData t;
    ProcessData& p = process(t, 30, std::nullopt);
    add_steps(t, p, {.kernel = 8});
    // Memory allocated before the capture began (stamped earlier) is the value at 0.
    p.memory = {{kCaptureStart - 2000 * kMs, 0, 64 << 20}, {kCaptureStart - 200 * kMs, 0, 256 << 20}, {kCaptureStart - 100 * kMs, 0, 128 << 20},
                {kCaptureStart + 30 * kMs, 0, 192 << 20}};
    JobReport r = judged(t);
    const ProcessAnalysis& a = r.processes.at(0);
    CHECK(a.origin_ns == kCaptureStart);
    REQUIRE(a.memory.points.size() == 2);
    CHECK(a.memory.points[0] == std::pair<double, uint64_t>{0.0, 128 << 20});
    CHECK(a.memory.points[1] == std::pair<double, uint64_t>{30.0, 192 << 20});
    CHECK(a.memory.peak_bytes == 192 << 20);
    CHECK(a.memory.peak_ms == 30.0);
    auto j = report_json(r)["ranks"][0];
    CHECK(j["clock_origin_ns"] == kCaptureStart);
    CHECK(j["per_step"][0]["start_ms"] == Approx(15.0)); // the first step ends the first Optimizer.step
    for (const auto& s : j["per_step"]) CHECK(s["start_ms"].get<double>() >= 0);
}

TEST_CASE("a dense memory curve is thinned to its envelope: every low and high survives, and the peak") {
    std::vector<MemoryPoint> memory;
    for (uint64_t i = 0; i < 100'000; ++i) memory.push_back({kCaptureStart + i * 1000, 0, i % 2 ? 256u << 20 : 0u});
    memory[77'777].allocated_bytes = 512 << 20;
    MemoryCurve c = memory_curve(memory, kCaptureStart);
    CHECK(c.points.size() <= 2 * kMaxMemoryBuckets + 1);
    CHECK(c.peak_bytes == 512u << 20);
    CHECK(c.peak_ms == Approx(77.777));
    CHECK(std::count_if(c.points.begin(), c.points.end(), [](auto& p) { return p.second == 0; }) >= static_cast<long>(kMaxMemoryBuckets) - 1);
    CHECK(std::count_if(c.points.begin(), c.points.end(), [](auto& p) { return p.second == 256u << 20; }) >= static_cast<long>(kMaxMemoryBuckets) - 2);
    CHECK(std::any_of(c.points.begin(), c.points.end(), [](auto& p) { return p.second == 512u << 20; }));
    CHECK(std::is_sorted(c.points.begin(), c.points.end(), [](auto& a, auto& b) { return a.first < b.first; }));
    CHECK(c.points.back().first == Approx(99.999)); // where the capture left it
}

TEST_CASE("the memory the agent found at attach starts the curve at 0 ms, and the peak counts it") {
    // Read 300 ms into the capture (the agent's start): 256 MiB in use; then 64 MiB more and back.
    std::vector<MemoryPoint> memory = {{kCaptureStart + 300 * kMs, 0, 256u << 20, true},
                                       {kCaptureStart + 400 * kMs, 0, 320u << 20},
                                       {kCaptureStart + 401 * kMs, 0, 256u << 20}};
    MemoryCurve c = memory_curve(memory, kCaptureStart);
    REQUIRE(c.points.size() == 3);
    CHECK(c.points[0] == std::pair<double, uint64_t>{0.0, 256u << 20});
    CHECK(c.peak_bytes == 320u << 20);
    CHECK(c.peak_ms == Approx(400));
    CHECK(c.at_attach_bytes == std::optional<uint64_t>{256u << 20});
    // Without the mark the first change is drawn where it happened, and nothing is said at attach.
    memory[0].at_attach = false;
    c = memory_curve(memory, kCaptureStart);
    CHECK(c.points[0].first == Approx(300));
    CHECK(!c.at_attach_bytes);
}

TEST_CASE("the terminal report shows launch statistics, copy bandwidth and top kernels") {
    TraceData t;
    add_steps(t, process(t, 20, 0), {.copy = 2, .kernel = 6});
    std::string text = format_report(judged(t));
    CHECK(text.find("launches: 1.0 per step") != std::string::npos);
    CHECK(text.find("copies: HtoD ") != std::string::npos);
    CHECK(text.find("top kernels") != std::string::npos);
    CHECK(text.find("ms  gemm") != std::string::npos);
}

TEST_CASE("the report's JSON text survives bytes that are not UTF-8 (a traced process's command line)") {
    nlohmann::json summary = {{"label", std::string("rank 0 \xff\xfe python")}};
    std::string text;
    REQUIRE_NOTHROW(text = report_json_text(summary));
    CHECK(text.find("\xef\xbf\xbd") != std::string::npos); // U+FFFD
    CHECK(nlohmann::json::parse(text)["label"].get<std::string>().starts_with("rank 0 "));
}

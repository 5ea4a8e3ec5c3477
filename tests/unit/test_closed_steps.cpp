// A live analysis past its memory bound closes the steps that are over and lets their spans go
// (analyze/closed_steps.h): its report must be the report of the same events kept whole — the
// same JSON, to the last bit — for steps found by step-marker ranges and by a synchronizing call
// site, with launches, kernels (their launch in an earlier part, one running 1.5 s), copies, c10d
// collectives and their waits, NCCL calls (one in a group on another thread) and their kernels, off-CPU time, a DataLoader range before any step, and sampled frames, one of them
// open all along; and beside them a process that is not
// reported, whose spans go too.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>

#include "analyze/job_report.h"
#include "analyze/live_trace.h"
#include "analyze/report_json.h"
#include "decode/off_cpu.h"
#include "format/nccl_names.h"

using namespace gtrace;

namespace closed_steps_test { // not anonymous: the unit tests build in unity batches

constexpr uint64_t kUs = 1000, kMs = 1000 * kUs, kS = 1000 * kMs;
constexpr uint64_t kStep = 10 * kMs;
constexpr size_t kSteps = 4000; // 40 s: many times the second behind which steps close

struct Delivery {
    uint64_t at;  // when the capture hands it over: a CPU event at its end, GPU records in batches
    size_t order; // ties: as made
    std::function<void(EventConsumer&)> feed;
};

class Job {
public:
    void add(uint64_t at, std::function<void(EventConsumer&)> feed) { deliveries_.push_back({at, deliveries_.size(), std::move(feed)}); }
    void call(uint32_t pid, uint32_t tid, gt_cuda_api api, uint64_t start, uint64_t end, uint32_t correlation = 0) {
        ApiCall c;
        c.api = api, c.pid = pid, c.tid = tid, c.start_ns = start, c.end_ns = end, c.correlation = correlation;
        add(end, [c](EventConsumer& e) { e.call(c); });
    }
    bool gpu_records = true; // the GPU agent on
    // `late_by`: delivered that much after the flush that should have brought it.
    void gpu(uint32_t pid, GpuOpKind kind, std::string name, uint64_t start, uint64_t end, uint32_t correlation, uint64_t bytes = 0,
             uint64_t late_by = 0) {
        if (!gpu_records) return;
        GpuOp op;
        op.kind = kind, op.pid = pid, op.name = std::move(name), op.start_ns = start, op.end_ns = end, op.correlation = correlation;
        op.bytes = bytes, op.copy_kind = kind == GpuOpKind::Memcpy ? "HtoD" : "";
        add((end / (100 * kMs) + 1) * 100 * kMs + late_by, [op](EventConsumer& e) { e.gpu_op(op); }); // flushed every 100 ms
    }
    void range(uint32_t pid, std::string name, uint64_t start, uint64_t end, bool off_cpu = false) {
        TorchRange r;
        r.pid = pid, r.tid = pid, r.name = std::move(name), r.start_ns = start, r.end_ns = end, r.off_cpu = off_cpu;
        add(end, [r](EventConsumer& e) { e.torch_range(r); });
    }
    // `end_late_by`: its end delivered that much later (the thread went unsampled).
    void frame(uint32_t pid, size_t depth, std::string qualname, uint64_t start, uint64_t end, uint64_t end_late_by = 0) {
        SampleFrame f;
        f.pid = pid, f.tid = pid, f.depth = depth, f.frame.qualname = std::move(qualname), f.frame.filename = "train.py", f.frame.line = 7;
        add(start, [f, start](EventConsumer& e) { e.sample_frame_begin(f, start); });
        add(end + end_late_by, [pid, depth, end](EventConsumer& e) { e.sample_frame_end(pid, pid, depth, end); });
    }
    void collective(uint32_t pid, uint64_t start, uint64_t end, uint64_t issued = 0) {
        Collective c;
        c.pid = pid, c.tid = pid, c.start_ns = start, c.end_ns = end, c.name = "all_reduce", c.wait = issued != 0, c.issued_ns = issued;
        add(end, [c](EventConsumer& e) { e.collective(c); });
    }
    void nccl(uint32_t pid, uint32_t tid, unsigned api, uint64_t start, uint64_t end, unsigned depth = 0, uint64_t bytes = 0, uint32_t nranks = 0) {
        Collective c;
        c.pid = pid, c.tid = tid, c.start_ns = start, c.end_ns = end, c.name = nccl_api_symbol(api), c.group = 0xc0;
        c.nccl = NcclArgs{};
        c.nccl->api = api, c.nccl->bytes = bytes, c.nccl->group_depth = depth, c.nccl->nranks = nranks;
        add(end, [c](EventConsumer& e) { e.collective(c); });
    }
    void feed(EventConsumer& e) {
        std::sort(deliveries_.begin(), deliveries_.end(), [](const Delivery& a, const Delivery& b) { return std::tie(a.at, a.order) < std::tie(b.at, b.order); });
        for (const auto& d : deliveries_) d.feed(e);
    }

private:
    std::vector<Delivery> deliveries_;
};

// A training loop's steps: `with_ranges` ends them with Optimizer.step ranges, else only the
// cudaStreamSynchronize at each step's end marks them.
void training(Job& job, uint32_t pid, bool with_ranges, uint32_t& correlation) {
    const uint64_t t0 = 1 * kS;
    job.frame(pid, 0, "main", t0 - kMs, t0 + kSteps * kStep + kMs); // open all along
    for (size_t i = 0; i < kSteps; ++i) {
        const uint64_t t = t0 + i * kStep;
        job.frame(pid, 1, "forward", t + 100 * kUs, t + 400 * kUs);
        for (uint64_t k = 0; k < 20; ++k) { // launches 10 µs apart; kernels queue behind them
            uint64_t at = t + 50 * kUs + k * 10 * kUs + (i % 7) * kUs;
            job.call(pid, pid, GT_API_CUDA_LAUNCH_KERNEL, at, at + 3 * kUs + k % 4 * kUs, ++correlation);
            uint64_t start = at + 5 * kUs + k * (i % 3) * kUs;
            job.gpu(pid, GpuOpKind::Kernel, k % 3 ? "gemm_kernel" : "elementwise_kernel", start, start + 4 * kUs + (i * k) % 9 * kUs, correlation);
        }
        job.call(pid, pid + 1, GT_API_CUDA_LAUNCH_KERNEL, t + 300 * kUs, t + 304 * kUs, ++correlation); // another thread's
        job.gpu(pid, GpuOpKind::Kernel, "side_kernel", t + 9900 * kUs, t + 10100 * kUs, correlation); // across the step's end
        job.call(pid, pid, GT_API_CUDA_MEMCPY_ASYNC, t + 500 * kUs, t + 510 * kUs, ++correlation);
        job.gpu(pid, GpuOpKind::Memcpy, "Memcpy HtoD (Pageable -> Device)", t + 520 * kUs, t + 600 * kUs, correlation, 1 << 20);
        job.collective(pid, t + 610 * kUs, t + 650 * kUs);
        job.collective(pid, t + 660 * kUs, t + 680 * kUs, t + 610 * kUs); // the wait on its Work
        job.nccl(pid, pid, GT_NCCL_ALL_REDUCE, t + 615 * kUs, t + 645 * kUs, 0, 4 << 20);
        job.call(pid, pid, GT_API_CUDA_LAUNCH_KERNEL, t + 620 * kUs, t + 625 * kUs, ++correlation);
        job.gpu(pid, GpuOpKind::Kernel, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", t + 630 * kUs, t + 690 * kUs, correlation);
        job.range(pid, off_cpu_slice_name(i % 2 ? "a lock" : "a queue"), t + 700 * kUs, t + 800 * kUs, true);
        job.call(pid, pid, GT_API_CUDA_STREAM_SYNCHRONIZE, t + 850 * kUs, t + 9 * kMs + (i % 5) * 100 * kUs);
        if (with_ranges) job.range(pid, "Optimizer.step#SGD.step", t + 9 * kMs + 600 * kUs, t + kStep);
        job.call(pid, pid + 1, GT_API_CUDA_LAUNCH_KERNEL, t + kStep, t + kStep, ++correlation); // no length, at the step's end
        job.gpu(pid, GpuOpKind::Kernel, "empty_kernel", t + kStep + 2 * kUs, t + kStep + 3 * kUs, correlation);
        if (i % 500 == 7) { // a kernel running 1.5 s: its record comes at its end, long after the steps it is in
            job.call(pid, pid, GT_API_CUDA_LAUNCH_KERNEL, t + 20 * kUs, t + 22 * kUs, ++correlation);
            job.gpu(pid, GpuOpKind::Kernel, "long_kernel", t + 30 * kUs, t + 1500 * kMs, correlation);
        }
        // A group of a send and a receive on another thread, its kernel launched in its end.
        job.nccl(pid, pid + 2, GT_NCCL_GROUP_START, t + 2000 * kUs, t + 2001 * kUs);
        job.nccl(pid, pid + 2, GT_NCCL_SEND, t + 2010 * kUs, t + 2012 * kUs, 1, 1 << 20);
        job.nccl(pid, pid + 2, GT_NCCL_RECV, t + 2020 * kUs, t + 2022 * kUs, 1, 1 << 20);
        job.nccl(pid, pid + 2, GT_NCCL_GROUP_END, t + 2050 * kUs, t + 2080 * kUs);
        job.call(pid, pid + 2, GT_API_CUDA_LAUNCH_KERNEL, t + 2060 * kUs, t + 2065 * kUs, ++correlation);
        job.gpu(pid, GpuOpKind::Kernel, "ncclDevKernel_SendRecv", t + 2070 * kUs, t + 2400 * kUs, correlation);
        if (i == 0) job.nccl(pid, pid, GT_NCCL_COMM_INIT_RANK, t - 5 * kMs, t - 4 * kMs, 0, 0, 2);
        if (i == 0) job.range(pid, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t - 2 * kMs, t - kMs); // before any step
    }
}

// A process without CUDA work (torchrun's agent): sampled frames only, the first of them before
// any other event (the capture's start).
void launcher_samples(Job& job, uint32_t pid) {
    for (uint64_t t = 500 * kMs; t < 1 * kS + kSteps * kStep; t += kMs / 2) job.frame(pid, 0, "_invoke_run", t, t + kMs / 4);
}

std::string report_of(TraceData t) {
    JobReport r = analyze_capture(t, "trace.json", AnalysisOptions{});
    return report_json(r).dump(2);
}

} // namespace closed_steps_test

TEST_CASE("steps closed past the bound give the report of the whole trace, to the last bit", "[live_trace]") {
    using namespace closed_steps_test;
    const bool gpu_agent = GENERATE(true, false); // closing behind the GPU records, or without any (behind the newest event only)
    Job job;
    job.gpu_records = gpu_agent;
    uint32_t correlation = 0;
    training(job, 7, true, correlation);
    training(job, 9, false, correlation);
    launcher_samples(job, 11);
    // Marker ranges and nothing else (no rank, no CUDA work): not reported, closed or not.
    for (size_t i = 0; i < kSteps; ++i) job.range(13, "Optimizer.step#SGD.step", 1 * kS + i * kStep, 1 * kS + i * kStep + kMs);
    LiveTrace whole(LiveTraceOptions{1ull << 40, {}, kDefaultStepMarker, gpu_agent});
    LiveTrace bounded(LiveTraceOptions{12 << 20, {}, kDefaultStepMarker, gpu_agent});
    job.feed(whole);
    job.feed(bounded);
    CHECK(bounded.held_bytes() < 24 << 20);
    CHECK(whole.held_bytes() > (gpu_agent ? 40 : 25) << 20);
    CHECK(bounded.steps_closed() > 6000);
    CHECK(bounded.late_spans() == 0);
    TraceData closed = bounded.take(nlohmann::json::object());
    CHECK_FALSE(closed.spans_from_ns);
    // What closed steps' collectives became: sums and one record per c10d call, not their spans
    // (16,000 of them per process, NCCL's included).
    CHECK(closed.processes.at(7).collectives.size() < 2000);
    CHECK(closed.processes.at(7).closed->collectives.instances.size() > 3000);
    const std::string a = report_of(whole.take(nlohmann::json::object())), b = report_of(std::move(closed));
    REQUIRE(a.find("\"steps\": 3999") != std::string::npos); // pid 7: between 4000 ranges' ends
    REQUIRE(a.find("steps end at cudaStreamSynchronize at ?") != std::string::npos); // pid 9
    CHECK(a.find("pid 13") == std::string::npos);
    CHECK(a == b);
    if (const char* dir = getenv("GTRACE_TEST_DUMP_DIR")) std::ofstream(std::string(dir) + (gpu_agent ? "/whole-gpu.json" : "/whole.json")) << a;
    if (a != b) { // the first line that differs
        size_t at = static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
        size_t from = a.rfind('\n', at);
        if (const char* dir = getenv("GTRACE_TEST_DUMP_DIR")) { // both, for a diff
            std::ofstream(std::string(dir) + "/whole.json") << a;
            std::ofstream(std::string(dir) + "/closed.json") << b;
        }
        FAIL("whole: " << a.substr(from, 200) << "\nclosed: " << b.substr(from, 200));
    }
}

// What comes in after its step closed is not in the report, and says so: a sampled frame whose
// end comes late (its thread went unsampled) and the record of a kernel launched by no call seen
// (nothing awaits it) that comes late are counted, and the report's notes name them.
TEST_CASE("spans that come after their step closed are counted and named", "[live_trace]") {
    using namespace closed_steps_test;
    constexpr uint32_t pid = 21;
    // Held to 4 MiB (the string pool's first block takes 1), the steps first close at about step
    // 9,000 (90 s; spans are counted by their vectors' capacity): the late spans of step 1,000
    // come 100 s later, after that.
    constexpr size_t steps = 12000, late_step = 1000;
    constexpr uint64_t late_by = 100 * kS;
    Job job;
    uint32_t correlation = 0;
    const uint64_t t0 = 1 * kS;
    job.frame(pid, 0, "main", t0 - kMs, t0 + steps * kStep + kMs); // open all along
    for (size_t i = 0; i < steps; ++i) {
        const uint64_t t = t0 + i * kStep;
        job.call(pid, pid, GT_API_CUDA_LAUNCH_KERNEL, t + 100 * kUs, t + 105 * kUs, ++correlation);
        job.gpu(pid, GpuOpKind::Kernel, "gemm_kernel", t + 110 * kUs, t + 900 * kUs, correlation);
        job.call(pid, pid, GT_API_CUDA_STREAM_SYNCHRONIZE, t + 200 * kUs, t + 950 * kUs);
        job.range(pid, "Optimizer.step#SGD.step", t + 9 * kMs, t + kStep);
        if (i != late_step) continue;
        job.frame(pid, 1, "load_batch", t + 1 * kMs, t + 2 * kMs, late_by);
        job.gpu(pid, GpuOpKind::Kernel, "unprobed_kernel", t + 3 * kMs, t + 4 * kMs, 0, 0, late_by);
    }
    LiveTrace bounded(LiveTraceOptions{4 << 20, {}, kDefaultStepMarker, true});
    job.feed(bounded);
    CHECK(bounded.steps_closed() > 5000);
    CHECK(bounded.late_spans() == 2);
    TraceData closed = bounded.take(nlohmann::json::object());
    CHECK_FALSE(closed.spans_from_ns);
    const std::string report = report_of(std::move(closed));
    CHECK(report.find("2 span(s) came in after the step they start in had closed") != std::string::npos);
}

TEST_CASE("GPU records lost all along do not hold the steps open", "[live_trace]") {
    using namespace closed_steps_test;
    // A host short of CPU: the agent's ring fills and a tenth of the launches never get their
    // record. Each such launch would hold closing back 10 s (kGiveUpOnGpuNs): ten seconds of spans
    // take more than the bound, and the analysis would keep only the recent window.
    constexpr uint32_t pid = 31;
    constexpr size_t steps = 3000, launches = 100;
    auto job_of = [&](bool told) {
        Job job;
        uint32_t correlation = 0;
        const uint64_t t0 = 1 * kS;
        for (size_t i = 0; i < steps; ++i) {
            const uint64_t t = t0 + i * kStep;
            for (size_t k = 0; k < launches; ++k) {
                uint64_t at = t + 50 * kUs + k * 50 * kUs;
                job.call(pid, pid, GT_API_CUDA_LAUNCH_KERNEL, at, at + 3 * kUs, ++correlation);
                if (k % 10 != 3) job.gpu(pid, GpuOpKind::Kernel, "gemm_kernel", at + 5 * kUs, at + 20 * kUs, correlation);
            }
            job.call(pid, pid, GT_API_CUDA_STREAM_SYNCHRONIZE, t + 5100 * kUs, t + 5200 * kUs);
            job.range(pid, "Optimizer.step#SGD.step", t + 9 * kMs, t + kStep);
            if (told && i % 10 == 0) // the drain after the ring's counter rose (records come every 100 ms)
                job.add((t / (100 * kMs) + 1) * 100 * kMs + 1, [p = pid](EventConsumer& e) { e.gpu_records_lost(p); });
        }
        return job;
    };
    LiveTrace whole(LiveTraceOptions{1ull << 40, {}, kDefaultStepMarker, true});
    job_of(false).feed(whole);
    const std::string want = report_of(whole.take(nlohmann::json::object()));

    LiveTrace untold(LiveTraceOptions{6 << 20, {}, kDefaultStepMarker, true});
    job_of(false).feed(untold);
    CHECK(untold.take(nlohmann::json::object()).spans_from_ns); // the failure this guards against

    LiveTrace told(LiveTraceOptions{6 << 20, {}, kDefaultStepMarker, true});
    job_of(true).feed(told);
    CHECK(told.steps_closed() > 1000);
    CHECK(told.late_spans() == 0);
    TraceData closed = told.take(nlohmann::json::object());
    CHECK_FALSE(closed.spans_from_ns);
    CHECK(report_of(std::move(closed)) == want);
}

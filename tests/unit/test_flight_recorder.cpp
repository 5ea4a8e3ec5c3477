// The flight recorder: a window holding the whole job replays to the trace the capture's writer
// writes; a later window starts whole (frames open at its start, memory counters at their
// value, no flow to a call outside it); the memory bound holds; dump names.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "analyze/trace_data.h"
#include "output/flight_recorder.h"
#include "temp_dir.h"
#include "trace_job.h"

using namespace gtrace;
using namespace gtrace::test_job;

namespace {

constexpr uint64_t kSecond = 1'000'000'000;

// Every event it is handed, as a line of text.
struct Recording final : NullWriter {
    std::vector<std::string> lines;
    void call(const ApiCall& c) override { lines.push_back(fmt::format("call {} {}-{} {}", c.tid, c.start_ns, c.end_ns, c.kernel)); }
    void torch_range(const TorchRange& r) override { lines.push_back(fmt::format("range {} {}-{}", r.name, r.start_ns, r.end_ns)); }
    void gpu_op(const GpuOp& op) override { lines.push_back(fmt::format("op {} {}-{}", op.name, op.start_ns, op.end_ns)); }
    void flow(const CallRef& c, const GpuOp& op) override { lines.push_back(fmt::format("flow {} {}", c.start_ns, op.start_ns)); }
    void memory(const MemorySample& m) override { lines.push_back(fmt::format("memory {} {}", m.ts_ns, m.allocated_bytes)); }
    void sample_frame_begin(const SampleFrame& f, uint64_t ts) override {
        lines.push_back(fmt::format("begin {} {} {}", f.depth, f.frame.qualname, ts));
    }
    void sample_frame_end(uint32_t, uint32_t, size_t depth, uint64_t ts) override { lines.push_back(fmt::format("end {} {}", depth, ts)); }
};

ApiCall call_at(uint64_t start_ns, uint64_t end_ns, const std::string& kernel = "k") {
    ApiCall c;
    c.api = GT_API_CUDA_LAUNCH_KERNEL, c.pid = kPid, c.tid = kPid, c.start_ns = start_ns, c.end_ns = end_ns;
    c.kernel = kernel, c.thread_name = "python3", c.correlation = static_cast<uint32_t>(start_ns / kSecond);
    c.launch = LaunchArgs{false, 0x1000, {2, 1, 1}, {128, 1, 1}, 0};
    c.stream = 7, c.stack = stack(3);
    return c;
}

GpuOp op_at(uint64_t start_ns, uint64_t end_ns) {
    GpuOp op;
    op.pid = kPid, op.start_ns = start_ns, op.end_ns = end_ns, op.name = "k", op.correlation = static_cast<uint32_t>(start_ns / kSecond);
    return op;
}

SampleFrame frame(size_t depth, const std::string& name) {
    SampleFrame f;
    f.pid = kPid, f.tid = kPid, f.thread = "python3", f.depth = depth, f.frame = {name, "/home/u/train.py", 10};
    return f;
}

} // namespace

TEST_CASE("a flight window that holds the whole job replays to what the capture's writer writes, in every format") {
    TempDir dir("unit-flight");
    for (TraceFormat format : {TraceFormat::Json, TraceFormat::Pftrace}) {
        std::string ext = format == TraceFormat::Json ? ".json" : ".pftrace";
        TraceModel model = model_with_ranks();
        auto direct = create_trace_writer({format, dir.at("direct" + ext)}, false, model);
        REQUIRE(direct);
        write_job(**direct, model);
        REQUIRE((*direct)->finish(model, {{"tool", "gtrace"}}));

        TraceModel flight_model = model_with_ranks();
        FlightRecorder recorder({format, dir.at("flight" + ext)}, false, {3600 * kSecond, 2 * kSecond, 64ull << 20});
        write_job(recorder, flight_model);
        recorder.advance(kT0 + kSecond);
        REQUIRE(recorder.stats().evicted_by_age == 0);
        auto cut = recorder.finish(flight_model, {{"tool", "gtrace"}});
        REQUIRE(cut);
        CHECK(recorder.output() == dir.at("flight-1" + ext));

        auto a = load_trace(dir.at("direct" + ext)), b = load_trace(recorder.output());
        REQUIRE(a);
        REQUIRE(b);
        INFO(ext);
        CHECK(b->processes.at(kPid).calls.size() == 28);
        CHECK(describe(b->processes.at(kPid)) == describe(a->processes.at(kPid)));
        CHECK(describe(b->processes.at(kWorker)) == describe(a->processes.at(kWorker)));
    }
}

TEST_CASE("a later flight window starts whole: open frames begin at its start, counters keep their value, flows need both ends") {
    FlightRecorder recorder({TraceFormat::Json, "unused.json"}, false, {10 * kSecond, 2 * kSecond, 64ull << 20});
    recorder.sample_frame_begin(frame(0, "main"), 1 * kSecond);         // open all along
    recorder.sample_frame_begin(frame(1, "old"), 1 * kSecond);          // closed before the window
    recorder.memory({kPid, 0, 2 * kSecond, 1000});                      // the counter's value at the window's start
    recorder.sample_frame_end(kPid, kPid, 1, 3 * kSecond);
    recorder.call(call_at(5 * kSecond, 5 * kSecond + 100));              // evicted by age
    for (uint64_t s = 10; s <= 30; ++s) recorder.call(call_at(s * kSecond, s * kSecond + 100, fmt::format("k{}", s)));
    // A call before the window whose GPU op ran into it: the op is in, its flow is not.
    recorder.gpu_op(op_at(21 * kSecond, 23 * kSecond));
    recorder.flow({kPid, kPid, 21 * kSecond, 21 * kSecond + 100, GT_API_CUDA_LAUNCH_KERNEL, false}, op_at(21 * kSecond, 23 * kSecond));
    recorder.flow({kPid, kPid, 25 * kSecond, 25 * kSecond + 100, GT_API_CUDA_LAUNCH_KERNEL, false}, op_at(26 * kSecond, 27 * kSecond));
    recorder.sample_frame_begin(frame(1, "step"), 24 * kSecond);         // still open at the end
    recorder.torch_range({kPid, kPid, 15 * kSecond, 23 * kSecond, "Optimizer.step", {}}); // began before, ends inside

    recorder.advance(32 * kSecond); // keeps 20 s..32 s (window + grace)
    FlightStats stats = recorder.stats();
    CHECK(stats.evicted_by_age > 0);
    CHECK(stats.evicted_by_memory == 0);

    Recording out;
    FlightWindow w = recorder.window_from(22 * kSecond);
    CHECK(w.from_ns == 22 * kSecond);
    replay_window(w, 32 * kSecond, out);
    std::vector<std::string> want = {
        "begin 0 main 22000000000", "memory 22000000000 1000",
    };
    for (uint64_t s = 22; s <= 30; ++s) want.push_back(fmt::format("call {} {}-{} k{}", kPid, s * kSecond, s * kSecond + 100, s));
    want.push_back("op k 21000000000-23000000000");
    want.push_back("flow 25000000000 26000000000");
    want.push_back("begin 1 step 24000000000");
    want.push_back("range Optimizer.step 15000000000-23000000000");
    want.push_back("end 1 32000000000");
    want.push_back("end 0 32000000000");
    CHECK(out.lines == want);
}

TEST_CASE("the flight recorder stays under its memory bound, and a window starts after what it dropped") {
    FlightRecorder recorder({TraceFormat::Json, "unused.json"}, false, {3600 * kSecond, 2 * kSecond, 1ull << 20});
    for (uint64_t i = 0; i < 100'000; ++i) recorder.call(call_at(kSecond + i * 1000, kSecond + i * 1000 + 500, fmt::format("kernel{}", i % 50)));
    FlightStats stats = recorder.stats();
    CHECK(stats.bytes <= (1ull << 20));
    CHECK(stats.evicted_by_memory > 90'000);
    CHECK(stats.stored + stats.evicted_by_memory == 100'000);
    FlightWindow w = recorder.window_from(0);
    CHECK(w.from_ns == stats.evicted_through_ns + 1);
    Recording out;
    CHECK(replay_window(w, 2 * kSecond, out) == stats.stored);
}

TEST_CASE("flight recorder dumps are named OUT-N with OUT's extension") {
    CHECK(flight_dump_path("trace.pftrace", 1) == "trace-1.pftrace");
    CHECK(flight_dump_path("/tmp/run.2/t.json", 12) == "/tmp/run.2/t-12.json");
    CHECK(flight_dump_path("out/job.kineto/", 2) == "out/job-2.kineto/");
    CHECK(flight_dump_path("/a.b/trace", 3) == "/a.b/trace-3");
    CHECK(flight_dump_path(".hidden", 1) == ".hidden-1");
}

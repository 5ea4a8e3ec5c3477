// The rows gtrace's Kineto writer adds for Holistic Trace Analysis (docs/trace_readers.md): a
// cpu_op twin of each torch range, gpu_user_annotation spans of the ranges' GPU work, cuda_sync
// rows from CUPTI's synchronization records, CPU collectives on a lane HTA counts as
// communication, ProfilerStep#N only over the GPU records; flows from the call's start, counters
// with numbers only.
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>

#include "output/kineto_gpu_ranges.h"
#include "output/trace_formats.h"
#include "temp_dir.h"
#include "trace_job.h"

using namespace gtrace;
using namespace gtrace::test_job;

namespace {

nlohmann::json read_json(const std::string& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in);
}

std::vector<nlohmann::json> rows(const nlohmann::json& t, const std::string& cat) {
    std::vector<nlohmann::json> out;
    for (const auto& e : t["traceEvents"])
        if (e.value("cat", "") == cat) out.push_back(e);
    return out;
}

} // namespace

TEST_CASE("Kineto: the synthetic job's ranges, flows and counters as HTA and Perfetto read them") {
    TempDir dir("unit-kineto-rows");
    TraceModel model = model_with_ranks();
    auto w = create_trace_writer({TraceFormat::Kineto, dir.at("t.kineto")}, false, model);
    REQUIRE(w);
    write_job(**w, model);
    REQUIRE((*w)->finish(model, {{"tool", "gtrace"}}));
    nlohmann::json t = read_json(dir.at("t.kineto/rank1.pt.trace.json"));

    auto annotations = rows(t, "user_annotation"), ops = rows(t, "cpu_op");
    size_t ranges = 0;
    for (const auto& a : annotations) {
        if (a["name"].get<std::string>().starts_with("ProfilerStep#")) continue;
        ++ranges;
        bool twin = std::any_of(ops.begin(), ops.end(), [&](const auto& o) {
            return o["name"] == a["name"] && o["ts"] == a["ts"] && o["dur"] == a["dur"] && o["tid"] == a["tid"];
        });
        CHECK(twin);
    }
    CHECK(ranges == 12);

    // Each step's "outer" range holds its launches: one GPU span per step on device 0, stream 7,
    // from its first kernel's start to its copy's end (the launch k == 2 never joined its call).
    auto gpu_ranges = rows(t, "gpu_user_annotation");
    std::vector<nlohmann::json> outer;
    for (const auto& g : gpu_ranges)
        if (g["name"] == "outer") outer.push_back(g);
    REQUIRE(outer.size() == 4);
    for (const auto& g : outer) CHECK((g["pid"] == 0 && g["tid"] == 7 && !g.contains("args")));

    // Flows start at their call's start (Perfetto binds them in timestamp order).
    std::map<std::pair<uint64_t, double>, bool> call_starts;
    for (const auto& c : rows(t, "cuda_runtime")) call_starts[{c["tid"].get<uint64_t>(), c["ts"].get<double>()}] = true;
    size_t flows = 0;
    for (const auto& e : t["traceEvents"]) {
        if (e.value("ph", "") != "s") continue;
        ++flows;
        CHECK(call_starts.contains({e["tid"].get<uint64_t>(), e["ts"].get<double>()}));
    }
    CHECK(flows > 0);

    // Counters: numbers only; the device is in the name.
    for (const auto& e : t["traceEvents"])
        if (e.value("ph", "") == "C")
            for (const auto& arg : e["args"].items()) CHECK((arg.value().is_number() && arg.key() == "allocated_bytes"));
}

TEST_CASE("Kineto: cuda_sync rows, and CPU collectives on a lane once the process's device is known") {
    TempDir dir("unit-kineto-sync");
    TraceModel model = model_with_ranks();
    auto w = create_trace_writer({TraceFormat::Kineto, dir.at("t.kineto")}, false, model);
    REQUIRE(w);
    TraceWriter& k = **w;
    k.collective({kPid, kPid, kT0, kT0 + 500, "barrier", false, "barrier", "gloo", 0}); // before the GPU records: no lane
    k.collective({kPid, kPid, kT0 + 1000, kT0 + 1500, "all_reduce", false, "allreduce", "gloo", 0});
    k.collective({kPid, kPid, kT0 + 1600, kT0 + 1900, "all_reduce (DDP gradients)", true, "allreduce", nullptr, 0});
    GpuOp op;
    op.kind = GpuOpKind::Kernel, op.pid = kPid, op.correlation = 5, op.device = 2, op.context = 1, op.stream = 7;
    op.start_ns = kT0 + 1000, op.end_ns = kT0 + 2000, op.name = "k";
    k.gpu_op(op);
    GpuOp sync = op;
    sync.kind = GpuOpKind::Sync, sync.correlation = 6, sync.sync_type = 3; // stream
    k.gpu_op(sync);
    sync.correlation = 7, sync.sync_type = 4, sync.stream = 0xffffffff; // context
    k.gpu_op(sync);
    sync.correlation = 8, sync.sync_type = 1; // event: needs the record's correlation, not written
    k.gpu_op(sync);
    REQUIRE(k.finish(model, {{"tool", "gtrace"}}));
    nlohmann::json t = read_json(dir.at("t.kineto/rank1.pt.trace.json"));

    auto syncs = rows(t, "cuda_sync");
    REQUIRE(syncs.size() == 2);
    CHECK((syncs[0]["name"] == "Stream Sync" && syncs[0]["args"]["stream"] == 7 && syncs[0]["pid"] == 2 &&
           syncs[0]["args"]["correlation"] == 6));
    CHECK((syncs[1]["name"] == "Context Sync" && syncs[1]["args"]["stream"] == -1 && syncs[1]["args"]["correlation"] == 7));

    // The collectives came before the device was known: their lanes follow its first op, on
    // device 2, from its start on (not the barrier), the one without a backend under its
    // process's (gloo); each lane row shares its correlation with its cpu_op row.
    auto lanes = rows(t, "cpu_collective");
    REQUIRE(lanes.size() == 2);
    CHECK(lanes[0]["name"] == "ncclKernel_gloo:all_reduce (CPU collective)");
    CHECK(lanes[1]["name"] == "ncclKernel_gloo:all_reduce (DDP gradients) (CPU collective)");
    auto collectives = rows(t, "cpu_op");
    REQUIRE(collectives.size() == 3);
    collectives.erase(collectives.begin());
    for (size_t i = 0; i < 2; ++i) {
        CHECK((lanes[i]["pid"] == 2 && lanes[i]["args"]["stream"] == lanes[i]["tid"]));
        CHECK(lanes[i]["args"]["correlation"] == collectives[i]["args"]["correlation"]);
        CHECK(collectives[i]["args"].contains("phase"));
    }
}

TEST_CASE("GpuRangeSpans: a range's GPU span per stream, whichever of the range and its ops came first") {
    std::vector<GpuRangeSpan> out;
    GpuRangeSpans spans([&](const GpuRangeSpan& s) { out.push_back(s); });
    auto op = [&](uint64_t call_start, uint32_t stream, uint64_t start, uint64_t end) {
        GpuOp g;
        g.device = 0, g.stream = stream, g.start_ns = start, g.end_ns = end;
        spans.op(CallRef{1, 1, call_start, call_start + 10, GT_API_CUDA_LAUNCH_KERNEL, false}, g);
    };
    op(100, 7, 1000, 1100);                              // before the range ended
    spans.range({1, 1, 50, 300, "forward", {}, {}});    // ends: takes the op it covers
    op(200, 7, 1200, 1400);                              // after it ended
    op(250, 8, 1300, 1350);                              // another stream
    op(400, 7, 1500, 1600);                              // outside it
    CHECK(out.empty());                                  // not settled yet
    op(300 + GpuRangeSpans::kSettleNs + 1, 7, 5000, 5001); // launches well past its end: settled
    REQUIRE(out.size() == 2);
    CHECK((out[0].stream == 7 && out[0].start_ns == 1000 && out[0].end_ns == 1400 && out[0].name == "forward"));
    CHECK((out[1].stream == 8 && out[1].start_ns == 1300 && out[1].end_ns == 1350));
    spans.range({1, 1, 10, 20, "idle", {}, {}}); // no GPU work: nothing
    spans.flush_all();
    CHECK(out.size() == 2);
}

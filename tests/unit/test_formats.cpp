// The trace formats: one event stream written as Chrome JSON, Perfetto protobuf and Kineto JSON
// reads back into the same analysis data; the JSON writers' arguments are the one vocabulary's
// (output/event_args.h); .pftrace partials cut at any byte and corrupted files
// are read safely; the wire encoder; format choice; the scripted capture's admission filter.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <random>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analyze/pftrace_reader.h"
#include "format/proto_wire.h"
#include "analyze/trace_data.h"
#include "decode/python_stacks.h"
#include "output/admission_filter.h"
#include "output/event_args.h"
#include "format/proto_encoder.h"
#include "output/sample_tracks.h"
#include "output/trace_formats.h"
#include "temp_dir.h"
#include "trace_job.h"

using namespace gtrace;
using namespace gtrace::test_job;

namespace {

struct Loaded {
    std::string path;
    TraceData data;
};

Loaded write_and_load(TraceFormat f, const std::string& path) {
    TraceModel model = model_with_ranks();
    auto w = create_trace_writer({f, path}, false, model);
    REQUIRE(w);
    write_job(**w, model);
    REQUIRE((*w)->finish(model, {{"tool", "gtrace"}, {"gpu", {{"enabled", true}}}}));
    auto t = load_trace(f == TraceFormat::Kineto ? path + "/rank1.pt.trace.json" : path);
    INFO(path);
    REQUIRE(t);
    return {path, std::move(*t)};
}

} // namespace

TEST_CASE("one event stream reads back the same from JSON, Perfetto protobuf and Kineto") {
    TempDir dir("unit-formats");
    Loaded json = write_and_load(TraceFormat::Json, dir.at("t.json"));
    Loaded pf = write_and_load(TraceFormat::Pftrace, dir.at("t.pftrace"));
    Loaded kineto = write_and_load(TraceFormat::Kineto, dir.at("t.kineto"));
    const ProcessData& j = json.data.processes.at(kPid);
    CHECK(j.calls.size() == 28);
    CHECK(j.gpu.size() == 28);
    CHECK(j.ranges.size() == 12);
    CHECK(j.main_samples.size() > 4);
    CHECK(j.memory.size() == 4);
    CHECK(j.rank == 1);
    CHECK(json.data.processes.at(kWorker).forked);
    CHECK(pf.data.has_gpu);
    CHECK(describe(pf.data.processes.at(kPid)) == describe(j));
    CHECK(describe(pf.data.processes.at(kWorker)) == describe(json.data.processes.at(kWorker)));
    CHECK(pf.data.processes.at(kPid).label == j.label);
    // Kineto adds ProfilerStep#N ranges, for the steps the GPU records cover (of the 3 after the
    // first, the last ends after the job's last GPU op: 2); otherwise the same.
    ProcessData k = kineto.data.processes.at(kPid);
    size_t steps = std::erase_if(k.ranges, [](const RangeSpan& r) { return r.name.starts_with("ProfilerStep#"); });
    CHECK(steps == 2);
    CHECK(describe(k) == describe(j));
    CHECK(kineto.data.processes.at(kWorker).forked);
}

TEST_CASE("a .pftrace reads the same when the writer let processes' tracks go mid-capture") {
    // A long capture lets an exited process's tracks go (their interning, descriptors); should
    // an event of it come after all, it gets fresh tracks and reads back the same.
    TempDir dir("unit-forget");
    auto without_samples = [](const ProcessData& p) {
        std::string all = describe(p), out;
        for (size_t at = 0, end; at < all.size(); at = end + 1) {
            end = all.find('\n', at);
            if (end == std::string::npos) end = all.size();
            std::string_view line(all.data() + at, end - at);
            if (!line.starts_with("sample ")) (out += line) += '\n';
        }
        return out;
    };
    Loaded kept = write_and_load(TraceFormat::Pftrace, dir.at("kept.pftrace"));
    TraceModel model = model_with_ranks();
    std::string path = dir.at("forgot.pftrace");
    auto w = create_trace_writer({TraceFormat::Pftrace, path}, false, model);
    REQUIRE(w);
    write_job(**w, model, [&](int step, SampleTracks& samples) {
        if (step != 1) return;
        for (uint32_t pid : {kPid, kWorker}) {
            samples.forget_process(pid);
            (*w)->forget_process(pid);
        }
    });
    REQUIRE((*w)->finish(model, {{"tool", "gtrace"}, {"gpu", {{"enabled", true}}}}));
    auto forgot = load_trace(path);
    REQUIRE(forgot);
    for (uint32_t pid : {kPid, kWorker}) {
        INFO(pid);
        CHECK(without_samples(forgot->processes.at(pid)) == without_samples(kept.data.processes.at(pid)));
        CHECK(forgot->processes.at(pid).label == kept.data.processes.at(pid).label);
    }
    CHECK(forgot->processes.at(kPid).main_samples.size() >= kept.data.processes.at(kPid).main_samples.size());
}

TEST_CASE("a .pftrace partial cut at any byte reads up to its last whole packet") {
    TempDir dir("unit-formats");
    Loaded pf = write_and_load(TraceFormat::Pftrace, dir.at("t.pftrace"));
    std::string bytes = read_file(pf.path);
    auto whole = find_pftrace_end(bytes);
    REQUIRE(whole);
    CHECK(whole->complete);
    CHECK(whole->cut == bytes.size());
    uint64_t last_packets = 0;
    size_t last_calls = 0;
    for (size_t n = 0; n <= bytes.size(); n += (n < 400 ? 1 : 37)) {
        std::string cut = bytes.substr(0, n);
        auto end = find_pftrace_end(cut);
        if (!end) {
            CHECK(n < 200); // only before the header's first packet is whole
            continue;
        }
        CHECK(end->cut <= n);
        CHECK(end->packets >= last_packets);
        last_packets = end->packets;
        CHECK(end->complete == (n == bytes.size()));
        auto t = load_trace(dir.write("p.pftrace.partial", cut));
        REQUIRE(t);
        size_t calls = t->processes.contains(kPid) ? t->processes.at(kPid).calls.size() : 0;
        CHECK(calls >= last_calls);
        last_calls = calls;
        if (n < bytes.size()) CHECK(t->partial_events == end->packets);
    }
    CHECK(last_calls == 28);
}

TEST_CASE("corrupted .pftrace files are refused or read, never read out of bounds") {
    TempDir dir("unit-formats");
    Loaded pf = write_and_load(TraceFormat::Pftrace, dir.at("t.pftrace"));
    std::string bytes = read_file(pf.path);
    std::mt19937 rng(7);
    int refused = 0;
    for (int i = 0; i < 300; ++i) {
        std::string bad = bytes;
        for (int k = 0; k < 1 + i % 4; ++k) bad[rng() % bad.size()] = static_cast<char>(rng());
        auto t = load_trace(dir.write("bad.pftrace", bad));
        if (!t) {
            CHECK(t.error().code == ExitCode::BadTrace);
            ++refused;
        }
    }
    CHECK(refused > 0);
    // A length far past the end, and a varint that never ends.
    std::string huge = bytes.substr(0, 200) + "\x0a\xff\xff\xff\xff\x0f" + "x";
    auto t = load_trace(dir.write("huge.pftrace", huge));
    REQUIRE_FALSE(t);
    CHECK(t.error().code == ExitCode::BadTrace);
    auto endless = load_trace(dir.write("endless.pftrace", bytes.substr(0, 200) + std::string(12, '\xff')));
    REQUIRE_FALSE(endless);
    // Not gtrace's: a Perfetto trace without gtrace's header.
    std::string other;
    proto::Encoder e(other);
    e.begin(1);
    e.varint(10, 1);
    e.end();
    auto foreign = load_trace(dir.write("other.pftrace", other));
    REQUIRE_FALSE(foreign);
    CHECK(foreign.error().message.find("was not written by gtrace") != std::string::npos);
}

TEST_CASE("the wire encoder writes nested lengths in their shortest form") {
    std::string out;
    proto::Encoder e(out);
    e.begin(1);
    e.bytes(2, std::string(300, 'a')); // the outer length needs two bytes
    e.begin(3);
    e.varint(4, 150);
    e.end();
    e.fixed64(5, 0x1122334455667788ull);
    e.int64(6, -2);
    e.end();
    proto::WireReader r(out);
    uint32_t field, type;
    REQUIRE(r.next(field, type));
    CHECK(field == 1);
    std::string_view body = r.bytes();
    CHECK(r.done());
    CHECK(out.size() == 1 + 2 + body.size());
    proto::WireReader b(body);
    REQUIRE(b.next(field, type));
    CHECK(b.bytes().size() == 300);
    REQUIRE(b.next(field, type));
    proto::WireReader inner(b.bytes());
    REQUIRE(inner.next(field, type));
    CHECK(inner.varint() == 150);
    REQUIRE(b.next(field, type));
    CHECK(b.fixed64() == 0x1122334455667788ull);
    REQUIRE(b.next(field, type));
    CHECK(static_cast<int64_t>(b.varint()) == -2);
    CHECK_FALSE(b.next(field, type));
    CHECK_FALSE(b.failed());
}

TEST_CASE("a Kineto trace of torch.profiler's own is read: its GPU rows belong to the rank") {
    TempDir dir("unit-formats");
    std::string trace = R"J({"schemaVersion": 1, "deviceProperties": [{"id": 0}], "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 4},
"traceEvents": [
{"ph":"X","cat":"user_annotation","name":"ProfilerStep#7","pid":77,"tid":77,"ts":100.0,"dur":50.0},
{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":77,"tid":77,"ts":110.0,"dur":5.0,"args":{"correlation":9,"External id":3}},
{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":120.0,"dur":10.0,"args":{"correlation":9,"stream":7,"device":0}},
{"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD (Pageable -> Device)","pid":0,"tid":7,"ts":131.0,"dur":2.0,"args":{"correlation":10,"bytes":64}}
],
"baseTimeNanoseconds": 1700000000000000000})J";
    auto t = load_trace(dir.write("torch.pt.trace.json", trace));
    REQUIRE(t);
    REQUIRE(t->processes.size() == 1);
    const ProcessData& p = t->processes.at(77);
    CHECK(p.rank == 3);
    CHECK(p.calls.size() == 1);
    REQUIRE(p.gpu.size() == 2);
    CHECK(p.gpu[0].correlation == 9);
    CHECK(p.gpu[1].copy_kind == "HtoD");
    CHECK(p.ranges.size() == 1);
    CHECK(t->has_gpu);
}

TEST_CASE("the format comes from --format, else the output's extension, else pftrace") {
    CHECK(*choose_format("t.json", "") == TraceFormat::Json);
    CHECK(*choose_format("t.pftrace", "") == TraceFormat::Pftrace);
    CHECK(*choose_format("out.kineto", "") == TraceFormat::Kineto);
    CHECK(*choose_format("traces/", "") == TraceFormat::Kineto);
    CHECK(*choose_format("trace.bin", "") == TraceFormat::Pftrace);
    CHECK(*choose_format("t.json", "pftrace") == TraceFormat::Pftrace);
    auto bad = choose_format("t.json", "xml");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().code == ExitCode::Usage);
    CHECK(default_output_name(TraceFormat::Pftrace, "gtrace-1-x") == "gtrace-1-x.pftrace");
    CHECK(default_output_name(TraceFormat::Kineto, "gtrace-1-x") == "gtrace-1-x.kineto");
}

namespace {

// Counts what reaches the format's writer.
struct Counting final : NullWriter {
    int calls = 0, flows = 0, begins = 0, ends = 0;
    void call(const ApiCall&) override { ++calls; }
    void flow(const CallRef&, const GpuOp&) override { ++flows; }
    void sample_frame_begin(const SampleFrame&, uint64_t) override { ++begins; }
    void sample_frame_end(uint32_t, uint32_t, size_t, uint64_t) override { ++ends; }
};

} // namespace

TEST_CASE("the admission filter keeps the window and the limit for every format") {
    auto counting = std::make_unique<Counting>();
    Counting& seen = *counting;
    AdmissionFilter f(std::move(counting));
    f.set_window(100, 200);
    f.set_max_events(5);
    ApiCall c;
    for (uint64_t ts : {50, 100, 150}) {
        c.start_ns = ts;
        f.call(c);
    }
    CHECK(seen.calls == 2);
    CHECK(f.events_outside_window() == 1);
    GpuOp op;
    op.start_ns = 160;
    f.flow({0, 0, 90, 95, {}, false}, op); // its call is outside: no flow
    f.flow({0, 0, 120, 130, {}, false}, op);
    CHECK(seen.flows == 1);
    CHECK(f.events_written() == 4); // a flow counts its two ends
    // A frame admitted opens and closes; one over the limit does neither.
    f.sample_frame_begin({1, 1, "t", 0, {"a", {}, 0}}, 170);
    f.sample_frame_begin({1, 1, "t", 1, {"b", {}, 0}}, 171);
    f.sample_frame_end(1, 1, 1, 180);
    f.sample_frame_end(1, 1, 0, 181);
    CHECK(seen.begins == 1);
    CHECK(seen.ends == 1);
    CHECK(f.full());
    CHECK(f.events_over_limit() == 1);
}

namespace event_vocabulary_test {

// The arguments a JSON writer should give an event: the vocabulary's names (output/event_args.h),
// a Time as NAME_us, renamed as `rename` says (Kineto's names; "" leaves one out).
template <typename Visitor>
std::set<std::string> expected_keys(Visitor&& each, const std::map<std::string, std::string>& rename = {}) {
    std::set<std::string> keys;
    each([&](const EventArg& a) {
        std::string name = a.type == ArgType::Time ? std::string(a.name) + "_us" : std::string(a.name);
        if (auto r = rename.find(name); r != rename.end()) name = r->second;
        if (!name.empty()) keys.insert(name);
    });
    return keys;
}

std::set<std::string> keys_of(const nlohmann::json& args) {
    std::set<std::string> keys;
    for (const auto& [k, v] : args.items()) keys.insert(k);
    return keys;
}

} // namespace event_vocabulary_test

TEST_CASE("the JSON writers give each event the vocabulary's arguments, no more, no fewer") {
    using namespace event_vocabulary_test;
    TempDir dir("unit-vocabulary");
    GpuOp kernel{.kind = GpuOpKind::Kernel, .pid = kPid, .correlation = 7, .start_ns = 2'000'000, .end_ns = 2'500'000, .device = 0,
                 .context = 1, .stream = 13, .name = "k", .grid = {4, 1, 1}, .block = {128, 1, 1}, .registers = 32,
                 .static_shared = 16, .dynamic_shared = 48, .graph = true};
    GpuOp set = kernel, copy = kernel;
    set.kind = GpuOpKind::Memset, set.name = "Memset", set.bytes = 4096, set.correlation = 8;
    copy.kind = GpuOpKind::Memcpy, copy.name = "Memcpy HtoD", copy.bytes = 1 << 20, copy.copy_kind = "HtoD", copy.correlation = 9;
    Collective nccl{.pid = kPid, .tid = kPid, .start_ns = 3'000'000, .end_ns = 3'100'000, .name = "ncclAllReduce", .group = 0xc0};
    nccl.nccl = NcclArgs{.count = 256, .bytes = 1024, .datatype = "float32", .redop = "sum", .stream = 0x5000, .group_depth = 0};
    nccl.nccl->api = GT_NCCL_ALL_REDUCE;
    Collective wait{.pid = kPid, .tid = kPid, .start_ns = 3'200'000, .end_ns = 3'300'000, .name = "all_reduce", .wait = true,
                    .op = "allreduce", .backend = "gloo", .issued_ns = 3'150'000};
    auto info = std::make_shared<NvtxRangeInfo>(NvtxRangeInfo{.domain = "d", .category = 3, .payload = 1.5, .end_tid = kPid + 1,
                                                              .push_pop = false});
    TorchRange nvtx{.pid = kPid, .tid = kPid, .start_ns = 3'400'000, .end_ns = 3'500'000, .name = "region", .nvtx = info};
    const std::map<std::string, std::string> kineto_names = {
        {"correlation", "External id"}, {"registers_per_thread", "registers per thread"}, {"shared_memory_static", ""},
        {"shared_memory_dynamic", "shared memory"}, {"bandwidth_GBps", "memory bandwidth (GB/s)"}};

    for (TraceFormat f : {TraceFormat::Json, TraceFormat::Kineto}) {
        const bool kineto = f == TraceFormat::Kineto;
        std::string path = dir.at(kineto ? "t.kineto" : "t.json");
        TraceModel model = model_with_ranks();
        auto w = create_trace_writer({f, path}, false, model);
        REQUIRE(w);
        for (const GpuOp* op : {&kernel, &set, &copy}) (*w)->gpu_op(*op);
        (*w)->collective(nccl);
        (*w)->collective(wait);
        (*w)->torch_range(nvtx);
        REQUIRE((*w)->finish(model, {{"tool", "gtrace"}}));
        std::ifstream in(kineto ? path + "/rank1.pt.trace.json" : path);
        nlohmann::json trace = nlohmann::json::parse(in);
        std::map<std::string, std::set<std::string>> got; // by event name (Kineto writes two rows of a range: the same args)
        for (const auto& e : trace["traceEvents"])
            if (e.value("ph", "") == "X" && e.contains("args")) got[e["name"].get<std::string>()] = keys_of(e["args"]);
        INFO((kineto ? "Kineto" : "Chrome JSON"));
        for (const GpuOp* op : {&kernel, &set, &copy}) {
            auto want = expected_keys([&](auto v) { for_each_gpu_op_arg(*op, v); }, kineto ? kineto_names : std::map<std::string, std::string>{});
            if (kineto) want.insert({"correlation", "queued"}); // Kineto's join key is beside it
            CHECK(got[op->name] == want);
        }
        if (!kineto) { // Kineto writes CPU collectives its own way for HTA (kineto_writer_hta.cpp)
            CHECK(got["ncclAllReduce"] == expected_keys([&](auto v) { for_each_collective_arg(nccl, v); }));
            CHECK(got["all_reduce"] == expected_keys([&](auto v) { for_each_collective_arg(wait, v); }));
        }
        CHECK(got["region"] == expected_keys([&](auto v) { for_each_nvtx_arg(*info, nvtx.tid, v); }));
    }
}

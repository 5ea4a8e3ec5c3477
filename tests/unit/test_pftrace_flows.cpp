// Flows in a .pftrace start once and end once, and start in the call their GPU op was joined
// to, however calls and ops pair up: twin calls with one correlation id, a graph launch's
// several kernels, an op written before its call, an id known only from CUPTI's API record.
#include <catch2/catch.hpp>

#include <map>
#include <vector>

#include "analyze/trace_reader.h"
#include "format/proto_wire.h"
#include "output/pftrace_flows.h"
#include "output/pftrace_interning.h"
#include "output/trace_formats.h"
#include "temp_dir.h"

using namespace gtrace;

namespace {

constexpr uint32_t kFlowPid = 4242;

struct FlowEvent {
    uint32_t type = 0;     // TrackEvent.type: 1 slice begin, 3 instant
    uint64_t flow = 0;     // flow_ids (0: none)
    uint64_t ends = 0;     // terminating_flow_ids
};

// The track events of a trace that start or end a flow, in file order.
std::vector<FlowEvent> flow_events(const std::string& bytes) {
    std::vector<FlowEvent> out;
    proto::WireReader trace(bytes);
    uint32_t field, type;
    while (trace.next(field, type)) {
        std::string_view packet = trace.bytes_of(type);
        if (field != 1) continue;
        proto::WireReader p(packet);
        while (p.next(field, type)) {
            std::string_view te = p.bytes_of(type);
            if (field != 11) continue; // TracePacket.track_event
            proto::WireReader e(te);
            FlowEvent f;
            while (e.next(field, type)) {
                if (field == 9) f.type = static_cast<uint32_t>(e.varint_of(type));
                else if (field == 47) f.flow = e.fixed64_of(type);
                else if (field == 48) f.ends = e.fixed64_of(type);
                else e.skip(type);
            }
            REQUIRE_FALSE(e.failed());
            if (f.flow || f.ends) out.push_back(f);
        }
    }
    REQUIRE_FALSE(trace.failed());
    return out;
}

ApiCall launch(uint64_t start, uint32_t correlation) {
    ApiCall c;
    c.api = GT_API_CUDA_LAUNCH_KERNEL, c.pid = kFlowPid, c.tid = kFlowPid, c.start_ns = start, c.end_ns = start + 4'000;
    c.correlation = correlation;
    return c;
}

GpuOp kernel(uint64_t start, uint32_t correlation) {
    GpuOp op;
    op.kind = GpuOpKind::Kernel, op.pid = kFlowPid, op.correlation = correlation, op.stream = 7;
    op.start_ns = start, op.end_ns = start + 1'000, op.name = "k";
    return op;
}

CallRef ref(const ApiCall& c, bool via_api_record = false) { return {c.pid, c.tid, c.start_ns, c.end_ns, c.api, via_api_record}; }

} // namespace

// A .pftrace writer into `dir`, its model holding the one process the tests write.
std::unique_ptr<TraceWriter> flows_writer(TempDir& dir, TraceModel& model) {
    model.add_process(kFlowPid, 1, false, std::nullopt);
    auto w = create_trace_writer({TraceFormat::Pftrace, dir.at("t.pftrace")}, false, model);
    REQUIRE(w);
    return std::move(*w);
}

TEST_CASE("every .pftrace flow starts once and ends once, in the call its op was joined to") {
    TempDir dir("unit-flows");
    TraceModel model;
    std::unique_ptr<TraceWriter> w = flows_writer(dir, model);
    TraceWriter& t = *w;
    uint64_t ts = 5'000'000'000'000;

    // Twins: two calls with correlation 7 (a call recorded twice); the op is joined to the second.
    ApiCall twin_a = launch(ts, 7), twin_b = launch(ts + 10'000, 7);
    t.call(twin_a);
    t.call(twin_b);
    GpuOp op7 = kernel(ts + 20'000, 7);
    t.flow(ref(twin_b), op7);
    t.gpu_op(op7);
    // A graph launch: one call, two kernels with its correlation id.
    ApiCall graph = launch(ts + 30'000, 8);
    t.call(graph);
    GpuOp op8a = kernel(ts + 40'000, 8), op8b = kernel(ts + 41'000, 8);
    t.flow(ref(graph), op8a);
    t.gpu_op(op8a);
    t.flow(ref(graph), op8b);
    t.gpu_op(op8b);
    // The GPU record before its call.
    GpuOp op9 = kernel(ts + 60'000, 9);
    t.gpu_op(op9);
    ApiCall late = launch(ts + 50'000, 9);
    t.call(late);
    t.flow(ref(late), op9);
    // The id from CUPTI's API record: the call's slice went out without it.
    ApiCall plain = launch(ts + 70'000, 0);
    t.call(plain);
    GpuOp op10 = kernel(ts + 80'000, 10);
    t.flow(ref(plain, true), op10);
    t.gpu_op(op10);
    REQUIRE(t.finish(model, {{"tool", "gtrace"}}));

    std::vector<FlowEvent> events = flow_events(read_file(dir.at("t.pftrace")));
    std::map<uint64_t, int> starts, ends;
    std::map<uint64_t, uint32_t> started_by; // id -> the type of the event that starts it
    std::vector<uint64_t> slice_flows;       // the flows on call slices, in call order
    std::vector<uint64_t> ended;             // the flows ended, in order
    for (const auto& e : events) {
        if (e.flow) {
            ++starts[e.flow];
            started_by[e.flow] = e.type;
            if (e.type == 1) slice_flows.push_back(e.flow);
        }
        if (e.ends) {
            ++ends[e.ends];
            ended.push_back(e.ends);
        }
    }
    for (auto [id, n] : starts) {
        INFO(id);
        CHECK(n == 1);
        CHECK((id & 0xFFFFFFFF) != 0); // the readers take the correlation id from the low 32 bits
    }
    for (auto [id, n] : ends) {
        INFO(id);
        CHECK(n == 1);
        CHECK(starts.contains(id));
    }
    for (auto [id, n] : starts) {
        INFO(id);
        CHECK(ends.contains(id)); // no flow is left open: Perfetto would draw it to nowhere
    }
    REQUIRE(slice_flows.size() == 4); // twin_a, twin_b, graph, late
    // Ended, in file order: twin_b's slice flow (its id's entry is twin_a's), op7, op8a, op8b, op9,
    // op10, and twin_a's slice flow, which no op ended, closed at the finish.
    REQUIRE(ended.size() == 7);
    // twin_b's slice flow has nothing to end it: an instant in twin_b does, right after it.
    CHECK(ended[0] == slice_flows[1]);
    CHECK(started_by[ended[0]] == 1);
    // op7 was joined to twin_b, whose slice starts no flow of twin_a's id: an instant in twin_b does.
    CHECK(ended[1] != slice_flows[0]);
    CHECK(started_by[ended[1]] == 3);
    CHECK((ended[1] & 0xFFFFFFFF) == 7);
    // The graph's first kernel ends the call slice's flow, the second a flow of its own.
    CHECK(ended[2] == slice_flows[2]);
    CHECK(started_by[ended[3]] == 3);
    CHECK((ended[3] & 0xFFFFFFFF) == 8);
    // The op written first: its flow from the late call's slice ends at an instant.
    CHECK(ended[4] == slice_flows[3]);
    // The API record's id: an instant in the call starts it.
    CHECK(started_by[ended[5]] == 3);
    CHECK((ended[5] & 0xFFFFFFFF) == 10);
    // twin_a's flow, given up at the finish.
    CHECK(ended[6] == slice_flows[0]);
}

TEST_CASE("a .pftrace call starts a flow only where GPU work follows it") {
    TempDir dir("unit-flows-none");
    TraceModel model;
    std::unique_ptr<TraceWriter> w = flows_writer(dir, model);
    uint64_t ts = 5'000'000'000'000;
    ApiCall sync = launch(ts, 1), failed = launch(ts + 10'000, 2), kept = launch(ts + 20'000, 3);
    sync.api = GT_API_CUDA_DEVICE_SYNCHRONIZE; // no GPU op ever carries its id
    failed.ret = 1;                            // cudaErrorInvalidValue: nothing was launched
    for (const ApiCall* c : {&sync, &failed, &kept}) w->call(*c);
    REQUIRE(w->finish(model, {{"tool", "gtrace"}}));
    std::vector<FlowEvent> events = flow_events(read_file(dir.at("t.pftrace")));
    // The launch's flow: started on its slice, and (no kernel came) ended at the finish.
    REQUIRE(events.size() == 2);
    CHECK((events[0].flow & 0xFFFFFFFF) == 3);
    CHECK(events[1].ends == events[0].flow);
    CHECK(events[1].type == 3);
}

TEST_CASE("the .pftrace interning lets go of the stacks of processes gone, and keeps the others") {
    PftraceInterning interning;
    auto live = make_py_stack({PyFrame{"train", "/job/train.py", 7}}, false);
    const uint64_t live_iid = interning.callstack(live);
    for (int worker = 0; worker < 20000; ++worker) { // short-lived processes, each its own stack object
        auto gone = make_py_stack({PyFrame{"worker_loop", "/job/data.py", 3}}, false);
        CHECK(interning.callstack(gone) != 0);
    }                                               // ... released by the capture as each exits
    CHECK(interning.stacks_held() < 10000);
    CHECK(interning.callstack(live) == live_iid); // still known by its object
    auto again = make_py_stack({PyFrame{"worker_loop", "/job/data.py", 3}}, false);
    auto first = make_py_stack({PyFrame{"worker_loop", "/job/data.py", 3}}, false);
    CHECK(interning.callstack(again) == interning.callstack(first)); // same frames, same callstack iid
}

TEST_CASE("a GPU op written before its call is remembered a minute, not for the whole capture") {
    PftraceFlows flows;
    auto op = [](uint32_t correlation, uint64_t start_ns) {
        GpuOp o;
        o.pid = kFlowPid;
        o.correlation = correlation;
        o.start_ns = start_ns;
        return o;
    };
    flows.op_written_unlinked(op(1, 1'000));
    flows.op_written_unlinked(op(2, 2'000));
    CHECK(flows.take_written_unlinked(op(2, 2'000))); // its call came: the flow ends at an instant
    CHECK_FALSE(flows.take_written_unlinked(op(2, 2'000)));
    // A minute of ops later, the first one's call has not come and will not (GpuJoin let it go).
    for (uint32_t i = 0; i < 100; ++i) flows.op_written_unlinked(op(100 + i, 61'000'000'000ull + i));
    CHECK_FALSE(flows.take_written_unlinked(op(1, 1'000)));
    CHECK(flows.take_written_unlinked(op(150, 61'000'000'050ull)));
}

TEST_CASE("a .pftrace call names its user line as a source location only where the stack's top is not that line") {
    TempDir dir("unit-source");
    TraceModel model;
    std::unique_ptr<TraceWriter> w = flows_writer(dir, model);
    uint64_t ts = 5'000'000'000'000;
    // ctypes from the user's loop: the innermost frame is the user's line.
    ApiCall direct = launch(ts, 0);
    direct.stack = make_py_stack({PyFrame{"loop", "/job/bench.py", 31}, PyFrame{"main", "/job/bench.py", 50}}, false);
    // Under torch: the innermost frame is torch's, the user's line is further out.
    ApiCall under_torch = launch(ts + 10'000, 0);
    under_torch.stack = make_py_stack({PyFrame{"forward", "/venv/torch/nn/modules/linear.py", 125},
                                       PyFrame{"step", "/job/train.py", 42}}, false);
    w->call(direct);
    w->call(under_torch);
    REQUIRE(w->finish(model, {{"tool", "gtrace"}}));

    // On the wire: source_location_iid (TrackEvent field 34) on the second call only.
    std::string bytes = read_file(dir.at("t.pftrace"));
    std::vector<bool> has_source;
    proto::WireReader trace(bytes);
    uint32_t field, type;
    while (trace.next(field, type)) {
        proto::WireReader p(trace.bytes_of(type));
        while (p.next(field, type)) {
            std::string_view te = p.bytes_of(type);
            if (field != 11) continue;
            proto::WireReader e(te);
            bool callstack = false, source = false;
            while (e.next(field, type)) {
                callstack |= field == 56, source |= field == 34;
                e.skip(type);
            }
            if (callstack) has_source.push_back(source);
        }
    }
    CHECK(has_source == std::vector<bool>{false, true});

    // gtrace's reader gives both calls their user line.
    auto trace_data = load_trace(dir.at("t.pftrace"));
    REQUIRE(trace_data);
    const auto& calls = trace_data->processes.at(kFlowPid).calls;
    REQUIRE(calls.size() == 2);
    CHECK(calls[0].source == "loop (/job/bench.py:31)");
    CHECK(calls[1].source == "step (/job/train.py:42)");
}

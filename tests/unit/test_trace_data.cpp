// Reading gtrace's traces for `gtrace report`: every kind of event, the errors for files that are
// not complete gtrace traces, and the string pool the spans view.
#include <catch2/catch.hpp>

#include "temp_dir.h"
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analyze/trace_reader.h"
#include "analyze/trace_data.h"
#include "output/chrome_trace.h"

using namespace gtrace;
namespace fs = std::filesystem;

namespace {

const std::string kOtherData = R"("otherData":{"tool":"gtrace","version":"0.1.0","gpu":{"enabled":true,"agents":1}})";
const uint32_t kSampleTid = 100 + kSampleTrackTidOffset;

// A small trace as gtrace writes it: events, then metadata, then otherData.
std::string trace_text(const std::string& events) {
    return "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n" + events + "\n],\n" + kOtherData + "}\n";
}

const std::string kEvents = std::string(R"J(
{"name":"cudaLaunchKernel","cat":"cuda_api","ph":"X","pid":100,"tid":100,"ts":5000000010.500,"dur":4.250,"args":{"ret":0,"correlation":7,"kernel":"gemm","grid":[1,1,1],"source":"forward (model.py:20)","py_stack":["forward (model.py:20)","<module> (train.py:60)"]}},
{"name":"cudaMemcpyAsync","cat":"cuda_api","ph":"X","pid":100,"tid":101,"ts":5000000020.000,"dur":1.000,"args":{"ret":0,"correlation":8,"bytes":4096,"kind":"HtoD"}},
{"name":"gemm","cat":"kernel","ph":"X","pid":100,"tid":1000000007,"ts":5000000016.000,"dur":30.001,"args":{"correlation":7,"device":0,"grid":[1,1,1]}},
{"name":"Memcpy HtoD","cat":"gpu_memcpy","ph":"X","pid":100,"tid":1000000007,"ts":5000000050.000,"dur":2.000,"args":{"correlation":8,"bytes":4096,"kind":"HtoD","bandwidth_GBps":2.048}},
{"name":"Memset","cat":"gpu_memset","ph":"X","pid":100,"tid":1000000007,"ts":5000000053.000,"dur":1.000,"args":{"correlation":9,"bytes":512}},
{"name":"cudaLaunchKernel","cat":"ac2g","ph":"s","id":1,"pid":100,"tid":100,"ts":5000000012.000},
{"name":"train_step (train.py:41)","cat":"sample","ph":"X","pid":100,"tid":)J") + std::to_string(kSampleTid) + R"J(,"ts":5000000000.000,"dur":100.000},
{"name":"worker_loop (w.py:1)","cat":"sample","ph":"X","pid":100,"tid":1073741925,"ts":5000000000.000,"dur":100.000},
{"name":"Optimizer.step#Adam.step","cat":"torch_range","ph":"X","pid":100,"tid":100,"ts":5000000060.000,"dur":20.000,"args":{"seq":3}},
{"name":"GPU memory (device 1)","cat":"gpu_memory","ph":"C","pid":100,"ts":5000000070.000,"args":{"allocated_bytes":1048576,"device":1}},
{"name":"GPU memory (device 1)","cat":"gpu_memory","ph":"C","pid":100,"ts":5000000071.000,"args":{"allocated_bytes":524288,"device":1}},
{"args":{"name":"python3 (rank 1)"},"name":"process_name","ph":"M","pid":100,"tid":0},
{"args":{"labels":"{\"cmdline\":\"python3 train.py\",\"rank\":1,\"world_size\":2}"},"name":"process_labels","ph":"M","pid":100,"tid":0},
{"args":{"labels":"{\"forked_from\":100,\"rank\":1}"},"name":"process_labels","ph":"M","pid":200,"tid":0})J";

Result<TraceData> load(const TempDir& dir, const std::string& text) { return load_trace(dir.write("t.json", text)); }

void check_bad(const Result<TraceData>& r, const std::string& says) {
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ExitCode::BadTrace);
    INFO(r.error().message);
    CHECK(r.error().message.find(says) != std::string::npos);
}

} // namespace

TEST_CASE("every kind of event a gtrace trace holds is read") {
    TempDir dir;
    auto r = load(dir, trace_text(kEvents));
    REQUIRE(r);
    const TraceData& t = *r;
    CHECK(t.has_gpu);
    REQUIRE(t.processes.size() == 2);
    const ProcessData& p = t.processes.at(100);
    CHECK(p.label == "python3 (rank 1)");
    CHECK(p.rank == 1);
    CHECK(p.cmdline == "python3 train.py");
    CHECK_FALSE(p.forked);
    CHECK(t.processes.at(200).forked);

    REQUIRE(p.calls.size() == 2);
    const CallSpan& launch = p.calls[0];
    CHECK(launch.name == "cudaLaunchKernel");
    CHECK(launch.start_ns == 5000000010500ull);
    CHECK(launch.end_ns == 5000000014750ull);
    CHECK(launch.tid == 100);
    CHECK(launch.correlation == 7);
    CHECK(launch.source == "forward (model.py:20)");
    CHECK(p.calls[1].bytes == 4096);
    CHECK(p.calls[1].kind == "HtoD");
    CHECK(p.calls[1].source.empty());

    REQUIRE(p.gpu.size() == 3);
    CHECK(p.gpu[0].kind == GpuKind::Kernel);
    CHECK(p.gpu[0].name == "gemm");
    CHECK(p.gpu[0].dur() == 30001);
    CHECK(p.gpu[0].correlation == 7);
    CHECK(p.gpu[1].kind == GpuKind::Memcpy);
    CHECK(p.gpu[1].copy_kind == "HtoD");
    CHECK(p.gpu[1].bytes == 4096);
    CHECK(p.gpu[2].kind == GpuKind::Memset);
    CHECK(p.gpu[2].bytes == 512);

    REQUIRE(p.main_samples.size() == 1); // the other thread's sample track is not the main thread's
    CHECK(p.main_samples[0].name == "train_step (train.py:41)");
    CHECK(p.main_samples[0].tid == 100);

    REQUIRE(p.ranges.size() == 1);
    CHECK(p.ranges[0].name == "Optimizer.step#Adam.step");
    CHECK(p.ranges[0].tid == 100);
    CHECK(p.ranges[0].start_ns == 5000000060000ull);
    CHECK(p.ranges[0].dur() == 20000);

    REQUIRE(p.memory.size() == 2);
    CHECK(p.memory[0].ts_ns == 5000000070000ull);
    CHECK(p.memory[0].device == 1);
    CHECK(p.memory[0].allocated_bytes == 1048576);
    CHECK(p.memory[1].allocated_bytes == 524288);
}

TEST_CASE("otherData may come before or after traceEvents") {
    TempDir dir;
    auto before = load(dir, "{" + kOtherData + ",\"traceEvents\":[" + kEvents + "]}");
    REQUIRE(before);
    CHECK(before->processes.at(100).calls.size() == 2);
    CHECK(load(dir, trace_text(kEvents)));
}

TEST_CASE("strings stay valid when the trace is moved; each distinct string is stored once") {
    TempDir dir;
    std::string again = R"J({"name":"cudaLaunchKernel","cat":"cuda_api","ph":"X","pid":100,"tid":100,"ts":6000000000.000,"dur":1.000,)J"
                        R"J("args":{"source":"forward (model.py:20)"}})J";
    auto r = load(dir, trace_text(kEvents + ",\n" + again));
    REQUIRE(r);
    TraceData moved = std::move(*r);
    std::vector<TraceData> many;
    many.push_back(std::move(moved));
    many.emplace_back(); // reallocates: the trace moves again
    const ProcessData& p = many[0].processes.at(100);
    REQUIRE(p.calls.size() == 3);
    CHECK(p.calls[2].name == "cudaLaunchKernel");
    CHECK(p.calls[2].source == "forward (model.py:20)");
    CHECK(p.calls[0].name.data() == p.calls[2].name.data());
    CHECK(p.gpu[0].name == "gemm");
    CHECK(p.ranges[0].name == "Optimizer.step#Adam.step");

    StringPool pool;
    std::string a = "kernel", b = "kernel";
    CHECK(pool.intern(a).data() == pool.intern(b).data());
    CHECK(pool.intern(std::string(3000, 'x')).size() == 3000); // longer than a block
    CHECK(pool.intern("").empty());
}

TEST_CASE("escaped and non-ASCII strings are decoded") {
    TempDir dir;
    auto r = load(dir, trace_text(R"({"name":"k\"\\\/\n\u00e9\ud83d\ude00 é","cat":"kernel","ph":"X","pid":1,"tid":2,"ts":1e3,"dur":2})"));
    REQUIRE(r);
    const GpuSpan& g = r->processes.at(1).gpu.at(0);
    CHECK(g.name == "k\"\\/\n\xc3\xa9\xf0\x9f\x98\x80 \xc3\xa9");
    CHECK(g.start_ns == 1000000);
    CHECK(g.end_ns == 1002000);
}

TEST_CASE("a truncated or corrupt trace is not valid JSON, wherever it breaks") {
    TempDir dir;
    std::string text = trace_text(kEvents);
    size_t last = text.rfind('}');
    for (size_t cut = 0; cut <= last; cut += 7) check_bad(load(dir, text.substr(0, cut)), "is not valid JSON (truncated or corrupted?)");
    for (std::string bad : {"\"a\x01\"", "\"\xc3\"", "\"\xed\xa0\x80\"", "\"\\ud800\"", "\"\\x\"", "01", "1.", "-", "[1,]", "{\"a\":1,}",
                            "[1 2]", "tru", "{} x", "{\"a\" 1}", "[,1]"})
        check_bad(load(dir, "{\"traceEvents\":[],\"x\":" + bad + "," + kOtherData + "}"), "is not valid JSON");
}

TEST_CASE("the reader agrees with nlohmann on which files are valid JSON") {
    TempDir dir;
    std::string text = trace_text(kEvents);
    std::mt19937 rng(42);
    const std::string alphabet = "{}[],:\"\\ 0123456789.-eEtfnu\x01\xc3\xa9\x80";
    for (int i = 0; i < 3000; ++i) {
        std::string mutated = text;
        for (int n = 1 + static_cast<int>(rng() % 2); n > 0; --n)
            mutated[rng() % mutated.size()] = alphabet[rng() % alphabet.size()];
        std::string path = dir.write("t.json", mutated);
        auto r = load_trace(path, 1), split = load_trace(path, 3);
        bool invalid = !r && r.error().message.find("is not valid JSON") != std::string::npos;
        INFO(mutated);
        REQUIRE(invalid == !nlohmann::json::accept(mutated));
        REQUIRE(bool(r) == bool(split)); // the same error, at the same byte, on several threads
        if (!r) REQUIRE(r.error().message == split.error().message);
    }
}

namespace {

// A larger trace: every kind of event from three processes, interleaved; `nested` puts a
// multi-line array of objects inside some events' args (newlines that are not between events).
std::string many_events(int n, bool nested) {
    std::string out;
    for (int i = 0; i < n; ++i) {
        uint32_t pid = 100 + static_cast<uint32_t>(i / 6 % 3) * 100;
        std::string ts = std::to_string(5000000000 + i) + "." + std::to_string(100 + i % 900), common = fmt::format(
            R"J("pid":{},"tid":{},"ts":{},"dur":{}.250)J", pid, i % 7 ? pid : pid + 1, ts, i % 50);
        const char* extra = nested && i % 5 == 0 ? ",\n\"frames\":[\n{\"f\":1},\n{\"f\":2}\n]" : "";
        switch (i % 6) {
        case 0: out += fmt::format(R"J({{"name":"cudaLaunchKernel","cat":"cuda_api","ph":"X",{},"args":{{"correlation":{},"source":"f (m.py:{})"{}}}}})J", common, i, i % 13, extra); break;
        case 1: out += fmt::format(R"J({{"name":"k{}\u00e9","cat":"kernel","ph":"X",{},"args":{{"correlation":{}{}}}}})J", i % 11, common, i - 1, extra); break;
        case 2: out += fmt::format(R"J({{"name":"Memcpy","cat":"gpu_memcpy","ph":"X",{},"args":{{"bytes":{},"kind":"HtoD"}}}})J", common, i * 8); break;
        case 3: out += fmt::format(R"J({{"name":"step#{}","cat":"torch_range","ph":"X",{}}})J", i, common); break;
        case 4: out += fmt::format(R"J({{"name":"GPU memory","cat":"gpu_memory","ph":"C","pid":{},"ts":{},"args":{{"allocated_bytes":{},"device":0}}}})J", pid, ts, i); break;
        default: out += fmt::format(R"J({{"name":"s{}","cat":"sample","ph":"X","pid":{},"tid":{},"ts":{},"dur":1}})J", i % 4, pid, pid + kSampleTrackTidOffset, ts);
        }
        out += ",\n";
        // Every kind of span the reader keeps, off-CPU slices and collectives included (the merge
        // of the threads' spans once left off-CPU slices out).
        if (i % 10 == 7)
            out += fmt::format(R"J({{"name":"blocked: a lock","cat":"off_cpu","ph":"X","pid":{},"tid":{},"ts":{},"dur":3,"args":{{"source":"f (m.py:{})"}}}},)J",
                               pid, pid + kOffCpuTrackTidOffset, ts, i % 17) + "\n";
        if (i % 10 == 8)
            out += fmt::format(R"J({{"name":"all_reduce","cat":"collective","ph":"X",{},"args":{{"phase":"wait","issued_us":{}}}}},)J", common, ts) + "\n";
    }
    for (uint32_t pid : {100u, 200u, 300u})
        out += fmt::format(R"J({{"args":{{"labels":"{{\"rank\":{},\"cmdline\":\"cmd {}\"}}"}},"name":"process_labels","ph":"M","pid":{},"tid":0}},)J", pid / 100, pid, pid) + "\n" +
               fmt::format(R"J({{"args":{{"name":"p{}"}},"name":"process_name","ph":"M","pid":{},"tid":0}})J", pid, pid) + (pid < 300 ? ",\n" : "");
    return out;
}

void check_same(const TraceData& a, const TraceData& b) {
    REQUIRE(a.processes.size() == b.processes.size());
    for (const auto& [pid, p] : a.processes) {
        const ProcessData& q = b.processes.at(pid);
        CHECK(p.label == q.label);
        CHECK(p.rank == q.rank);
        CHECK(p.forked == q.forked);
        CHECK(p.cmdline == q.cmdline);
        REQUIRE(p.calls.size() == q.calls.size());
        for (size_t i = 0; i < p.calls.size(); ++i) {
            const CallSpan &x = p.calls[i], &y = q.calls[i];
            CHECK((x.start_ns == y.start_ns && x.end_ns == y.end_ns && x.name == y.name && x.source == y.source && x.tid == y.tid &&
                   x.correlation == y.correlation));
        }
        REQUIRE(p.gpu.size() == q.gpu.size());
        for (size_t i = 0; i < p.gpu.size(); ++i)
            CHECK((p.gpu[i].start_ns == q.gpu[i].start_ns && p.gpu[i].name == q.gpu[i].name && p.gpu[i].bytes == q.gpu[i].bytes &&
                   p.gpu[i].kind == q.gpu[i].kind && p.gpu[i].copy_kind == q.gpu[i].copy_kind));
        REQUIRE(p.ranges.size() == q.ranges.size());
        for (size_t i = 0; i < p.ranges.size(); ++i) CHECK((p.ranges[i].name == q.ranges[i].name && p.ranges[i].end_ns == q.ranges[i].end_ns));
        REQUIRE(p.main_samples.size() == q.main_samples.size());
        for (size_t i = 0; i < p.main_samples.size(); ++i) CHECK(p.main_samples[i].name == q.main_samples[i].name);
        REQUIRE(p.memory.size() == q.memory.size());
        for (size_t i = 0; i < p.memory.size(); ++i) CHECK(p.memory[i].allocated_bytes == q.memory[i].allocated_bytes);
        REQUIRE(p.off_cpu.size() == q.off_cpu.size());
        for (size_t i = 0; i < p.off_cpu.size(); ++i)
            CHECK((p.off_cpu[i].start_ns == q.off_cpu[i].start_ns && p.off_cpu[i].source == q.off_cpu[i].source && p.off_cpu[i].tid == q.off_cpu[i].tid));
        REQUIRE(p.collectives.size() == q.collectives.size());
        for (size_t i = 0; i < p.collectives.size(); ++i)
            CHECK((p.collectives[i].start_ns == q.collectives[i].start_ns && p.collectives[i].issued_ns == q.collectives[i].issued_ns));
    }
}

} // namespace

TEST_CASE("reading traceEvents on several threads gives the same trace as one") {
    TempDir dir;
    std::string compact = trace_text(many_events(3000, false));
    std::string nested = trace_text(many_events(3000, true));
    std::string pretty = nlohmann::json::parse(compact).dump(1);
    // Guessed cuts that land outside traceEvents, in an array of objects one a line.
    std::string junk = "{\"junk\":[\n";
    for (int i = 0; i < 4000; ++i) junk += "{\"pid\":1,\"ph\":\"X\",\"ts\":1,\"dur\":1,\"cat\":\"kernel\"},\n";
    junk += "{}],\n\"traceEvents\":[\n" + many_events(300, false) + "],\n" + kOtherData + "}";
    for (const std::string* text : {&compact, &nested, &pretty, &junk}) {
        std::string path = dir.write("big.json", *text);
        auto one = load_trace(path, 1);
        REQUIRE(one);
        CHECK(one->processes.at(100).calls.size() == (text == &junk ? 17u : 167u));
        CHECK(one->processes.at(100).off_cpu.size() == (text == &junk ? 9u : 99u));
        for (unsigned readers : {2u, 3u, 5u, 8u}) {
            auto many = load_trace(path, readers);
            REQUIRE(many);
            check_same(*one, *many);
        }
    }
}

TEST_CASE("a file that is not gtrace's trace says what it is") {
    TempDir dir;
    // A Chrome trace without otherData.tool is another tool's (Kineto's are read: test_formats.cpp).
    check_bad(load(dir, R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1.0,"dur":2.0}]})"),
              "was not written by gtrace");
    check_bad(load(dir, "{\"traceEvents\":[]," + std::string(R"("otherData":{"tool":"perfetto"}})")), "was not written by gtrace");
    check_bad(load(dir, "{" + kOtherData + "}"), "no traceEvents array");
    check_bad(load(dir, "[1,2]"), "no traceEvents array");
    check_bad(load(dir, ""), "is not valid JSON");

    auto missing = load_trace((dir.path / "nope.json").string());
    REQUIRE_FALSE(missing);
    CHECK(missing.error().code == ExitCode::Usage);
    check_bad(load_trace(dir.path.string()), "is not a regular file (it is a directory)");
}

TEST_CASE("only kept events make a process, and no PID beyond Linux's limit does") {
    TempDir dir;
    auto t = load(dir, trace_text(R"J({"name":"k","cat":"kernel","ph":"X","pid":4194304,"tid":1,"ts":1.0,"dur":1.0},
{"name":"k","cat":"kernel","ph":"X","pid":4194305,"tid":1,"ts":1.0,"dur":1.0},
{"name":"k","cat":"kernel","ph":"X","pid":99999999999,"tid":1,"ts":1.0,"dur":1.0},
{"args":{"name":"x"},"name":"process_name","ph":"M","pid":4294967296,"tid":0},
{"name":"x","cat":"ac2g","ph":"X","pid":300,"tid":1,"ts":1.0,"dur":1.0},
{"args":{"name":"t"},"name":"thread_name","ph":"M","pid":301,"tid":1})J"));
    REQUIRE(t);
    CHECK(t->processes.size() == 1);
    CHECK(t->processes.contains(4194304));
}

TEST_CASE("a trace's microsecond times convert to nanoseconds without overflow, whatever their spelling") {
    using gtrace::trace_reader::us_to_ns;
    CHECK(us_to_ns("12.3456") == 12346);
    CHECK(us_to_ns("1.5e3") == 1500000);
    CHECK(us_to_ns("-4e2") == 0);
    CHECK(us_to_ns("8.88889e125") == 18'000'000'000'000'000'000ull); // clamped, not undefined
    CHECK(us_to_ns("nan") == 0);
}

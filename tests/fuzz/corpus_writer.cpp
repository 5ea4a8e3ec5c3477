// Writes the fuzz targets' seed corpus (tests/fuzz/corpus/) from gtrace's own writers: the unit
// tests' training job (tests/unit/trace_job.h) as Chrome JSON, Kineto and .pftrace, partial traces
// cut from them, a pair for merge, and agent ring records as the agent writes them. Rebuild the
// corpus with: cmake --build build-sanitized --target fuzz_corpus_writer &&
// build-sanitized/fuzz/fuzz_corpus_writer tests/fuzz/corpus
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "collect/agent_ring.h"
#include "trace_job.h"
#include "output/trace_formats.h"

namespace {

using namespace gtrace;
namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

void write_file(const fs::path& p, const std::string& bytes) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
    printf("%s: %zu bytes\n", p.c_str(), bytes.size());
}

// The training job through the format's writer; the trace's bytes (Kineto: rank 1's file).
std::string job_trace(TraceFormat f, const fs::path& scratch) {
    std::string path = (scratch / (f == TraceFormat::Kineto ? "t.kineto" : f == TraceFormat::Json ? "t.json" : "t.pftrace")).string();
    TraceModel model = test_job::model_with_ranks();
    auto w = create_trace_writer({f, path}, true, model);
    if (!w) {
        fprintf(stderr, "%s\n", w.error().message.c_str());
        exit(1);
    }
    test_job::write_job(**w, model);
    (void)(*w)->finish(model, {{"tool", "gtrace"}, {"host", "node-a"}, {"gpu", {{"enabled", true}}},
                               {"clocks", {{"monotonic_ns", 5'000'000'000'000}, {"realtime_ns", 1'700'000'000'000'000'000}}}});
    return read_file(f == TraceFormat::Kineto ? path + "/rank1.pt.trace.json" : path);
}

// The ring's records (after a zero tail and the bytes the head is ahead), as fuzz_agent_ring reads them.
std::string ring_records() {
    static uint8_t memory[GT_AGENT_DATA_OFFSET + 4096];
    auto* ring = reinterpret_cast<gt_agent_ring*>(memory);
    ring->data_bytes = 4096;
    uint64_t pos = 0;
    const char name[] = "void at::native::vectorized_elementwise_kernel<4>(int)";
    if (auto* k = agent_ring_reserve_record<gt_gpu_kernel>(ring, sizeof(gt_gpu_kernel) + sizeof name - 1, GT_GPU_KERNEL, 7, &pos)) {
        k->op.start = 1000, k->op.end = 5000, k->grid[0] = 64, k->block[0] = 256, k->name_len = sizeof name - 1;
        memcpy(k->name, name, sizeof name - 1);
        agent_ring_commit(ring, pos, k->op.h.size);
    }
    if (auto* c = agent_ring_reserve_record<gt_gpu_copy>(ring, sizeof(gt_gpu_copy), GT_GPU_MEMCPY, 8, &pos)) {
        c->op.start = 6000, c->op.end = 7000, c->bytes = 4096, c->copy_kind = 1;
        agent_ring_commit(ring, pos, c->op.h.size);
    }
    if (auto* a = agent_ring_reserve_record<gt_gpu_api>(ring, sizeof(gt_gpu_api), GT_GPU_API, 7, &pos)) {
        a->start = 900, a->end = 1100, a->tid = 4242, a->cbid = 211;
        agent_ring_commit(ring, pos, a->h.size);
    }
    if (auto* s = agent_ring_reserve_record<gt_gpu_sync>(ring, sizeof(gt_gpu_sync), GT_GPU_SYNC, 9, &pos)) {
        s->op.start = 7000, s->op.end = 9000, s->sync_type = 3;
        agent_ring_commit(ring, pos, s->op.h.size);
    }
    uint64_t tail = 0;
    uint16_t ahead = static_cast<uint16_t>(ring->head);
    std::string bytes(reinterpret_cast<const char*>(&tail), 8);
    bytes.append(reinterpret_cast<const char*>(&ahead), 2);
    bytes.append(reinterpret_cast<const char*>(agent_ring_data(ring)), ring->head);
    return bytes;
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_corpus_writer CORPUS_DIR\n");
        return 2;
    }
    fs::path out = argv[1];
    fs::path scratch = fs::temp_directory_path() / ("gtrace-corpus-" + std::to_string(getpid()));
    fs::create_directories(scratch);
    std::string json = job_trace(TraceFormat::Json, scratch);
    std::string pftrace = job_trace(TraceFormat::Pftrace, scratch);
    write_file(out / "fuzz_trace_json/job.json", json);
    write_file(out / "fuzz_trace_json/kineto.json", job_trace(TraceFormat::Kineto, scratch));
    write_file(out / "fuzz_trace_pftrace/job.pftrace", pftrace);
    // A killed capture's partial: its header and whole events, then half an event.
    size_t line = json.find("\n", json.size() / 2);
    write_file(out / "fuzz_partial_trace/job.json.partial", json.substr(0, line + 40));
    write_file(out / "fuzz_partial_trace/job.pftrace.partial", pftrace.substr(0, pftrace.size() * 2 / 3));
    std::string pair = {static_cast<char>(pftrace.size() & 0xff), static_cast<char>(pftrace.size() >> 8)};
    write_file(out / "fuzz_merge/two_nodes", pair + pftrace + pftrace);
    write_file(out / "fuzz_agent_ring/records", ring_records());
    fs::remove_all(scratch);
    return 0;
}

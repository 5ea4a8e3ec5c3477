// A .pftrace cut short by a write error (a full disk, here a file size limit): the trace that
// remains ends every slice still open at the cut — sampled frames that began long before it —
// from what the writer knew as it wrote (output/pftrace_writer.h), without reading its file back.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/resource.h>

#include <fstream>
#include <sstream>

#include "format/pftrace_scan.h"
#include "output/trace_formats.h"
#include "temp_dir.h"
#include "trace_job.h"

using namespace gtrace;

namespace {

// Writes beyond `bytes` fail (EFBIG) while it lives, as a full disk would.
struct FileSizeLimit {
    rlimit old{};
    explicit FileSizeLimit(rlim_t bytes) {
        signal(SIGXFSZ, SIG_IGN);
        getrlimit(RLIMIT_FSIZE, &old);
        rlimit lim{bytes, old.rlim_max};
        setrlimit(RLIMIT_FSIZE, &lim);
    }
    ~FileSizeLimit() {
        setrlimit(RLIMIT_FSIZE, &old);
        signal(SIGXFSZ, SIG_DFL);
    }
};

SampleFrame frame(uint32_t tid, size_t depth, const std::string& name) {
    SampleFrame f;
    f.pid = test_job::kPid, f.tid = tid, f.thread = "t" + std::to_string(tid), f.depth = depth;
    f.frame.qualname = name, f.frame.filename = "train.py", f.frame.line = static_cast<int>(10 + depth);
    return f;
}

} // namespace

TEST_CASE("a .pftrace cut by a write error ends the slices open at the cut, from what the writer knew") {
    TempDir dir("unit-trace-cut");
    const std::string path = dir.at("cut.pftrace");
    TraceModel model = test_job::model_with_ranks();
    std::optional<TraceCut> cut;
    {
        auto w = create_trace_writer({TraceFormat::Pftrace, path}, false, model);
        REQUIRE(w);
        FileSizeLimit limit(1 << 20);
        uint64_t ts = 1'000'000;
        // Frames open from the start on four threads (main, mid, inner), and a fourth level that
        // opens and closes as the "stack" changes; slices beside them until the writes fail.
        for (uint32_t tid = 1; tid <= 4; ++tid)
            for (size_t d = 0; d < 3; ++d) (*w)->sample_frame_begin(frame(test_job::kPid + tid, d, "f" + std::to_string(d)), ts);
        for (int i = 0; i < 200'000 && !(*w)->write_failed(); ++i) {
            uint32_t tid = test_job::kPid + 1 + static_cast<uint32_t>(i % 4);
            ts += 1000;
            if (i % 7 == 0) (*w)->sample_frame_begin(frame(tid, 3, "leaf" + std::to_string(i % 50)), ts);
            if (i % 7 == 3) (*w)->sample_frame_end(test_job::kPid, tid, 3, ts);
            Collective c;
            c.pid = test_job::kPid, c.tid = tid, c.start_ns = ts, c.end_ns = ts + 500, c.name = "all_reduce", c.backend = "gloo";
            (*w)->collective(c);
        }
        REQUIRE((*w)->write_failed());
        auto r = (*w)->finish(model, {{"tool", "gtrace"}});
        REQUIRE(r);
        cut = *r;
    }
    REQUIRE(cut);
    CHECK(cut->events_kept > 1000);
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in);
    std::stringstream bytes;
    bytes << in.rdbuf();
    const std::string trace = bytes.str();
    auto end = find_pftrace_end(trace);
    REQUIRE(end);
    CHECK(end->complete);
    auto open = pftrace_open_slices(std::string_view(trace).substr(0, end->cut));
    REQUIRE(open);
    size_t still_open = 0;
    for (const auto& [uuid, n] : open->tracks) still_open += n;
    CHECK(still_open == 0); // 12 frames open all along, and the leaves open at the cut, all ended
}

// A few steps of a training job with every kind of event (calls with stacks and launch
// arguments, GPU ops and their flows in both orders, copies, memory, ranges, sampled frames),
// written through any TraceWriter; and a text of what a trace read back holds, to compare.
#pragma once
#include <functional>
#include <map>
#include <string>

#include <fmt/format.h>

#include "analyze/trace_data.h"
#include "decode/python_stacks.h"
#include "output/sample_tracks.h"
#include "output/trace_writer.h"

namespace gtrace::test_job {

constexpr uint32_t kPid = 4242, kWorker = 4243;
constexpr uint64_t kT0 = 5'000'000'000'000;

inline TraceModel model_with_ranks() {
    TraceModel m;
    ProcessInfo& p = m.add_process(kPid, 1, false, std::nullopt);
    p.ranks.rank = 1, p.ranks.world_size = 2, p.cmdline = "python3 train.py";
    ProcessInfo& w = m.add_process(kWorker, kPid, false, kPid);
    w.ranks.rank = 1, w.cmdline = "python3 train.py";
    return m;
}

// As the capture has them: one shared PyStack per distinct stack.
inline PyStackRef stack(int line, bool truncated = false) {
    static std::map<std::pair<int, bool>, PyStackRef> made;
    PyStackRef& s = made[{line, truncated}];
    if (!s)
        s = make_py_stack({{"Module._call_impl", "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", 1501},
                           {"train_step", "/home/u/train.py", line},
                           {"<module>", "/home/u/train.py", 90}},
                          truncated);
    return s;
}

// A few steps of a training job, every kind of event, through `w` (and the sampler).
// `after_step(step, samples)`, if given, runs after each step's metadata.
inline void write_job(TraceWriter& w, TraceModel& model, const std::function<void(int, SampleTracks&)>& after_step = {}) {
    SampleTracks samples(w, 100, false);
    uint64_t t = kT0;
    uint32_t corr = 1;
    for (int step = 0; step < 4; ++step) {
        uint64_t step_start = t;
        samples.add(kPid, kPid, t, "python3", {{"train", "/home/u/train.py", 80}, {"__next__", "/torch/utils/data/dataloader.py", 633}});
        samples.add(kWorker, kWorker, t, "pt_data_worker", {{"_worker_loop", "/torch/utils/data/_utils/worker.py", 308}});
        w.torch_range({kPid, kPid, t, t + 900'000, "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", stack(30)});
        t += 1'000'000;
        samples.add(kPid, kPid, t, "python3", {{"train", "/home/u/train.py", 80}, {"forward", "/home/u/model.py", 12}});
        for (int k = 0; k < 6; ++k, ++corr) {
            ApiCall c;
            c.api = GT_API_CUDA_LAUNCH_KERNEL, c.pid = kPid, c.tid = kPid, c.thread_name = "python3";
            c.start_ns = t, c.end_ns = t + 4'000 + k * 10, c.correlation = k == 5 ? 0 : corr;
            c.launch = LaunchArgs{false, 0x1000, {64u + k, 1, 1}, {256, 1, 1}, 0};
            c.kernel = k % 2 ? "ampere_sgemm_128x64_tn" : "void at::native::vectorized_elementwise_kernel<4>(int)";
            c.stream = 0x5000;
            c.stack = stack(40 + k, k == 3);
            c.by_agent = k % 2;
            model.record_call(c);
            w.call(c);
            GpuOp op;
            op.kind = GpuOpKind::Kernel, op.pid = kPid, op.correlation = corr, op.device = 0, op.stream = 7;
            op.start_ns = t + 9'000, op.end_ns = t + 30'000, op.name = c.kernel, op.grid[0] = 64 + k, op.block[0] = 256;
            CallRef ref{kPid, kPid, c.start_ns, c.end_ns, c.api, k == 5};
            if (k == 4) { // the GPU record came first: its flow comes after it
                w.gpu_op(op);
                w.flow(ref, op);
            } else {
                if (k != 2) w.flow(ref, op); // k == 2: the call never joined (its op is unlinked)
                w.gpu_op(op);
            }
            t += 12'000;
        }
        ApiCall copy;
        copy.api = GT_API_CUDA_MEMCPY, copy.pid = kPid, copy.tid = kPid, copy.start_ns = t, copy.end_ns = t + 50'000;
        copy.bytes = 4, copy.copy_kind = 2, copy.correlation = corr;
        copy.stack = stack(44);
        model.record_call(copy);
        w.call(copy);
        GpuOp op;
        op.kind = GpuOpKind::Memcpy, op.pid = kPid, op.correlation = corr++, op.stream = 7, op.start_ns = t + 10'000;
        op.end_ns = t + 12'000, op.name = "Memcpy DtoH", op.bytes = 4, op.copy_kind = "DtoH";
        w.flow({kPid, kPid, copy.start_ns, copy.end_ns, copy.api, false}, op);
        w.gpu_op(op);
        w.memory({kPid, 0, t, uint64_t{1} << (20 + step)});
        t += 60'000;
        w.torch_range({kPid, kPid, t - 40'000, t, "Optimizer.step#Adam.step", stack(50)});
        w.torch_range({kPid, kPid, step_start, t, "outer", {}});
        w.metadata(model);
        if (after_step) after_step(step, samples);
    }
    samples.finish();
}

inline std::string describe(const ProcessData& p) {
    std::string s = fmt::format("pid {} rank {} forked {}\n", p.pid, p.rank ? *p.rank : -1, p.forked);
    for (const auto& c : p.calls)
        s += fmt::format("call {} {}-{} tid {} src '{}' kind '{}' bytes {} corr {}\n", c.name, c.start_ns, c.end_ns, c.tid, c.source, c.kind,
                         c.bytes, c.correlation);
    for (const auto& g : p.gpu)
        s += fmt::format("gpu {} {}-{} kind {} copy '{}' bytes {} corr {}\n", g.name, g.start_ns, g.end_ns, static_cast<int>(g.kind),
                         g.copy_kind, g.bytes, g.correlation);
    for (const auto& r : p.ranges) s += fmt::format("range {} {}-{} tid {}\n", r.name, r.start_ns, r.end_ns, r.tid);
    for (const auto& m : p.main_samples) s += fmt::format("sample {} {}-{}\n", m.name, m.start_ns, m.end_ns);
    for (const auto& m : p.memory) s += fmt::format("memory {} {} {}\n", m.ts_ns, m.device, m.allocated_bytes);
    return s;
}


// A writer that writes nothing: tests override what they look at.
struct NullWriter : TraceWriter {
    void call(const ApiCall&) override {}
    void torch_range(const TorchRange&) override {}
    void collective(const Collective&) override {}
    void gpu_op(const GpuOp&) override {}
    void flow(const CallRef&, const GpuOp&) override {}
    void memory(const MemorySample&) override {}
    void sample_frame_begin(const SampleFrame&, uint64_t) override {}
    void sample_frame_end(uint32_t, uint32_t, size_t, uint64_t) override {}
    void metadata(const TraceModel&) override {}
    void flush() override {}
    bool write_failed() const override { return false; }
    std::string write_error() const override { return {}; }
    Result<std::optional<TraceCut>> finish(const TraceModel&, const nlohmann::json&) override { return std::optional<TraceCut>(); }
    std::string output() const override { return {}; }
    std::vector<std::string> partials() const override { return {}; }
};

} // namespace gtrace::test_job

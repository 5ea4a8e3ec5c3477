// Bytes per event of each trace format on a GPT-2-small-like training stream (issue 11's size
// target: <= 60 bytes/event in .pftrace). The same events go through every writer, as the
// capture hands them over: per step a DataLoader range and the batch's HtoD copy; 12 decoder
// layers of forward launches from the Python thread (each with its Python stack, interned once
// as the capture does), twice as many backward launches from the autograd thread (no Python
// stack), the fused AdamW launches under an Optimizer.step range, the loss.item() DtoH copy;
// every launch recorded by the agent (recorded_by = agent) with its kernel and flow, memory
// counters, and 100 Hz samples of the main thread. An event is what the JSON writer writes as
// one (a call, GPU op, range, counter, sample slice, each flow's start and end); metadata is not
// counted. Usage: trace_size [--steps N] [--dir DIR]
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "output/sample_tracks.h"
#include "output/trace_formats.h"

using namespace gtrace;

namespace {

constexpr uint32_t kPid = 4242, kAutogradTid = 4250;
constexpr int kLayers = 12;
const char* kForwardKernels[] = {
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, "
    "c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
    "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
    "cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true, "
    "false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
    "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, "
    "at::detail::Array<char*, 2> >(int, {lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)",
    "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"
    "{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>, "
    "TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, "
    "at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, {lambda(float)#1}, "
    "at::detail::Array<char*, 2>, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, "
    "at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1>)",
};
// Where each forward kernel is launched from: the torch.nn call under the block's forward.
const char* kForwardSites[][2] = {{"forward", "/usr/lib/python3/dist-packages/torch/nn/modules/normalization.py"},
                                  {"forward", "/usr/lib/python3/dist-packages/torch/nn/modules/linear.py"},
                                  {"scaled_dot_product_attention", "/usr/lib/python3/dist-packages/torch/nn/functional.py"},
                                  {"forward", "/usr/lib/python3/dist-packages/torch/nn/modules/linear.py"},
                                  {"forward", "/home/u/gpt2.py"},
                                  {"gelu", "/usr/lib/python3/dist-packages/torch/nn/functional.py"},
                                  {"forward", "/home/u/gpt2.py"}};
constexpr int kForwardPerLayer = 14; // the block's launches: the sites above, twice (attention and MLP halves)

struct Stream {
    Stream(TraceWriter& writer, TraceModel& trace_model) : w(writer), model(trace_model) {}
    TraceWriter& w;
    TraceModel& model;
    uint64_t t = 5'000'000'000'000;
    uint32_t corr = 1;
    std::map<std::pair<int, int>, PyStackRef> stacks; // as PythonStacks keeps them: one per distinct stack

    PyStackRef stack(int layer, int site) {
        PyStackRef& s = stacks[{layer, site}];
        if (s) return s;
        const char* const* where = kForwardSites[site % 7];
        std::vector<PyFrame> f = {{where[0], where[1], 100 + site},
                                  {"_call_impl", "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", 1747},
                                  {"_wrapped_call_impl", "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", 1736},
                                  {site < 7 ? "attention" : "mlp", "/home/u/gpt2.py", 40 + site},
                                  {"forward", "/home/u/gpt2.py", 60},
                                  {"_call_impl", "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", 1747},
                                  {"_wrapped_call_impl", "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", 1736},
                                  {"forward", "/home/u/gpt2.py", 90 + layer % 2},
                                  {"_call_impl", "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", 1747},
                                  {"_wrapped_call_impl", "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", 1736},
                                  {"train_step", "/home/u/train.py", 52},
                                  {"main", "/home/u/train.py", 120},
                                  {"<module>", "/home/u/train.py", 131}};
        if (layer >= 0) f.insert(f.begin() + 8, PyFrame{"forward", "/usr/lib/python3/dist-packages/torch/nn/modules/container.py", 250});
        return s = make_py_stack(std::move(f), false);
    }

    // A call recorded by the agent, its GPU op, the flow between them.
    void launch(uint32_t tid, const std::string& kernel, PyStackRef py, uint64_t gpu_start) {
        ApiCall c;
        c.api = GT_API_CUDA_LAUNCH_KERNEL, c.pid = kPid, c.tid = tid, c.start_ns = t, c.end_ns = t + 3'000;
        c.correlation = corr, c.by_agent = true, c.kernel = kernel, c.stack = std::move(py);
        model.record_call(c);
        w.call(c);
        GpuOp op;
        op.kind = GpuOpKind::Kernel, op.pid = kPid, op.correlation = corr++, op.device = 0, op.stream = 7;
        op.start_ns = gpu_start, op.end_ns = gpu_start + 40'000, op.name = kernel, op.grid[0] = 1024, op.block[0] = 256;
        op.registers = 64;
        w.flow({kPid, tid, c.start_ns, c.end_ns, c.api, false}, op);
        w.gpu_op(op);
        t += 8'000;
    }

    void copy(int kind, uint64_t bytes, PyStackRef py) {
        ApiCall c;
        c.api = kind == 1 ? GT_API_CUDA_MEMCPY_ASYNC : GT_API_CUDA_MEMCPY, c.pid = kPid, c.tid = kPid, c.start_ns = t;
        c.end_ns = t + 20'000, c.correlation = corr, c.by_agent = true, c.bytes = bytes, c.copy_kind = kind, c.stack = std::move(py);
        model.record_call(c);
        w.call(c);
        GpuOp op;
        op.kind = GpuOpKind::Memcpy, op.pid = kPid, op.correlation = corr++, op.stream = 7, op.start_ns = t + 5'000;
        op.end_ns = t + 9'000, op.name = kind == 1 ? "Memcpy HtoD" : "Memcpy DtoH", op.bytes = bytes;
        op.copy_kind = kind == 1 ? "HtoD" : "DtoH";
        w.flow({kPid, kPid, c.start_ns, c.end_ns, c.api, false}, op);
        w.gpu_op(op);
        t += 25'000;
    }
};

void write_gpt2(TraceWriter& w, TraceModel& model, int steps) {
    Stream s{w, model};
    SampleTracks samples(w, 100, false);
    uint64_t next_sample = s.t;
    auto sample = [&](const PyStackRef& py) { // the 100 Hz timer, as due
        for (; next_sample <= s.t; next_sample += 10'000'000) {
            std::vector<PyFrame> outermost_first(py->frames.rbegin(), py->frames.rend());
            samples.add(kPid, kPid, next_sample, "python3", outermost_first);
        }
    };
    PyStackRef loader = make_py_stack({{"__next__", "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py", 733},
                                       {"main", "/home/u/train.py", 118},
                                       {"<module>", "/home/u/train.py", 131}},
                                      false);
    PyStackRef optimizer = make_py_stack({{"_multi_tensor_adamw", "/usr/lib/python3/dist-packages/torch/optim/adamw.py", 500},
                                          {"step", "/usr/lib/python3/dist-packages/torch/optim/adamw.py", 220},
                                          {"main", "/home/u/train.py", 125},
                                          {"<module>", "/home/u/train.py", 131}},
                                         false);
    for (int step = 0; step < steps; ++step) {
        uint64_t step_start = s.t;
        w.torch_range({kPid, kPid, s.t, s.t + 300'000, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", loader});
        s.t += 300'000;
        s.copy(1, 8 * 512 * 8, loader);
        uint64_t gpu = s.t + 50'000;
        s.launch(kPid, kForwardKernels[6], s.stack(-1, 0), gpu), gpu += 41'000; // embeddings
        for (int layer = 0; layer < kLayers; ++layer)
            for (int k = 0; k < kForwardPerLayer; ++k) {
                s.launch(kPid, kForwardKernels[k % 7], s.stack(layer, k), gpu), gpu += 41'000;
                sample(s.stack(layer, k));
            }
        for (int k = 0; k < 2 * kLayers * kForwardPerLayer; ++k) // backward: the autograd thread, no Python stack
            s.launch(kAutogradTid, kForwardKernels[(k * 3) % 7], nullptr, gpu), gpu += 41'000;
        uint64_t opt_start = s.t;
        for (int k = 0; k < 10; ++k) s.launch(kPid, "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<"
                                                   "at::native::(anonymous namespace)::TensorListMetadata<4>, "
                                                   "at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4> >",
                                            optimizer, gpu), gpu += 41'000;
        w.torch_range({kPid, kPid, opt_start, s.t, "Optimizer.step#AdamW.step", optimizer});
        sample(optimizer);
        if (gpu > s.t) s.t = gpu; // loss.item() waits for the GPU
        s.copy(2, 4, s.stack(-1, 4));
        w.memory({kPid, 0, s.t, (uint64_t{6} << 30) + static_cast<uint64_t>(step % 3) * (64u << 20)});
        w.torch_range({kPid, kPid, step_start, s.t, "train_step", s.stack(-1, 6)});
        sample(loader);
        w.metadata(model);
    }
    samples.finish();
}

uint64_t size_of(const std::string& path) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return 0;
    if (!S_ISDIR(st.st_mode)) return static_cast<uint64_t>(st.st_size);
    return size_of(path + "/rank0.pt.trace.json");
}

// Events as the JSON writer writes them: a line each, metadata ("ph":"M") not counted.
uint64_t json_events(const std::string& path) {
    std::ifstream in(path);
    uint64_t n = 0;
    for (std::string line; std::getline(in, line);)
        if (line.starts_with("{\"name\"") && line.find("\"ph\":\"M\"") == std::string::npos) ++n;
    return n;
}

} // namespace

int main(int argc, char** argv) {
    int steps = 50;
    std::string dir;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        if (a == "--steps") steps = std::atoi(argv[i + 1]);
        else if (a == "--dir") dir = argv[i + 1];
    }
    if (steps < 1 || steps > 100000) {
        std::fprintf(stderr, "trace_size: --steps must be 1 to 100000\n");
        return 2;
    }
    if (dir.empty()) {
        char tmpl[] = "/tmp/gtrace-trace-size-XXXXXX";
        if (!mkdtemp(tmpl)) return 1;
        dir = tmpl;
    }
    std::map<TraceFormat, std::string> paths = {
        {TraceFormat::Json, dir + "/gpt2.json"}, {TraceFormat::Pftrace, dir + "/gpt2.pftrace"}, {TraceFormat::Kineto, dir + "/gpt2.kineto"}};
    for (const auto& [format, path] : paths) {
        TraceModel model;
        ProcessInfo& p = model.add_process(kPid, 1, false, std::nullopt);
        p.ranks.rank = 0, p.ranks.world_size = 1, p.cmdline = "python3 train.py --model gpt2";
        auto w = create_trace_writer({format, path}, true, model);
        if (!w) {
            std::fprintf(stderr, "trace_size: %s\n", w.error().message.c_str());
            return 1;
        }
        write_gpt2(**w, model, steps);
        if (auto r = (*w)->finish(model, {{"tool", "gtrace"}, {"gpu", {{"enabled", true}}}}); !r) {
            std::fprintf(stderr, "trace_size: %s\n", r.error().message.c_str());
            return 1;
        }
    }
    uint64_t events = json_events(paths[TraceFormat::Json]);
    std::printf("GPT-2-small-like stream, %d steps: %lu events (as the JSON writer counts them)\n", steps,
                static_cast<unsigned long>(events));
    for (const auto& [format, name] : {std::pair{TraceFormat::Pftrace, "pftrace"}, {TraceFormat::Json, "json"}, {TraceFormat::Kineto, "kineto"}}) {
        uint64_t bytes = size_of(paths[format]);
        std::printf("  %-8s %12lu bytes  %6.1f bytes/event\n", name, static_cast<unsigned long>(bytes),
                    static_cast<double>(bytes) / static_cast<double>(events));
    }
    double pf = static_cast<double>(size_of(paths[TraceFormat::Pftrace])) / static_cast<double>(events);
    std::printf("pftrace target <= 60 bytes/event: %s (files in %s)\n", pf <= 60 ? "PASS" : "FAIL", dir.c_str());
    return 0;
}

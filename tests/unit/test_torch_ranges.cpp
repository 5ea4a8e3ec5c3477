#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "decode/torch_range.h"
#include "model/gpu_memory.h"

using namespace gtrace;

namespace {

gt_torch_range_event range(const char* name = nullptr) {
    gt_torch_range_event e{};
    e.cls = GT_EV_TORCH_RANGE;
    if (name) {
        e.named = 1;
        std::strncpy(e.name, name, sizeof e.name - 1);
    }
    return e;
}

const PyFrame kEnter{"record_function.__enter__", "/usr/lib/python3/dist-packages/torch/autograd/profiler.py", 488};
const PyFrame kOps{"OpOverloadPacket.__call__", "/usr/lib/python3/dist-packages/torch/_ops.py", 442};
const PyFrame kLoop{"train", "/job/train.py", 40};

} // namespace

TEST_CASE("a range named by torch 2.x keeps its own name") {
    CHECK(torch_range_name(range("Optimizer.step#AdamW.step"), {kOps, kEnter, kLoop}) == "Optimizer.step#AdamW.step");
}

TEST_CASE("torch 1.13 ranges are named from the code that opened them") {
    const std::string torch = "/usr/lib/python3/dist-packages/torch/";
    CHECK(torch_range_name(range(), {kOps, kEnter, {"profile_hook_step.<locals>.wrapper", torch + "optim/optimizer.py", 139}, kLoop}) ==
          "Optimizer.step");
    CHECK(torch_range_name(range(), {kOps, kEnter, {"Optimizer.zero_grad", torch + "optim/optimizer.py", 267}, kLoop}) ==
          "Optimizer.zero_grad");
    CHECK(torch_range_name(range(), {kOps, kEnter, {"_BaseDataLoaderIter.__next__", torch + "utils/data/dataloader.py", 624}}) ==
          "enumerate(DataLoader).__next__");
    // Python 3.9/3.10 frames carry the bare function name.
    CHECK(torch_range_name(range(), {kOps, {"__enter__", kEnter.filename, 488}, {"__next__", torch + "utils/data/dataloader.py", 624}}) ==
          "enumerate(DataLoader).__next__");
    CHECK(torch_range_name(range(), {kOps, kEnter, {"DistributedDataParallel.forward", torch + "nn/parallel/distributed.py", 1006}}) ==
          "DistributedDataParallel.forward");
    CHECK(torch_range_name(range(), {kOps, kEnter, kLoop}) == "record_function (/job/train.py:40)");
    CHECK(torch_range_name(range(), {{"backward", torch + "autograd/__init__.py", 197}, kLoop}) == "record_function [C++] (in backward)");
    CHECK(torch_range_name(range(), {}) == "record_function");
}

TEST_CASE("GPU memory follows cudaMalloc/cudaFree until CUPTI records take over") {
    std::vector<MemorySample> samples;
    GpuMemory memory([&](const MemorySample& s) { samples.push_back(s); });
    ApiCall malloc_call;
    malloc_call.pid = 7, malloc_call.api = GT_API_CUDA_MALLOC, malloc_call.end_ns = 100, malloc_call.bytes = 1000;
    memory.on_call(malloc_call);
    ApiCall free_call = malloc_call;
    free_call.api = GT_API_CUDA_FREE, free_call.end_ns = 200;
    memory.on_call(free_call);
    memory.on_call(free_call); // freed memory gtrace never saw allocated: stays at zero
    REQUIRE(samples.size() == 3);
    CHECK(samples[0].allocated_bytes == 1000);
    CHECK(samples[1].allocated_bytes == 0);
    CHECK(samples[2].allocated_bytes == 0);
    CHECK(samples[0].device == -1);

    gt_gpu_memory r{};
    r.bytes = 4096, r.device = 1;
    memory.on_record(7, r, 300);
    memory.on_call(malloc_call); // the API no longer counts: CUPTI sees the same allocations
    r.freed = 1;
    memory.on_record(7, r, 400);
    REQUIRE(samples.size() == 5);
    CHECK(samples[3].device == 1);
    CHECK(samples[3].allocated_bytes == 4096);
    CHECK(samples[4].allocated_bytes == 0);
    CHECK(memory.peak_bytes() == 4096);
}

TEST_CASE("GPU memory in use at attach starts the curve; records it already holds are skipped") {
    std::vector<MemorySample> samples;
    GpuMemory memory([&](const MemorySample& s) { samples.push_back(s); });
    gt_gpu_memory early{};
    early.bytes = 1 << 20, early.device = 0;
    memory.on_record(7, early, 90); // came first, but older than the figures: in them
    gt_gpu_memory_state state{};
    state.device = 0, state.have = GT_MEMSTATE_DEVICE, state.device_used = 300u << 20, state.device_total = 80ull << 30;
    memory.on_state(7, state, 100);
    REQUIRE(samples.size() == 3); // the early record, the curve's start, the device's used bytes
    CHECK(samples[1].counter == MemoryCounter::Allocated);
    CHECK(samples[1].at_attach);
    CHECK(samples[1].allocated_bytes == 300u << 20);
    CHECK(samples[2].counter == MemoryCounter::DeviceUsed);
    CHECK(memory_counter_name(samples[2]) == "GPU device used at attach (device 0)");
    memory.on_record(7, early, 95); // older than the figures: skipped
    CHECK(samples.size() == 3);
    gt_gpu_memory later = early;
    later.bytes = 64u << 20;
    memory.on_record(7, later, 200);
    REQUIRE(samples.size() == 4);
    CHECK(samples[3].allocated_bytes == 364u << 20);
    CHECK(memory.peak_bytes() == 364u << 20);

    // A PyTorch process: the curve starts at the caching allocator's reserved bytes.
    state.have |= GT_MEMSTATE_TORCH, state.torch_reserved = 200u << 20, state.torch_allocated = 150u << 20;
    samples.clear();
    memory.on_state(8, state, 100);
    REQUIRE(samples.size() == 4);
    CHECK(samples[0].allocated_bytes == 200u << 20);
    CHECK(memory_counter_name(samples[0]) == "GPU memory (device 0)");
    CHECK(samples[2].counter == MemoryCounter::TorchReserved);
    CHECK(samples[3].allocated_bytes == 150u << 20);
    CHECK(memory_counter_name(samples[3]) == "torch allocated at attach (device 0)");
}

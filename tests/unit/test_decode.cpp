// Decoding raw BPF records into named arguments, register by register.
#include <catch2/catch.hpp>

#include <cstring>

#include "decode/api_call.h"
#include "format/api_table.h"

using namespace gtrace;

namespace {
gt_api_event raw(gt_cuda_api api) {
    gt_api_event e{};
    e.cls = GT_EV_API;
    e.api = static_cast<unsigned char>(api);
    e.pid = 10;
    e.tid = 11;
    e.enter_ns = 1000;
    e.exit_ns = 2500;
    e.ret = 35;
    std::memcpy(e.comm, "worker", 7);
    return e;
}
} // namespace

TEST_CASE("cudaLaunchKernel: dim3 by value takes two registers each, smem and stream on the stack") {
    auto e = raw(GT_API_CUDA_LAUNCH_KERNEL);
    e.args[0] = 0x401000;
    e.args[1] = (2ull << 32) | 7; // grid.x=7 grid.y=2
    e.args[2] = 3;                // grid.z
    e.args[3] = (1ull << 32) | 128;
    e.args[4] = 1;
    e.stack_args[0] = 4096;
    e.stack_args[1] = 0xabc;
    ApiCall c = decode_api_call(e);
    REQUIRE(c.launch);
    CHECK(c.launch->function == 0x401000);
    CHECK(c.launch->grid.x == 7);
    CHECK(c.launch->grid.y == 2);
    CHECK(c.launch->grid.z == 3);
    CHECK(c.launch->block.x == 128);
    CHECK(c.launch->block.y == 1);
    CHECK(c.launch->shared_mem == 4096);
    CHECK(*c.stream == 0xabc);
    CHECK(c.ret == 35);
    CHECK(c.thread_name == "worker");
    CHECK_FALSE(c.bytes);
}

TEST_CASE("cudaLaunchKernelExC and cuLaunchKernelEx read their config struct") {
    auto e = raw(GT_API_CUDA_LAUNCH_KERNEL_EXC);
    e.args[1] = 0x402000;
    e.config[0] = (5ull << 32) | 4; // grid 4,5
    e.config[1] = (32ull << 32) | 6; // grid.z 6, block.x 32
    e.config[2] = (8ull << 32) | 2;  // block 2, 8
    e.config[3] = 512;
    e.config[4] = 0x77;
    ApiCall c = decode_api_call(e);
    CHECK(c.launch->function == 0x402000);
    CHECK((c.launch->grid.x == 4 && c.launch->grid.y == 5 && c.launch->grid.z == 6));
    CHECK((c.launch->block.x == 32 && c.launch->block.y == 2 && c.launch->block.z == 8));
    CHECK(c.launch->shared_mem == 512);
    CHECK(*c.stream == 0x77);

    auto d = raw(GT_API_CU_LAUNCH_KERNEL_EX);
    d.config[3] = (0xdeadull << 32) | 100; // padding after the 32-bit smem is ignored
    CHECK(decode_api_call(d).launch->shared_mem == 100);
    CHECK(decode_api_call(d).launch->driver);
}

TEST_CASE("cuLaunchKernel: block.z, shared memory and stream come from the stack") {
    auto e = raw(GT_API_CU_LAUNCH_KERNEL);
    e.args[0] = 0x9000;
    e.args[1] = 10; e.args[2] = 20; e.args[3] = 30;
    e.args[4] = 64; e.args[5] = 2;
    e.stack_args[0] = 3; e.stack_args[1] = 48; e.stack_args[2] = 0x55;
    ApiCall c = decode_api_call(e);
    CHECK(c.launch->driver);
    CHECK((c.launch->grid.x == 10 && c.launch->grid.y == 20 && c.launch->grid.z == 30));
    CHECK((c.launch->block.x == 64 && c.launch->block.y == 2 && c.launch->block.z == 3));
    CHECK(c.launch->shared_mem == 48);
    CHECK(*c.stream == 0x55);
}

TEST_CASE("copies, sets, allocations") {
    auto m = raw(GT_API_CUDA_MEMCPY_ASYNC);
    m.args[2] = 1 << 20;
    m.args[3] = 1;
    m.args[4] = 0x42;
    ApiCall c = decode_api_call(m);
    CHECK(*c.bytes == (1u << 20));
    CHECK(std::string(copy_kind_name(*c.copy_kind)) == "HtoD");
    CHECK(*c.stream == 0x42);

    auto s = raw(GT_API_CUDA_MEMSET);
    s.args[0] = 0x7000;
    s.args[2] = 99;
    CHECK(*decode_api_call(s).ptr == 0x7000);
    CHECK(*decode_api_call(s).bytes == 99);

    auto a = raw(GT_API_CUDA_MALLOC);
    a.args[1] = 4096;
    a.out_value = 0x7f00;
    CHECK(*decode_api_call(a).ptr == 0x7f00);
    CHECK(*decode_api_call(a).bytes == 4096);
}

TEST_CASE("the API table names every id and marks what each probe captures") {
    CHECK(api_name(GT_API_CUDA_LAUNCH_KERNEL_PTSZ) == "cudaLaunchKernel_ptsz");
    CHECK(api_name(GT_API_CU_LAUNCH_KERNEL_EX) == "cuLaunchKernelEx");
    CHECK(kApis[GT_API_CUDA_LAUNCH_KERNEL].caps & GT_CAP_STACK_ARGS);
    CHECK(kApis[GT_API_CUDA_MALLOC].caps & GT_CAP_OUT_PTR_ARG0);
    CHECK(api_name(GT_API_COUNT) == "unknown");
    for (size_t i = 0; i < kApis.size(); ++i) CHECK(kApis[i].id == static_cast<gt_cuda_api>(i));
}

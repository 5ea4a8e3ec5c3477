// The model: counts per process and thread, freed sizes, losses.
#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "model/trace_model.h"

using namespace gtrace;

namespace {
ApiCall call(gt_cuda_api api, uint32_t tid) {
    ApiCall c;
    c.api = api;
    c.pid = static_cast<uint32_t>(getpid());
    c.tid = tid;
    c.thread_name = "worker";
    return c;
}
} // namespace

TEST_CASE("calls are counted per process, API and thread; cudaFree learns its size from cudaMalloc") {
    TraceModel model;
    auto m = call(GT_API_CUDA_MALLOC, 1);
    m.ptr = 0x7000;
    m.bytes = 4096;
    model.record_call(m);
    auto f = call(GT_API_CUDA_FREE, 2);
    f.ptr = 0x7000;
    model.record_call(f);
    CHECK(f.bytes == 4096u);
    auto again = call(GT_API_CUDA_FREE, 2);
    again.ptr = 0x7000; // double free: the size is no longer known
    model.record_call(again);
    CHECK_FALSE(again.bytes);

    const ProcessInfo& p = model.processes().at(static_cast<uint32_t>(getpid()));
    CHECK(p.calls[GT_API_CUDA_MALLOC] == 1);
    CHECK(p.calls[GT_API_CUDA_FREE] == 2);
    CHECK(p.threads.at(2).calls == 2);
    CHECK(p.threads.at(1).name == "worker");
    CHECK(model.total_calls() == 3);
}

TEST_CASE("lost events add up every class; calls without entry state are not losses") {
    TraceModel model;
    model.counters[GT_EV_API] = 5;
    model.counters[GT_EV_PROC] = 1;
    model.counters[GT_CNT_ENTRY_STATE_FULL] = 2; // never traced: a bigger ring brings none back
    model.counters[GT_CNT_RETURN_WITHOUT_ENTRY] = 7; // not a loss: calls in flight at attach
    CHECK(model.lost_events() == 6);
    model.gpu_records_lost = 3;
    CHECK(model.lost_events() == 9);
    CHECK(std::string(counter_name(GT_CNT_ENTRY_STATE_FULL)) == "calls_without_entry_state");
    CHECK(std::string(counter_name(GT_EV_API)) == "lost_api_calls");
}

TEST_CASE("a process found at attach with its parent's command line is a forked child") {
    pid_t child = fork();
    if (child == 0) {
        pause();
        _exit(0);
    }
    TraceModel model;
    auto self = static_cast<uint32_t>(getpid());
    model.add_process(static_cast<uint32_t>(getppid()), 0, true, std::nullopt);
    model.add_process(self, static_cast<uint32_t>(getppid()), true, std::nullopt);
    const ProcessInfo& c = model.add_process(static_cast<uint32_t>(child), self, true, std::nullopt);
    CHECK(c.forked_from == self);
    CHECK_FALSE(model.find(self)->forked_from); // a different program than its parent
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
}

TEST_CASE("a fork gone before its event was read is labelled with its parent's command line") {
    pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, nullptr, 0); // no /proc entry left
    TraceModel model;
    auto self = static_cast<uint32_t>(getpid());
    const std::string parent_cmd = model.add_process(self, 0, true, std::nullopt).cmdline;
    REQUIRE_FALSE(parent_cmd.empty());
    const ProcessInfo& c = model.add_process(static_cast<uint32_t>(child), self, false, self);
    CHECK(c.cmdline == parent_cmd);
    CHECK(c.label().starts_with(fmt::format("child of {} · ", self)));
    CHECK(c.label().find("? (pid") == std::string::npos);
}

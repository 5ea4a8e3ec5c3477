// The model: counts per process and thread, freed sizes, losses.
#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "capture/lost_events.h"
#include "model/autograd_links.h"
#include "model/backward_passes.h"
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
    model.agent_ring_lost = 3;
    model.cupti_lost = 4;
    CHECK(model.bpf_ring_lost() == 6);
    CHECK(model.lost_events() == 13);
    CHECK(std::string(counter_name(GT_CNT_ENTRY_STATE_FULL)) == "calls_without_entry_state");
    CHECK(std::string(counter_name(GT_EV_API)) == "lost_api_calls");
}

TEST_CASE("lost events are split by source: BPF ring per class, agent rings, CUPTI") {
    TraceModel model;
    CHECK(lost_summary(model) == "lost events: 0");
    model.counters[GT_EV_API] = 5;
    model.counters[GT_EV_PYSTACK] = 2;
    model.counters[GT_CNT_ENTRY_STATE_FULL] = 9; // not a loss
    model.agent_ring_lost = 3;
    model.cupti_lost = 4;
    nlohmann::json f = lost_facts(model);
    CHECK(f["total"] == 14);
    CHECK(f["bpf_ring"]["total"] == 7);
    CHECK(f["bpf_ring"]["api_calls"] == 5);
    CHECK(f["bpf_ring"]["python_stacks"] == 2);
    CHECK(f["bpf_ring"]["samples"] == 0);
    CHECK(f["agent_ring"] == 3);
    CHECK(f["cupti"] == 4);
    std::string line = lost_summary(model);
    CHECK(line.rfind("WARNING: 14 events were LOST", 0) == 0);
    CHECK(line.find("BPF ring full: 7 (5 api calls, 2 python stacks), raise --buffer-size") != std::string::npos);
    CHECK(line.find("agent rings full: 3 ") != std::string::npos);
    CHECK(line.find("dropped by CUPTI: 4 ") != std::string::npos);
    model.counters = {};
    model.agent_ring_lost = 0;
    CHECK(lost_summary(model).find("BPF ring") == std::string::npos);
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

TEST_CASE("an autograd thread's call without a stack gets the stack of the one backward pass it was made in") {
    BackwardPasses passes;
    auto stack = make_py_stack({PyFrame{"train", "/job/train.py", 42}}, false);
    REQUIRE(stack);
    passes.begun(100, 100, 1000, stack);

    auto origin = passes.origin_of(100, "pt_autograd_0", 1500);
    CHECK(origin.stack == stack);
    CHECK(origin.tid == 100);
    CHECK_FALSE(passes.origin_of(100, "other_native", 1500).stack);   // not the engine's thread
    CHECK_FALSE(passes.origin_of(100, "pt_autograd_0", 900).stack);   // before the pass began
    CHECK_FALSE(passes.origin_of(200, "pt_autograd_0", 1500).stack);  // another process

    passes.begun(100, 101, 1600, stack); // a second thread in backward: which pass is unknown
    CHECK_FALSE(passes.origin_of(100, "pt_autograd_1", 1700).stack);
    passes.ended(100, 101, 1750);
    CHECK(passes.origin_of(100, "pt_autograd_1", 1800).stack == stack);

    passes.ended(100, 100, 1850);
    CHECK_FALSE(passes.origin_of(100, "pt_autograd_0", 1900).stack); // the pass is over
    // A call recorded during the first pass, before the second began, arrives after both ended
    // (the agent's records come a poll later): matched by its time.
    CHECK(passes.origin_of(100, "pt_autograd_0", 1550).stack == stack);
    CHECK_FALSE(passes.origin_of(100, "pt_autograd_0", 1700).stack); // both ran then
    auto facts = passes.facts();
    CHECK(facts["passes"] == 2);
    CHECK(facts["calls_given_the_pass_stack"] == 3);
    CHECK(facts["calls_left_without_stack_two_passes_open"] == 2);
}

TEST_CASE("backward passes: ended ones are kept for late calls, but not without bound") {
    BackwardPasses passes;
    auto stack = make_py_stack({PyFrame{"train", "/job/train.py", 42}}, false);
    for (uint64_t i = 0; i < 1000; ++i) {
        passes.begun(7, 7, i * 100, stack);
        passes.ended(7, 7, i * 100 + 50);
    }
    CHECK(passes.origin_of(7, "pt_autograd_0", 999 * 100 + 10).stack == stack); // the last pass
    CHECK_FALSE(passes.origin_of(7, "pt_autograd_0", 10).stack);                 // long forgotten
}

TEST_CASE("autograd links: a call in a backward node gets the node's number and its forward op's stack") {
    AutogradLinks links;
    auto scale = make_py_stack({PyFrame{"forward", "/job/model.py", 10}}, false);
    auto shift = make_py_stack({PyFrame{"forward", "/job/model.py", 11}}, false);
    links.forward_op(1, 0, scale);
    links.forward_op(1, 1, shift);
    // Backward on the engine's thread 2: node 1 (shift), then node 0 (scale); frames at sp 5000.
    links.node_begun(1, 2, 1, 5000, 1000);
    auto in_shift = links.link_of(1, 2, 1100); // the call arrives while the node runs (uprobes)
    REQUIRE(in_shift);
    CHECK(in_shift->sequence_nr == 1);
    CHECK(in_shift->forward_stack == shift);
    links.node_ended(1, 2, 5000, 1200);
    links.node_begun(1, 2, 0, 5000, 1300);
    links.node_ended(1, 2, 5000, 1400);
    // The agent's records come a poll later: matched by time.
    CHECK(links.link_of(1, 2, 1350)->forward_stack == scale);
    CHECK(links.link_of(1, 2, 1150)->forward_stack == shift);
    CHECK_FALSE(links.link_of(1, 2, 1250)); // between nodes
    CHECK_FALSE(links.link_of(1, 3, 1150)); // another thread ran no node
    CHECK_FALSE(links.link_of(2, 2, 1150)); // another process

    // A reentrant node nests inside another (a lower frame); the innermost has the call.
    links.node_begun(1, 2, 1, 5000, 2000);
    links.node_begun(1, 2, 0, 4000, 2100);
    CHECK(links.link_of(1, 2, 2150)->sequence_nr == 0);
    links.node_ended(1, 2, 4000, 2200);
    CHECK(links.link_of(1, 2, 2250)->sequence_nr == 1);
    // Its return not seen (an exception): the next node at the same frame ends it.
    links.node_begun(1, 2, 0, 5000, 2300);
    CHECK(links.link_of(1, 2, 2350)->sequence_nr == 0);
    CHECK(links.link_of(1, 2, 2250)->sequence_nr == 1);
    links.node_ended(1, 2, 7777, 2400); // begun before attach: nothing open at that frame
    // A node whose forward op was not seen (before attach): the number, no stack.
    links.node_begun(1, 2, 99, 5000, 2500);
    auto unseen = links.link_of(1, 2, 2550);
    REQUIRE(unseen);
    CHECK(unseen->sequence_nr == 99);
    CHECK_FALSE(unseen->forward_stack);
    auto facts = links.facts();
    CHECK(facts["forward_ops"] == 2);
    CHECK(facts["node_ends_unmatched"] == 1);
    CHECK(facts["calls_in_node_forward_op_unseen"] == 1);

    links.forget_process(1);
    CHECK_FALSE(links.link_of(1, 2, 2550));
}

TEST_CASE("autograd links: nodes and forward ops are kept within bounds") {
    AutogradLinks links;
    auto stack = make_py_stack({PyFrame{"forward", "/job/model.py", 10}}, false);
    for (uint64_t i = 0; i < AutogradLinks::kForwardOpsKept + 10; ++i) links.forward_op(1, i, stack);
    uint64_t t = 0;
    for (uint64_t i = 0; i < AutogradLinks::kNodesKept * 2; ++i, t += 100) {
        links.node_begun(1, 2, i, 5000, t);
        links.node_ended(1, 2, 5000, t + 50);
    }
    CHECK(links.link_of(1, 2, t - 100 + 10)->forward_stack); // the newest node; its forward op is kept
    CHECK_FALSE(links.link_of(1, 2, 10));                    // the oldest node let go
    links.node_begun(1, 2, 0, 5000, t + AutogradLinks::kEndedKeptNs * 2);
    CHECK_FALSE(links.link_of(1, 2, t - 100 + 10)); // ended long before: let go
    CHECK_FALSE(links.link_of(1, 2, t + AutogradLinks::kEndedKeptNs * 2 + 1)->forward_stack); // number 0: past the bound
}

TEST_CASE("autograd links: a node whose return was never seen does not hold the others forever") {
    AutogradLinks links;
    links.node_begun(1, 2, 5, 9000, 0); // an exception left it open; later nodes run deeper
    uint64_t t = 100;
    for (uint64_t i = 0; i < AutogradLinks::kNodesKept * 2; ++i, t += 100) {
        links.node_begun(1, 2, i, 5000, t);
        links.node_ended(1, 2, 5000, t + 50);
    }
    auto link = links.link_of(1, 2, 50);
    CHECK_FALSE(link); // let go with the oldest, open or not
}

// Test tool: loads gtrace's agent into a running process and detaches it, N times over, the way
// `gtrace attach` does (a borrowed thread's dlopen, a mailbox request, start, detach) but without
// the BPF side, so a test can do a hundred cycles in seconds. Every cycle forces the borrowed
// call (a no-op dlopen once the agent is loaded) to exercise the stop/restore path each time.
//
//   agent_cycles PID AGENT_PATH CYCLES
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "attach/agent_injector.h"
#include "collect/agent_channel.h"

namespace {

struct Sink : gtrace::AgentSink {
    uint32_t state = 0;
    uint64_t records = 0;
    void on_gpu_record(uint32_t, const gt_gpu_header&, int64_t) override { ++records; }
    void on_agent_state(uint32_t, const gt_agent_ring& ring) override { state = ring.state; }
};

} // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: agent_cycles PID AGENT_PATH CYCLES\n");
        return 2;
    }
    int pid = atoi(argv[1]);
    std::string agent = argv[2];
    int cycles = atoi(argv[3]);
    uint64_t total_records = 0;
    for (int i = 0; i < cycles; ++i) {
        auto channel = gtrace::AgentChannel::create(agent);
        if (!channel) {
            fprintf(stderr, "cycle %d: %s\n", i, channel.error().message.c_str());
            return 1;
        }
        if (auto r = gtrace::load_agent(pid, agent, 5000, true); !r) {
            fprintf(stderr, "cycle %d: %s\n", i, r.error().message.c_str());
            return 1;
        }
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        uint64_t mailbox = 0;
        while (!(mailbox = channel->mailbox_address(gtrace::read_maps(pid))) && std::chrono::steady_clock::now() < deadline)
            usleep(5000);
        auto asked = channel->ask(static_cast<uint32_t>(pid), mailbox, channel->config(""), true);
        if (!mailbox || !asked) {
            fprintf(stderr, "cycle %d: cannot ask the agent: %s\n", i, asked ? "not loaded" : asked.error().message.c_str());
            return 1;
        }
        Sink sink;
        while (sink.state != GT_AGENT_ACTIVE && std::chrono::steady_clock::now() < deadline) {
            auto answers = channel->poll(sink);
            for (const auto& [p, why] : answers.refused) fprintf(stderr, "cycle %d: %s\n", i, why.c_str());
            for (const auto& [p, seconds] : answers.withdrawn) fprintf(stderr, "cycle %d: offer withdrawn after %.1f s\n", i, seconds);
            usleep(5000);
        }
        if (sink.state != GT_AGENT_ACTIVE) {
            fprintf(stderr, "cycle %d: the agent did not become active (state %u)\n", i, sink.state);
            return 1;
        }
        usleep(50000); // let some GPU records flow
        channel->detach_all(sink, 3000);
        if (sink.state != GT_AGENT_DETACHED) {
            fprintf(stderr, "cycle %d: the agent did not detach (state %u)\n", i, sink.state);
            return 1;
        }
        total_records += sink.records;
    }
    printf("cycles ok %d records %llu\n", cycles, static_cast<unsigned long long>(total_records));
    return 0;
}

// A process's fork, exec, exit and departure reach every component with per-process state in one
// call each, in the order they were registered (foundation/process_observer.h).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "foundation/process_observer.h"

using namespace gtrace;

namespace {

struct Recorder final : ProcessObserver {
    Recorder(std::string n, std::vector<std::string>& log) : name(std::move(n)), log(log) {}
    void process_forked(uint32_t pid, uint32_t parent) override { log.push_back(fmt::format("{} fork {}<{}", name, pid, parent)); }
    void process_exec(uint32_t pid) override { log.push_back(fmt::format("{} exec {}", name, pid)); }
    void process_exited(uint32_t pid) override { log.push_back(fmt::format("{} exit {}", name, pid)); }
    std::string name;
    std::vector<std::string>& log;
};

struct GoneOnly final : ProcessObserver { // hears only what it implements
    explicit GoneOnly(std::vector<std::string>& log) : log(log) {}
    void process_gone(uint32_t pid) override { log.push_back(fmt::format("writer gone {}", pid)); }
    std::vector<std::string>& log;
};

} // namespace

TEST_CASE("each moment of a process reaches every observer once, in registration order") {
    std::vector<std::string> log;
    Recorder names("names", log), stacks("stacks", log);
    GoneOnly writer(log);
    ProcessObservers lifecycle;
    lifecycle.add(names);
    lifecycle.add(stacks);
    lifecycle.add(writer);
    lifecycle.forked(7, 3);
    lifecycle.exec(7);
    lifecycle.exited(7);
    lifecycle.gone(7);
    CHECK(log == std::vector<std::string>{"names fork 7<3", "stacks fork 7<3", "names exec 7", "stacks exec 7", "names exit 7",
                                          "stacks exit 7", "writer gone 7"});
}

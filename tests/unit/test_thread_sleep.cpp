// How long a thread has slept, from the scheduler's clock (discover/thread_sleep.h), on real
// processes: one asleep in nanosleep, one spinning.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "discover/thread_sleep.h"

using namespace gtrace;

namespace {

pid_t child(bool spin) {
    pid_t pid = fork();
    if (pid == 0) {
        if (spin)
            for (;;) __asm__ volatile(""); // busy on a CPU, never asleep
        for (;;) pause();
    }
    return pid;
}

void end(pid_t pid) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
}

} // namespace

TEST_CASE("a thread asleep 1.5 s is said asleep that long; a spinning one is not said asleep") {
    // A sleeper the kernel moved to another CPU has no last-run time until it runs again (said
    // not known, not "asleep since boot": seen once beside two CPU hogs): a fresh pair then.
    for (int attempt = 1;; ++attempt) {
        auto forked = std::chrono::steady_clock::now();
        pid_t sleeper = child(false), spinner = child(true);
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        auto asleep = asleep_seconds(sleeper);
        double since_fork = std::chrono::duration<double>(std::chrono::steady_clock::now() - forked).count();
        auto busy = asleep_seconds(spinner);
        end(sleeper);
        end(spinner);
        CHECK(busy.count(static_cast<uint32_t>(spinner)) == 0);
        if (!asleep.count(static_cast<uint32_t>(sleeper)) && attempt < 3) continue;
        REQUIRE(asleep.count(static_cast<uint32_t>(sleeper)) == 1);
        double s = asleep.at(static_cast<uint32_t>(sleeper));
        INFO(s << " s asleep, " << since_fork << " s since the fork");
        CHECK(s >= 1.2);
        CHECK(s <= since_fork + 0.5); // the CPUs' task clocks may drift apart a little; never by seconds
        break;
    }
}

// /proc parsing and process labels.
#include <catch2/catch.hpp>
#include <sys/sysmacros.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "discover/proc_maps.h"
#include "discover/proc_tree.h"
#include "model/trace_model.h"

using namespace gtrace;

TEST_CASE("maps lines with and without paths, deleted files, spaces in paths") {
    auto maps = parse_maps(
        "7f0000000000-7f0000001000 r-xp 00002000 08:01 1234 /usr/lib/libcudart.so.13\n"
        "7f0000001000-7f0000002000 rw-p 00000000 00:00 0 \n"
        "7f0000003000-7f0000004000 r-xp 00000000 fd:02 99 /tmp/my lib.so (deleted)\n");
    REQUIRE(maps.size() == 3);
    CHECK(maps[0].executable);
    CHECK(maps[0].offset == 0x2000);
    CHECK(maps[0].dev == makedev(8, 1));
    CHECK(maps[0].inode == 1234);
    CHECK(maps[0].path == "/usr/lib/libcudart.so.13");
    CHECK_FALSE(maps[1].is_file());
    CHECK(maps[2].path == "/tmp/my lib.so");
}

TEST_CASE("our own process: stat, cmdline, tree") {
    auto st = read_proc_stat(getpid());
    REQUIRE(st);
    CHECK(st->pid == getpid());
    CHECK(st->ppid == getppid());
    CHECK_FALSE(st->is_kernel_thread());
    CHECK(read_cmdline(getpid()).find("unit_tests") != std::string::npos);
    auto tree = list_tree(getppid());
    CHECK(std::find(tree.begin(), tree.end(), getpid()) != tree.end());
    CHECK_FALSE(read_proc_stat(999999999));
}

TEST_CASE("kthreadd is a kernel thread") {
    auto st = read_proc_stat(2);
    REQUIRE(st);
    CHECK(st->is_kernel_thread());
}

TEST_CASE("labels name rank, fork parent, command and pid") {
    ProcessInfo p;
    p.pid = 1234;
    p.cmdline = "/usr/bin/python3.11 -u train.py --lr 0.1";
    CHECK(p.label() == "python3.11 -u train.py --lr 0.1 (pid 1234)");
    p.ranks.rank = 1;
    CHECK(p.label() == "rank 1 · python3.11 -u train.py --lr 0.1 (pid 1234)");
    p.forked_from = 1000;
    CHECK(p.label() == "rank 1 · child of 1000 · python3.11 -u train.py --lr 0.1 (pid 1234)");
    ProcessInfo agent;
    agent.pid = 5;
    CHECK(p.sort_index() < agent.sort_index());
}

namespace {

// A child whose argv carries a secret: sh stays the process (the script is not one exec).
struct SecretChild {
    pid_t pid = fork();
    SecretChild() {
        if (pid == 0) {
            execl("/bin/sh", "sh", "-c", "sleep 30; :", "sh", "--password=hunter2", "--api-token", "t0k", nullptr);
            _exit(127);
        }
        for (int i = 0; i < 200 && read_cmdline(pid).find("hunter2") == std::string::npos; ++i) usleep(5000);
    }
    ~SecretChild() {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
    }
};

} // namespace

TEST_CASE("argv as read, and the model's command lines with secrets hidden unless told not to") {
    SecretChild child;
    auto argv = read_argv(child.pid);
    REQUIRE(argv == std::vector<std::string>{"sh", "-c", "sleep 30; :", "sh", "--password=hunter2", "--api-token", "t0k"});
    TraceModel redacting;
    const ProcessInfo& p = redacting.add_process(static_cast<uint32_t>(child.pid), static_cast<uint32_t>(getpid()), true, std::nullopt);
    CHECK(p.cmdline == "sh -c sleep 30; : sh --password=*** --api-token ***");
    CHECK(p.label().find("hunter2") == std::string::npos);
    TraceModel keeping(false);
    CHECK(keeping.add_process(static_cast<uint32_t>(child.pid), 0, true, std::nullopt).cmdline ==
          "sh -c sleep 30; : sh --password=hunter2 --api-token t0k");
}

TEST_CASE("a tree can leave out a subtree (gtrace's own), and each process has its real UID") {
    SecretChild child;
    auto tree = list_tree(getpid());
    CHECK(std::find(tree.begin(), tree.end(), child.pid) != tree.end());
    auto without = list_tree(getppid(), getpid());
    CHECK(std::find(without.begin(), without.end(), getpid()) == without.end());
    CHECK(std::find(without.begin(), without.end(), child.pid) == without.end());
    CHECK(read_real_uid(child.pid) == getuid());
    CHECK_FALSE(read_real_uid(999999999));
}

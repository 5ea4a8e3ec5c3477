// /proc parsing and process labels.
#include <catch2/catch.hpp>
#include <sys/sysmacros.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "discover/proc_maps.h"
#include "discover/proc_tree.h"
#include "discover/running_jobs.h"
#include "model/trace_model.h"

using namespace gtrace;

TEST_CASE("maps lines with and without paths, deleted files, spaces in paths") {
    auto maps = parse_maps(
        "7f0000000000-7f0000001000 r-xp 00002000 08:01 1234 /usr/lib/libcudart.so.13\n"
        "7f0000001000-7f0000002000 rw-p 00000000 00:00 0 \n"
        "7f0000003000-7f0000004000 r-xp 00000000 fd:02 99 /tmp/my lib.so (deleted)\n");
    REQUIRE(maps.size() == 3);
    CHECK(maps[0].executable);
    CHECK_FALSE(maps[0].writable);
    CHECK(maps[1].writable);
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

// A child whose argv carries a secret: sh stays the process (the script is not one exec). In a
// process group of its own, killed whole: its `sleep` must not outlive the test holding stdout
// (under ctest that kept the unit tests 30 s).
struct SecretChild {
    pid_t pid = fork();
    SecretChild() {
        if (pid == 0) {
            setpgid(0, 0);
            execl("/bin/sh", "sh", "-c", "sleep 30; :", "sh", "--password=hunter2", "--api-token", "t0k", nullptr);
            _exit(127);
        }
        setpgid(pid, pid); // as the child does: whichever runs first
        for (int i = 0; i < 200 && read_cmdline(pid).find("hunter2") == std::string::npos; ++i) usleep(5000);
    }
    ~SecretChild() {
        kill(-pid, SIGKILL);
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

TEST_CASE("torchrun agents however started, by their argv") {
    using V = std::vector<std::string>;
    CHECK(is_torchrun_argv(V{"torchrun", "--nproc_per_node", "2", "train.py"}));
    CHECK(is_torchrun_argv(V{"/opt/venv/bin/torchrun", "train.py"}));
    CHECK(is_torchrun_argv(V{"/usr/bin/python3", "/usr/local/bin/torchrun", "--nnodes", "1", "train.py"})); // console script
    CHECK(is_torchrun_argv(V{"python3", "-m", "torch.distributed.run", "--nproc_per_node", "2", "train.py"}));
    CHECK(is_torchrun_argv(V{"/usr/bin/python3.11", "-u", "-X", "faulthandler", "-m", "torch.distributed.launch", "t.py"}));
    CHECK(is_torchrun_argv(V{"python", "-um", "torch.distributed.run", "t.py"}));
    CHECK(is_torchrun_argv(V{"python", "-mtorch.distributed.run", "t.py"}));
    CHECK_FALSE(is_torchrun_argv(V{"python3", "-c", "import x", "-m", "torch.distributed.run"}));
    CHECK_FALSE(is_torchrun_argv(V{"python3", "train.py", "-m", "torch.distributed.run"})); // the script's arguments
    CHECK_FALSE(is_torchrun_argv(V{"python3", "-m", "torch.distributed.elastic.agent"}));
    CHECK_FALSE(is_torchrun_argv(V{"vim", "torchrun"}));
    CHECK_FALSE(is_torchrun_argv(V{"python3", "-m"}));
    CHECK_FALSE(is_torchrun_argv(V{}));
}

TEST_CASE("a CUDA runtime or driver library mapped, whatever its directory") {
    CHECK(maps_cuda_library(parse_maps("7f0000000000-7f0000001000 r-xp 00000000 08:01 1 /venv/nvidia/cuda_runtime/lib/libcudart.so.12\n")));
    CHECK(maps_cuda_library(parse_maps("7f0000000000-7f0000001000 r-xp 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libcuda.so.535.1\n")));
    CHECK(maps_cuda_library(parse_maps("7f0000000000-7f0000001000 r-xp 00000000 08:01 1 /x/cupy.libs/libcudart-a1b2c3.so.12\n")));
    CHECK_FALSE(maps_cuda_library(parse_maps("7f0000000000-7f0000001000 r-xp 00000000 08:01 1 /usr/lib/libcudnn.so.9\n"
                                             "7f0000001000-7f0000002000 r-xp 00000000 08:01 2 /usr/lib/libcupti.so.13\n")));
}

namespace {

// A fake torchrun job: an agent named torchrun (a shell) whose two ranks are shells with RANK in
// their environment, each with a child (a rank's DataLoader worker, say) that inherits it.
struct FakeJob {
    pid_t agent = fork();
    FakeJob() {
        if (agent == 0) {
            const char* script = "RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 sh -c 'sleep 30; :' & "
                                 "RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 HF_TOKEN=hunter2 sh -c 'sleep 30; :' & wait";
            execl("/bin/sh", "torchrun", "-c", script, nullptr);
            _exit(127);
        }
    }
    ~FakeJob() {
        for (int pid : list_tree(agent))
            if (pid != agent) kill(pid, SIGKILL);
        kill(agent, SIGKILL);
        waitpid(agent, nullptr, 0);
    }
};

} // namespace

TEST_CASE("find_jobs lists an agent with its ranks in rank order, not the ranks' children") {
    FakeJob job;
    std::vector<JobProcess> mine;
    for (int i = 0; i < 400; ++i) { // the shells start theirs
        mine.clear();
        for (auto& p : find_jobs(getpid()))
            if (p.job == job.agent) mine.push_back(p);
        if (mine.size() == 3 && list_tree(job.agent).size() == 5) break;
        usleep(5000);
    }
    REQUIRE(mine.size() == 3);
    CHECK(mine[0].pid == job.agent);
    CHECK(mine[0].role == JobRole::Agent);
    CHECK(mine[0].argv[0] == "torchrun");
    for (int r = 0; r < 2; ++r) {
        CHECK(mine[1 + r].role == JobRole::Rank);
        CHECK(mine[1 + r].ppid == job.agent);
        CHECK(mine[1 + r].ranks.rank == r);
        CHECK(mine[1 + r].ranks.local_rank == r);
        CHECK(mine[1 + r].ranks.world_size == 2);
        CHECK_FALSE(mine[1 + r].cuda);
    }
    for (const auto& p : find_jobs(getpid())) { // the sleeps under the ranks are theirs, not listed
        CHECK(p.ppid != mine[1].pid);
        CHECK(p.ppid != mine[2].pid);
    }
}

#include "attach/agent_placement.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <linux/openat2.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "foundation/unique_fd.h"

namespace gtrace {
namespace {

constexpr const char* kLibraryName = "libgtrace_agent.so";
constexpr int kPlaceTimeoutMs = 2000;  // the helper mounts within milliseconds
constexpr int kMappedWaitMs = 10000;   // the process dlopens within a second of the mount

// What the helper needs, all prepared before fork: after it, only async-signal-safe calls.
struct Plan {
    int root = -1;    // the process's root directory (O_PATH)
    int mnt_ns = -1;  // its mount namespace
    int tree = -1;    // a detached bind mount of the agent library
    int maps = -1;    // its /proc/PID/maps, to see the library mapped
    int report = -1;  // the pipe that tells gtrace how the mount went (an errno, 0: mounted)
    const char* dir_name = nullptr; // ".gtrace-agent-RANDOM", new in the process's /tmp
    const char* needle = nullptr;   // " MAJ:MIN INODE " of the library, as maps writes it
};

// Keeps only the fds the helper needs: gtrace's others (BPF links above all) must not outlive it.
void close_all_but(int* keep, int n) {
    std::sort(keep, keep + n);
    unsigned next = 0;
    for (int i = 0; i < n; ++i) {
        if (static_cast<unsigned>(keep[i]) > next) syscall(SYS_close_range, next, keep[i] - 1, 0);
        next = static_cast<unsigned>(keep[i]) + 1;
    }
    syscall(SYS_close_range, next, ~0u, 0);
}

bool library_mapped(int maps, const char* needle) {
    char buf[8192];
    size_t len = strlen(needle), kept = 0;
    if (lseek(maps, 0, SEEK_SET) != 0) return false;
    for (;;) {
        ssize_t got = read(maps, buf + kept, sizeof buf - kept - 1);
        if (got <= 0) return false;
        size_t n = kept + static_cast<size_t>(got);
        buf[n] = 0;
        if (strstr(buf, needle)) return true;
        kept = std::min(n, len); // a match may straddle two reads
        memmove(buf, buf + n - kept, kept);
    }
}

void sleep_ms(long ms) {
    timespec t{ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&t, nullptr);
}

// In the helper: joins the namespace and mounts the library onto a new file in a new directory
// of the process's /tmp. Returns 0 or an errno; `dir` (only once known to be ours) and `file`
// are left open for the cleanup.
int mount_library(const Plan& p, int& tmp, int& dir, int& file) {
    if (setns(p.mnt_ns, CLONE_NEWNS) != 0) return errno;
    // One component each, never a symbolic link: O_NOFOLLOW with O_DIRECTORY fails on one.
    tmp = openat(p.root, "tmp", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (tmp < 0) return errno;
    if (mkdirat(tmp, p.dir_name, 0755) != 0) return errno; // EEXIST: someone is guessing names
    int made = openat(tmp, p.dir_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st {};
    if (made < 0 || fstat(made, &st) != 0) return errno;
    // Someone else's (ours was swapped): left alone. Only root makes directories owned by root.
    if (st.st_uid != geteuid()) return EPERM;
    dir = made; // ours from here: removed at the end, refused or not
    // Nobody else may write into it (a default ACL on the container's /tmp could narrow it).
    if ((st.st_mode & 0777) != 0755) return EPERM;
    file = openat(dir, kLibraryName, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (file < 0) return errno;
    if (syscall(SYS_move_mount, p.tree, "", file, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) return errno;
    return 0;
}

[[noreturn]] void run_helper(const Plan& p) {
    signal(SIGINT, SIG_IGN); // not part of the capture the user interrupts
    signal(SIGTERM, SIG_IGN);
    setsid();
    umask(022); // the directory must be 0755 whatever gtrace's umask (027 would give 0750)
    int keep[] = {p.root, p.mnt_ns, p.tree, p.maps, p.report};
    close_all_but(keep, 5);
    int tmp = -1, dir = -1, file = -1;
    int status = mount_library(p, tmp, dir, file);
    (void)!write(p.report, &status, sizeof status);
    close(p.report);
    if (status == 0)
        for (int waited = 0; waited < kMappedWaitMs && !library_mapped(p.maps, p.needle); waited += 20) sleep_ms(20);
    // The mapping holds the library: the path can go. A process still loading it fails its dlopen.
    if (dir >= 0 && fchdir(dir) == 0) umount2(kLibraryName, MNT_DETACH | UMOUNT_NOFOLLOW);
    if (file >= 0) unlinkat(dir, kLibraryName, 0);
    if (dir >= 0) unlinkat(tmp, p.dir_name, AT_REMOVEDIR);
    _exit(0);
}

Result<std::string> bind_into(int pid, int root, const std::string& agent_path, const struct stat& library) {
    auto fail = [&](const std::string& why) {
        return make_error(ExitCode::Internal, fmt::format("cannot place the agent library in pid {}'s container ({})", pid, why));
    };
    Fd tree(static_cast<int>(syscall(SYS_open_tree, AT_FDCWD, agent_path.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)));
    if (tree.get() < 0) return fail(fmt::format("open_tree: {}", strerror(errno)));
    Fd mnt_ns(open(fmt::format("/proc/{}/ns/mnt", pid).c_str(), O_RDONLY | O_CLOEXEC));
    Fd maps(open(fmt::format("/proc/{}/maps", pid).c_str(), O_RDONLY | O_CLOEXEC));
    if (mnt_ns.get() < 0 || maps.get() < 0) return make_error(ExitCode::ProcessExited, fmt::format("pid {} exited", pid));
    uint64_t random = 0;
    if (getrandom(&random, sizeof random, 0) != sizeof random) return fail("getrandom");
    std::string dir_name = fmt::format(".gtrace-agent-{:016x}", random);
    std::string needle = fmt::format(" {:02x}:{:02x} {} ", major(library.st_dev), minor(library.st_dev), library.st_ino);
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) return fail(fmt::format("pipe: {}", strerror(errno)));
    Fd read_end(report[0]);
    Plan plan{root, mnt_ns.get(), tree.get(), maps.get(), report[1], dir_name.c_str(), needle.c_str()};
    pid_t child = fork();
    if (child == 0) {
        if (fork() == 0) run_helper(plan); // reparented: gtrace need not wait for it
        _exit(0);
    }
    close(report[1]);
    if (child < 0) return fail(fmt::format("fork: {}", strerror(errno)));
    waitpid(child, nullptr, 0);
    pollfd pfd{read_end.get(), POLLIN, 0};
    int status = ETIMEDOUT;
    if (poll(&pfd, 1, kPlaceTimeoutMs) != 1 || read(read_end.get(), &status, sizeof status) != sizeof status)
        return fail("the helper did not answer");
    if (status != 0) return fail(fmt::format("{} in its /tmp", strerror(status)));
    return "/tmp/" + dir_name + "/" + kLibraryName;
}

} // namespace

Result<std::string> agent_path_in_process(int pid, const std::string& agent_path) {
    struct stat library {};
    if (stat(agent_path.c_str(), &library) != 0)
        return make_error(ExitCode::Internal, fmt::format("agent library {} is missing; rebuild gtrace", agent_path));
    Fd root(open(fmt::format("/proc/{}/root", pid).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (root.get() < 0) return make_error(ExitCode::ProcessExited, fmt::format("pid {} exited", pid));
    // The process sees this very file at this path (no container, or one that shares it): done.
    // Resolved as the process would, inside its root; only looked at.
    open_how how{};
    how.flags = O_PATH | O_CLOEXEC;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    Fd seen(static_cast<int>(syscall(SYS_openat2, root.get(), agent_path.c_str(), &how, sizeof how)));
    struct stat st {};
    if (seen.get() >= 0 && fstat(seen.get(), &st) == 0 && st.st_dev == library.st_dev && st.st_ino == library.st_ino)
        return agent_path;
    return bind_into(pid, root.get(), agent_path, library);
}

} // namespace gtrace

#include "foundation/printable.h"
#include "capture/launch.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "discover/proc_tree.h"
#include "foundation/privilege.h"
#include "gtrace/agent.h"

namespace gtrace {
namespace {

// The child: waits until gtrace tracks it and sends the agent's settings, then execs. The
// settings arrive as "AGENT_PATH\nCONFIG" (empty: GPU off); EOF without them: gtrace failed.
// Under sudo the command runs as the user who ran sudo (`as`): gtrace records it, it does not
// lend it root.
[[noreturn]] void run_child(int settings_fd, int error_fd, const std::vector<std::string>& command,
                            const std::optional<FsCredentials>& as) {
    std::string settings;
    char buf[4096];
    ssize_t n;
    while ((n = read(settings_fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
        if (n > 0) settings.append(buf, static_cast<size_t>(n));
    close(settings_fd);
    if (settings.empty()) _exit(127);
    size_t nl = settings.find('\n');
    if (nl != std::string::npos && nl > 0) {
        setenv("CUDA_INJECTION64_PATH", settings.substr(0, nl).c_str(), 1);
        setenv(GT_AGENT_ENV_CONFIG, settings.substr(nl + 1).c_str(), 1);
        // The agent is also the NVTX injection (its ranges); one the user chose stays theirs.
        if (const char* nvtx = getenv("NVTX_INJECTION64_PATH"); nvtx && *nvtx) {
            std::string line = std::string("gtrace: NVTX_INJECTION64_PATH is set (") + nvtx +
                               "): NVTX ranges go to that tool, not into the trace\n";
            (void)!write(STDERR_FILENO, line.data(), line.size());
        } else {
            setenv("NVTX_INJECTION64_PATH", settings.substr(0, nl).c_str(), 1);
        }
    }
    signal(SIGPIPE, SIG_DFL); // gtrace ignores it; the command must not inherit that
    if (as && (setgroups(as->groups.size(), as->groups.data()) != 0 || setresgid(as->gid, as->gid, as->gid) != 0 ||
               setresuid(as->uid, as->uid, as->uid) != 0)) {
        int err = errno;
        (void)!write(error_fd, &err, sizeof err);
        _exit(127);
    }
    std::vector<char*> argv;
    for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    int err = errno;
    (void)!write(error_fd, &err, sizeof err);
    _exit(127);
}

int wait_for(pid_t child) {
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
}

std::string describe(const std::string& name, int status) {
    if (WIFEXITED(status)) return fmt::format("{} exited with status {}", name, WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return fmt::format("{} was killed by signal {}", name, WTERMSIG(status));
    return name + " ended";
}

// The capture is over: the command has exited (reaped here), or is stopped as --on-stop says.
void finish_command(pid_t child, const std::string& name, OnStop on_stop, bool tree_exited, bool quiet) {
    auto say = [&](const std::string& line) {
        if (!quiet) print_safe(stderr, "gtrace: {}\n", line);
    };
    int status = 0;
    if (tree_exited || waitpid(child, &status, WNOHANG) == child) {
        if (tree_exited) status = wait_for(child);
        return say(describe(name, status));
    }
    if (on_stop == OnStop::Keep)
        return say(fmt::format("{} (pid {}) keeps running after the capture (--on-stop keep)", name, child));
    int sig = on_stop == OnStop::Kill ? SIGKILL : SIGTERM;
    for (int pid : list_tree(child, getpid())) kill(pid, sig);
    constexpr int kGraceMs = 10000, kStepMs = 50;
    for (int waited = 0; sig == SIGTERM && waited < kGraceMs; waited += kStepMs) {
        if (waitpid(child, &status, WNOHANG) == child)
            return say(fmt::format("the capture ended before {} (pid {}); sent it SIGTERM (--on-stop term): {}", name, child,
                                   describe(name, status)));
        usleep(kStepMs * 1000);
    }
    if (sig == SIGKILL)
        return say(fmt::format("the capture ended before {} (pid {}); sent it SIGKILL (--on-stop kill): {}", name, child,
                               describe(name, wait_for(child))));
    say(fmt::format("{} (pid {}) still runs {} s after SIGTERM; it is left running (--on-stop kill stops it for sure)", name,
                    child, kGraceMs / 1000));
}

} // namespace

Result<CaptureResult> record_command(CaptureOptions options, const std::vector<std::string>& command, OnStop on_stop) {
    std::optional<FsCredentials> as;
    if (Privilege::invoker().via_sudo) as = invoker_credentials();
    int settings[2], errors[2];
    if (pipe2(settings, O_CLOEXEC) != 0 || pipe2(errors, O_CLOEXEC) != 0)
        return make_error(ExitCode::Internal, fmt::format("pipe: {}", strerror(errno)));
    pid_t child = fork();
    if (child < 0) return make_error(ExitCode::Internal, fmt::format("fork: {}", strerror(errno)));
    if (child == 0) {
        close(settings[1]);
        close(errors[0]);
        run_child(settings[0], errors[1], command, as);
    }
    close(settings[0]);
    close(errors[1]);

    options.pid = child;
    auto capture = Capture::attach(options);
    if (!capture) {
        close(settings[1]); // EOF: the child exits without running the command
        close(errors[0]);
        wait_for(child);
        return capture.error();
    }
    std::string text = options.gpu ? (*capture)->agent_library_path() + "\n" + (*capture)->agent_config() : std::string("\n");
    (void)!write(settings[1], text.data(), text.size());
    close(settings[1]);
    int exec_errno = 0;
    ssize_t got;
    while ((got = read(errors[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
    }
    close(errors[0]);
    if (got == sizeof exec_errno) {
        wait_for(child);
        return make_error(ExitCode::CommandFailed,
                          fmt::format("cannot run {}: {}; check the command and its PATH", command[0], strerror(exec_errno)));
    }
    if (!options.quiet) print_safe(stderr, "gtrace: recording {} (pid {}); {}\n", command[0], child, output_description(options));
    auto result = (*capture)->run();
    if (!result) {
        kill(child, SIGTERM);
        wait_for(child);
        return result.error();
    }
    if (!result->write_failure.empty()) {
        // The job is not gtrace's to stop: say so now, and wait for it as record always does.
        print_safe(stderr, "gtrace: error: {}; {} (pid {}) runs on untraced\n", result->write_failure, command[0], child);
        result->write_failure_reported = true;
        wait_for(child);
        return result;
    }
    finish_command(child, command[0], on_stop, result->tree_exited, options.quiet);
    return result;
}

} // namespace gtrace

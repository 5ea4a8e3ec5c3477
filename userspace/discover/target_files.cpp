#include "discover/target_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "discover/proc_tree.h"
#include "foundation/bounded_call.h"
#include "foundation/privilege.h"
#include "foundation/unique_fd.h"

namespace gtrace {
namespace {

int openat2_in_root(int root_fd, const std::string& path, uint64_t flags) {
    open_how how{};
    how.flags = flags | O_CLOEXEC;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    return static_cast<int>(syscall(SYS_openat2, root_fd, path.c_str(), &how, sizeof how));
}

// The credentials pid's file work is done with: its own file-system ids and groups. A gtrace
// that cannot take them (file capabilities, no CAP_SETUID) runs as its caller, who is then the
// process's owner (preflight refuses other users' processes there).
FsCredentials credentials_of(int pid) {
    FsCredentials c{geteuid(), getegid(), {}};
    if (auto creds = read_credentials(pid)) {
        c.uid = creds->fs_uid(), c.gid = creds->fs_gid();
        c.groups.assign(creds->groups.begin(), creds->groups.end());
    }
    return c;
}

bool same_file(const Mapping& m, const struct stat& st) {
    return static_cast<uint64_t>(st.st_dev) == m.dev && static_cast<uint64_t>(st.st_ino) == m.inode;
}

// In the worker: pid's root (-1 once it is gone), then `run(root_fd)` with pid's credentials.
template <typename T>
std::optional<T> in_target(int pid, std::function<T(int root_fd)> run) {
    FsCredentials creds = credentials_of(pid);
    return bounded_call<T>([pid, creds, run = std::move(run)]() -> T {
        Fd root(::open(fmt::format("/proc/{}/root", pid).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
        ScopedFsCredentials as(creds);
        if (!as.ok()) return T{};
        return run(root.get());
    });
}

} // namespace

Result<InputFile> open_beneath_root(int root_fd, const std::string& path) {
    // Looked at through an O_PATH handle first: a device's open would run its driver.
    Fd handle(openat2_in_root(root_fd, path, O_PATH));
    if (handle.get() < 0) return make_error(ExitCode::Usage, fmt::format("cannot open {}: {}", path, strerror(errno)));
    struct stat st {};
    if (fstat(handle.get(), &st) != 0 || !S_ISREG(st.st_mode))
        return make_error(ExitCode::Internal, fmt::format("{} is not a regular file", path));
    int fd = ::open(fmt::format("/proc/self/fd/{}", handle.get()).c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return make_error(ExitCode::Usage, fmt::format("cannot read {}: {}", path, strerror(errno)));
    return InputFile::adopt(fd, path);
}

Result<InputFile> TargetFiles::open_mapped(int pid, const Mapping& m) {
    auto opened = open_mapped(pid, {m}, [](const Mapping&) { return true; });
    if (opened.empty())
        return make_error(ExitCode::Internal, hung(pid) ? fmt::format("pid {}: its files do not answer", pid)
                                                        : fmt::format("pid {}: cannot open {} as the file it maps", pid, m.path));
    return std::move(opened.front().file);
}

std::vector<OpenedMapping> TargetFiles::open_mapped(int pid, const std::vector<Mapping>& maps,
                                                    const std::function<bool(const Mapping&)>& wanted) {
    std::vector<Mapping> asked;
    std::set<std::pair<uint64_t, uint64_t>> keys;
    for (const Mapping& m : maps)
        if (m.is_file() && wanted(m) && keys.emplace(m.dev, m.inode).second) asked.push_back(m);
    if (asked.empty() || hung(pid)) return {};
    using Opened = std::vector<std::pair<size_t, Fd>>; // index in `asked`, its file (closed if the call is given up)
    auto fds = in_target<std::shared_ptr<Opened>>(pid, [pid, asked](int root_fd) {
        auto out = std::make_shared<Opened>();
        for (size_t i = 0; i < asked.size(); ++i) {
            const Mapping& m = asked[i];
            // The mapped file itself; map_files needs CAP_SYS_ADMIN (or CAP_CHECKPOINT_RESTORE).
            auto f = open_input_file(mapped_file_path(pid, m));
            if ((!f || !same_file(m, f->stat())) && root_fd >= 0) f = open_beneath_root(root_fd, m.path);
            // A process gone since (its samples and kernels are named after its exit): the path
            // as gtrace sees it, kept only if it is the very file the process mapped.
            if ((!f || !same_file(m, f->stat())) && root_fd < 0) f = open_input_file(m.path);
            if (!f || !same_file(m, f->stat())) continue; // not the file mapped (replaced, or a link elsewhere)
            out->emplace_back(i, Fd(dup(f->fd())));
        }
        return out;
    });
    std::vector<OpenedMapping> result;
    if (!fds) {
        hung_.insert(pid);
        return result;
    }
    if (!*fds) return result;
    for (auto& [i, fd] : **fds)
        if (auto f = InputFile::adopt(fd.release(), asked[i].path)) result.push_back({asked[i], std::move(*f)});
    return result;
}

std::vector<std::pair<std::string, InputFile>> TargetFiles::open_in_root(int pid, const std::vector<std::string>& paths) {
    std::vector<std::pair<std::string, InputFile>> result;
    if (paths.empty() || hung(pid)) return result;
    using Opened = std::vector<std::pair<size_t, Fd>>;
    auto fds = in_target<std::shared_ptr<Opened>>(pid, [paths](int root_fd) {
        auto out = std::make_shared<Opened>();
        if (root_fd < 0) return out; // gone
        for (size_t i = 0; i < paths.size(); ++i)
            if (auto f = open_beneath_root(root_fd, paths[i])) out->emplace_back(i, Fd(dup(f->fd())));
        return out;
    });
    if (!fds) {
        hung_.insert(pid);
        return result;
    }
    if (!*fds) return result;
    for (auto& [i, fd] : **fds)
        if (auto f = InputFile::adopt(fd.release(), paths[i])) result.emplace_back(paths[i], std::move(*f));
    return result;
}

std::vector<std::string> TargetFiles::list_in_root(int pid, const std::vector<std::string>& dirs,
                                                   const std::function<bool(const std::string&)>& wanted) {
    if (dirs.empty() || hung(pid)) return {};
    std::vector<std::string> bounded(dirs.begin(), dirs.begin() + static_cast<long>(std::min(dirs.size(), kMaxDirectories)));
    auto names = in_target<std::shared_ptr<std::vector<std::string>>>(pid, [bounded, wanted](int root_fd) {
        auto out = std::make_shared<std::vector<std::string>>();
        if (root_fd < 0) return out; // gone
        for (const std::string& dir : bounded) {
            int fd = openat2_in_root(root_fd, dir, O_RDONLY | O_DIRECTORY | O_NONBLOCK);
            if (fd < 0) continue;
            DIR* d = fdopendir(fd);
            if (!d) {
                close(fd);
                continue;
            }
            size_t read_entries = 0;
            while (dirent* e = readdir(d)) {
                if (++read_entries > kMaxEntriesPerDir) break;
                std::string name = e->d_name;
                if (name != "." && name != ".." && wanted(name)) out->push_back(dir + "/" + name);
            }
            closedir(d);
        }
        return out;
    });
    if (!names) {
        hung_.insert(pid);
        return {};
    }
    return *names ? **names : std::vector<std::string>{};
}

} // namespace gtrace

#include "foundation/printable.h"
#include "output/stale_captures.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "discover/proc_tree.h"
#include "foundation/output_file.h"
#include "output/capture_registry.h"

namespace gtrace {
namespace {

constexpr const char* kShmPrefix = "gtrace-";

// The names in a directory (without "." and "..").
std::vector<std::string> names_in(int dir_fd) {
    std::vector<std::string> names;
    int fd = dup(dir_fd);
    DIR* d = fd >= 0 ? fdopendir(fd) : nullptr;
    if (!d) {
        if (fd >= 0) close(fd);
        return names;
    }
    rewinddir(d);
    while (dirent* e = readdir(d))
        if (std::string n = e->d_name; n != "." && n != "..") names.push_back(std::move(n));
    closedir(d);
    return names;
}

bool gtrace_alive(int pid) {
    auto st = read_proc_stat(pid);
    return st && st->comm == "gtrace" && st->state != 'Z';
}

// /dev/shm/gtrace-<pid>: request files and rings of a gtrace before the agent channel moved off
// /dev/shm. The directory is root's and holds only files; anything else there is left alone.
void remove_dead_shm_dirs() {
    if (geteuid() != 0) return;
    int shm = open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (shm < 0) return;
    for (const auto& name : names_in(shm)) {
        if (!name.starts_with(kShmPrefix)) continue;
        std::string digits = name.substr(std::string_view(kShmPrefix).size());
        if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
        int pid = atoi(digits.c_str());
        if (pid == getpid() || gtrace_alive(pid)) continue;
        struct stat st {};
        if (fstatat(shm, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0) continue;
        int dir = openat(shm, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dir < 0) continue;
        for (const auto& entry : names_in(dir)) unlinkat(dir, entry.c_str(), 0); // a directory in it stays, and so does it
        close(dir);
        unlinkat(shm, name.c_str(), AT_REMOVEDIR);
    }
    close(shm);
}

} // namespace

void sweep_stale_captures(bool quiet) {
    if (auto registry = CaptureRegistry::open()) {
        for (const auto& e : registry->entries()) {
            if (e.running()) continue;
            struct stat st {};
            // Gone (completed, removed), or the same path now written by a capture that runs.
            if (lstat(e.partial.c_str(), &st) != 0 || partial_in_use(e.partial)) {
                registry->remove(e);
                continue;
            }
            if (!quiet)
                print_safe(stderr, "gtrace: a capture killed earlier left {}; complete it with: gtrace recover {}\n", e.partial, e.partial);
        }
    }
    remove_dead_shm_dirs();
}

} // namespace gtrace

#include "foundation/privilege.h"

#include <grp.h>
#include <pwd.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "foundation/numbers.h"

namespace gtrace {
namespace {

struct Mode {
    Invoker invoker;
    bool privileged = false;
    bool effective_root = false;
    std::string reason;
};

Mode decide_mode() {
    Mode m;
    uid_t ruid = 0, euid = 0, suid = 0;
    gid_t rgid = 0, egid = 0, sgid = 0;
    getresuid(&ruid, &euid, &suid);
    getresgid(&rgid, &egid, &sgid);
    m.effective_root = euid == 0;
    m.invoker = {ruid, rgid, false};
    if (auto sudo = sudo_invoker()) {
        m.invoker = {sudo->first, sudo->second, true};
        m.privileged = true, m.reason = fmt::format("run through sudo by uid {}", sudo->first);
    } else if (getauxval(AT_SECURE)) {
        m.privileged = true, m.reason = "a setuid or file-capability binary";
    } else if (ruid != euid || rgid != egid) {
        m.privileged = true, m.reason = fmt::format("effective ids {}:{} over real ids {}:{}", euid, egid, ruid, rgid);
    }
    return m;
}

Mode& mode() {
    static Mode m = decide_mode();
    return m;
}

} // namespace

std::optional<std::pair<uid_t, gid_t>> sudo_invoker() {
    if (geteuid() != 0) return std::nullopt;
    auto uid = parse_decimal<uint32_t>(getenv("SUDO_UID")), gid = parse_decimal<uint32_t>(getenv("SUDO_GID"));
    if (!uid || !gid || *uid == UINT32_MAX || *gid == UINT32_MAX) return std::nullopt; // -1 means "unchanged" to the kernel
    return std::make_pair(static_cast<uid_t>(*uid), static_cast<gid_t>(*gid));
}

void Privilege::decide() { mode() = decide_mode(); }

void Privilege::acting_on(uid_t owner) {
    Mode& m = mode();
    if (m.privileged || !m.effective_root || owner == m.invoker.uid) return;
    m.privileged = true;
    m.reason = fmt::format("root acting on a process of uid {}", owner);
}

bool Privilege::privileged() { return mode().privileged; }
const std::string& Privilege::reason() { return mode().reason; }
const Invoker& Privilege::invoker() { return mode().invoker; }
bool Privilege::effective_root() { return mode().effective_root; }

const char* own_env(const char* name) { return Privilege::privileged() ? nullptr : getenv(name); }

Result<std::string> check_root_owned_path(const std::string& path) {
    char resolved[PATH_MAX];
    if (!realpath(path.c_str(), resolved))
        return make_error(ExitCode::Usage, fmt::format("{}: {}", path, strerror(errno)));
    std::string real = resolved;
    struct stat st {};
    if (stat(real.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
        return make_error(ExitCode::Usage, fmt::format("{} is not a regular file", real));
    auto unsafe = [](const struct stat& s) { return s.st_uid != 0 || (s.st_mode & (S_IWGRP | S_IWOTH)) != 0; };
    if (unsafe(st))
        return make_error(ExitCode::Usage, fmt::format("{} is {}; a privileged gtrace loads only root's files into other processes",
                                                       real, st.st_uid != 0 ? fmt::format("owned by uid {}", st.st_uid)
                                                                            : std::string("writable by group or others")));
    // Every directory above it, up to /: no one but root can rename or replace what it holds.
    for (std::string dir = real.substr(0, real.rfind('/'));; dir = dir.substr(0, dir.rfind('/'))) {
        std::string shown = dir.empty() ? "/" : dir;
        if (stat(shown.c_str(), &st) != 0)
            return make_error(ExitCode::Usage, fmt::format("{}: {}", shown, strerror(errno)));
        if (unsafe(st))
            return make_error(ExitCode::Usage,
                              fmt::format("{} lies in {}, which is {}; a privileged gtrace loads only files no one but root can change",
                                          real, shown, st.st_uid != 0 ? fmt::format("owned by uid {}", st.st_uid)
                                                                      : std::string("writable by group or others")));
        if (dir.empty()) break;
    }
    return real;
}

FsCredentials invoker_credentials() {
    const Invoker& who = Privilege::invoker();
    FsCredentials c{who.uid, who.gid, {who.gid}};
    long size = sysconf(_SC_GETPW_R_SIZE_MAX);
    std::string buf(size > 0 ? static_cast<size_t>(size) : 16384, '\0');
    struct passwd pw {}, *found = nullptr;
    if (getpwuid_r(who.uid, &pw, buf.data(), buf.size(), &found) != 0 || !found) return c;
    int n = 64;
    for (int tries = 0; tries < 4; ++tries) {
        std::vector<gid_t> groups(static_cast<size_t>(n));
        int got = n;
        if (getgrouplist(pw.pw_name, who.gid, groups.data(), &got) >= 0) {
            groups.resize(static_cast<size_t>(got));
            c.groups = std::move(groups);
            return c;
        }
        n = std::max(got, n * 4);
    }
    return c;
}

ScopedFsCredentials::ScopedFsCredentials(const FsCredentials& c) {
    // setfsuid(-1) changes nothing and returns the current one.
    old_uid_ = static_cast<uid_t>(syscall(SYS_setfsuid, -1));
    old_gid_ = static_cast<gid_t>(syscall(SYS_setfsgid, -1));
    if (old_uid_ == c.uid && old_gid_ == c.gid) return; // already them (a user's own gtrace)
    int n = getgroups(0, nullptr);
    old_groups_.resize(n > 0 ? static_cast<size_t>(n) : 0);
    if (n > 0 && getgroups(n, old_groups_.data()) != n) old_groups_.clear();
    active_ = true;
    // Raw calls: glibc's setgroups() changes every thread of the process; the kernel's, only this one.
    ok_ = syscall(SYS_setgroups, c.groups.size(), c.groups.data()) == 0;
    syscall(SYS_setfsgid, c.gid);
    syscall(SYS_setfsuid, c.uid);
    ok_ = ok_ && static_cast<uid_t>(syscall(SYS_setfsuid, -1)) == c.uid && static_cast<gid_t>(syscall(SYS_setfsgid, -1)) == c.gid;
}

ScopedFsCredentials::~ScopedFsCredentials() {
    if (!active_) return;
    syscall(SYS_setfsuid, old_uid_); // back to root: the file capabilities come back with it
    syscall(SYS_setfsgid, old_gid_);
    syscall(SYS_setgroups, old_groups_.size(), old_groups_.data());
}

AsInvoker::AsInvoker() {
    const Invoker& who = Privilege::invoker();
    if (!who.via_sudo || !Privilege::effective_root()) return;
    static std::mutex mutex;
    static std::optional<FsCredentials> credentials; // the group database, looked up once per user
    std::lock_guard lock(mutex);
    if (!credentials || credentials->uid != who.uid || credentials->gid != who.gid) credentials = invoker_credentials();
    scoped_.emplace(*credentials);
}

} // namespace gtrace

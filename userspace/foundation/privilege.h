// Who gtrace acts for, and whether it holds more privilege than that user: the privileged mode.
// gtrace runs as root (directly or through sudo) or with file capabilities on shared hosts, so
// what its caller hands it — the environment above all — may come from a user who must not gain
// root through it. The mode is decided once, at the start of a command, before anything reads
// the environment, from the process's own credentials:
//  - AT_SECURE (a setuid or setcap'd binary), or effective ids that differ from the real ones;
//  - root with SUDO_UID set (sudo, or a root shell sudo started);
//  - root acting on a process another user owns (attach/dump --pid of someone else's job).
// In the mode gtrace reads none of its own variables (GTRACE_*), runs no helper found through
// PATH, and loads into a target only libraries that root owns on a path no one else can change.
#pragma once
#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "foundation/result.h"

namespace gtrace {

// The user gtrace acts for: the one who ran sudo, or the process's real user.
struct Invoker {
    uid_t uid = 0;
    gid_t gid = 0;
    bool via_sudo = false;
    bool real_root() const { return uid == 0 && !via_sudo; }
};

// Running as root with numeric SUDO_UID and SUDO_GID: the user who ran sudo.
std::optional<std::pair<uid_t, gid_t>> sudo_invoker();

class Privilege {
public:
    // From the process's credentials and SUDO_UID/SUDO_GID; called first thing by main (and by
    // tests that change what it reads). Later calls decide again.
    static void decide();
    // The command acts on a process of `owner` (its real uid): root acting for another user's
    // process enters the mode. Raises the mode only; call before anything reads GTRACE_*.
    static void acting_on(uid_t owner);

    static bool privileged();
    // Why, for messages: "run through sudo", "a setuid or file-capability binary", ...
    static const std::string& reason();
    static const Invoker& invoker();
    // Whether this process has root's effective uid (else it runs on capabilities).
    static bool effective_root();
};

// A variable of gtrace's own environment (GTRACE_*, read by gtrace for itself): nullptr in the
// privileged mode, where the environment is the caller's to set.
const char* own_env(const char* name);

// Whether `path` may be loaded into another user's process by a privileged gtrace: a regular
// file owned by root, neither it nor any directory above it writable by group or others, nor
// owned by anyone but root. Its real path (links resolved: what to load), or the reason
// (ExitCode::Usage), naming the path that fails.
Result<std::string> check_root_owned_path(const std::string& path);

// Credentials to do file-system work as another user: its uid, primary gid and groups.
struct FsCredentials {
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;
};
// The invoker's (under sudo: the user who ran it, with the groups the group database gives).
FsCredentials invoker_credentials();

// For the lifetime of the object, this thread's file-system uid, gid and groups are `c`'s
// (raw per-thread system calls: other threads keep root's). A root thread that becomes a user
// this way also loses the capabilities that bypass file permissions, until it is restored.
class ScopedFsCredentials {
public:
    explicit ScopedFsCredentials(const FsCredentials& c);
    ~ScopedFsCredentials();
    ScopedFsCredentials(const ScopedFsCredentials&) = delete;
    ScopedFsCredentials& operator=(const ScopedFsCredentials&) = delete;
    bool ok() const { return ok_; }

private:
    bool active_ = false, ok_ = true;
    uid_t old_uid_ = 0;
    gid_t old_gid_ = 0;
    std::vector<gid_t> old_groups_;
};

// Outputs are made with the invoker's file-system credentials under sudo (so the user gets
// exactly the files they could have made themselves, and none where they cannot write);
// nothing changes otherwise. Held around each check, create, rename and unlink of an output.
class AsInvoker {
public:
    AsInvoker();
    bool ok() const { return !scoped_ || scoped_->ok(); }

private:
    std::optional<ScopedFsCredentials> scoped_;
};

} // namespace gtrace

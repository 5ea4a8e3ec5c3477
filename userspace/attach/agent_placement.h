// Where a process can open gtrace's agent library. In a container (a mount namespace of its own,
// or a chroot) gtrace's path may not exist there, or name another file. Then the library itself
// is bind-mounted into the process's mount namespace, onto an empty file in a directory gtrace
// creates in the process's /tmp: the process maps the very inode that gtrace probes and whose
// mailbox it looks for (by device and inode). A helper process lives on in that namespace until
// the library is mapped (at most 10 s) and then removes the mount, the file and the directory.
//
// A container's files may be hostile: no symbolic link is followed, the directory must be new
// and ours, and the mount goes onto the file descriptor of the file just created.
#pragma once
#include <string>

#include "foundation/result.h"

namespace gtrace {

// The path pid should dlopen to load the library at `agent_path` (this process's view of it).
Result<std::string> agent_path_in_process(int pid, const std::string& agent_path);

} // namespace gtrace

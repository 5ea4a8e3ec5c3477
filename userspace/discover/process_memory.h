// Reading another process's memory without stopping it (process_vm_readv): a read that faults
// fails instead of crashing anything.
#pragma once
#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

namespace gtrace {

inline bool read_process_memory(pid_t pid, uint64_t addr, void* out, size_t len) {
    iovec local{out, len}, remote{reinterpret_cast<void*>(addr), len};
    return process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(len);
}

template <typename T>
bool read_process_value(pid_t pid, uint64_t addr, T& out) {
    return read_process_memory(pid, addr, &out, sizeof out);
}

} // namespace gtrace

// Multi-uprobe links (BPF_TRACE_UPROBE_MULTI, kernel 6.6+): one BPF_LINK_CREATE attaches a program
// to many offsets of one file. libbpf 1.1 predates them, so the syscall is made here.
#pragma once
#include <cstdint>

namespace gtrace {

inline constexpr uint32_t kTraceUprobeMulti = 48;   // enum bpf_attach_type BPF_TRACE_UPROBE_MULTI
inline constexpr uint32_t kTraceUprobeSession = 57; // BPF_TRACE_UPROBE_SESSION (kernel 6.13+)

// Returns the link's fd, or -1 with errno set. cookies may be null (all zero). `attach_type`:
// kTraceUprobeMulti (entries, or returns with at_return) or kTraceUprobeSession (both, one program).
int create_uprobe_multi_link(int prog_fd, const char* path, const uint64_t* offsets, const uint64_t* cookies,
                             uint32_t count, bool at_return, uint32_t attach_type = kTraceUprobeMulti);

} // namespace gtrace

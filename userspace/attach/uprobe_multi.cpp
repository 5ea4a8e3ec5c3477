#include "attach/uprobe_multi.h"

#include <linux/bpf.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace gtrace {
namespace {

constexpr uint32_t kUprobeMultiReturn = 1; // BPF_F_UPROBE_MULTI_RETURN

// The layout of bpf_attr.link_create.uprobe_multi, from the kernel's UAPI.
struct LinkCreateUprobeMulti {
    uint32_t prog_fd, target_fd, attach_type, flags;
    uint64_t path, offsets, ref_ctr_offsets, cookies;
    uint32_t cnt, multi_flags, pid, pad;
};

} // namespace

int create_uprobe_multi_link(int prog_fd, const char* path, const uint64_t* offsets, const uint64_t* cookies,
                             uint32_t count, bool at_return, uint32_t attach_type) {
    LinkCreateUprobeMulti attr{};
    attr.prog_fd = static_cast<uint32_t>(prog_fd);
    attr.attach_type = attach_type;
    attr.path = reinterpret_cast<uint64_t>(path);
    attr.offsets = reinterpret_cast<uint64_t>(offsets);
    attr.cookies = reinterpret_cast<uint64_t>(cookies);
    attr.cnt = count;
    attr.multi_flags = at_return ? kUprobeMultiReturn : 0;
    return static_cast<int>(syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof attr));
}

} // namespace gtrace

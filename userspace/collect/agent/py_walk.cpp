#include "collect/agent/py_walk.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstring>

namespace gtrace::agent {
namespace {

constexpr uint64_t kHashMul = 0x9e3779b97f4a7c15ull; // as bpf/pystack.bpf.h: the ids must agree
constexpr int kMaxWalk = GT_PY_MAX_FRAMES + 32;       // C-stack shim frames are walked, not kept
constexpr int kWalksToCheck = 32;

} // namespace

void PyWalker::set_layout(const gt_py_layout& layout, uint32_t pid) {
    state_.store(kChecking, std::memory_order_relaxed);
    checked_walks_.store(0, std::memory_order_relaxed);
    layout_ = layout;
    pid_ = pid;
    code_type_ = reinterpret_cast<uint64_t>(dlsym(RTLD_DEFAULT, "PyCode_Type"));
    if (!code_type_) state_.store(kRefused, std::memory_order_relaxed); // nothing to check against
}

bool PyWalker::read(uint64_t addr, void* out, size_t len, bool in_place) const {
    if (!addr) return false;
    if (in_place) {
        std::memcpy(out, reinterpret_cast<const void*>(addr), len);
        return true;
    }
    iovec local{out, len}, remote{reinterpret_cast<void*>(addr), len};
    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(len);
}

PyWalkResult PyWalker::walk(gt_py_frame* frames) {
    PyWalkResult r;
    int state = state_.load(std::memory_order_acquire);
    if (state == kRefused || !layout_.epoch) return r;
    const bool in_place = state == kTrusted;
    const gt_py_layout& l = layout_;
    int key = -1;
    if (!read(l.tss_key_addr, &key, sizeof key, in_place) || key < 0) {
        r.status = GT_PY_READ_FAILED;
        return r;
    }
    uint64_t tstate = reinterpret_cast<uint64_t>(pthread_getspecific(static_cast<pthread_key_t>(key)));
    if (!tstate) {
        r.status = GT_PY_NO_THREAD_STATE;
        return r;
    }
    bool ok = true;
    auto u64 = [&](uint64_t addr) {
        uint64_t v = 0;
        ok = ok && read(addr, &v, sizeof v, in_place);
        return v;
    };
    uint64_t frame = u64(tstate + l.tstate_frame);
    if (frame && l.cframe_frame != GT_PY_NO_OFFSET) frame = u64(frame + l.cframe_frame);
    uint64_t hash = 0;
    for (int i = 0; ok && frame && i < kMaxWalk; ++i) {
        uint64_t code = u64(frame + l.frame_code);
        uint64_t instr = 0;
        if (l.instr_is_pointer) {
            instr = u64(frame + l.frame_instr);
        } else {
            int lasti = 0;
            ok = ok && read(frame + l.frame_instr, &lasti, sizeof lasti, in_place);
            instr = static_cast<uint64_t>(static_cast<int64_t>(lasti));
        }
        uint8_t owner = 0;
        if (l.frame_owner != GT_PY_NO_OFFSET) ok = ok && read(frame + l.frame_owner, &owner, 1, in_place);
        uint64_t previous = u64(frame + l.frame_previous);
        if (!ok) break;
        if (l.frame_owner != GT_PY_NO_OFFSET && owner == l.owner_c_stack) {
            frame = previous; // a shim frame owned by the C stack: not a Python frame
            continue;
        }
        if (r.nframes >= GT_PY_MAX_FRAMES) {
            r.truncated = true;
            break;
        }
        if (l.code_tagged) code &= ~1ull;
        if (!in_place && u64(code + 8) != code_type_) { // ob_type: the layout points elsewhere
            state_.store(kRefused, std::memory_order_release);
            r.status = GT_PY_READ_FAILED;
            return r;
        }
        frames[r.nframes] = {code, instr};
        hash = ((hash ^ code) * kHashMul ^ instr) * kHashMul;
        ++r.nframes;
        frame = previous;
    }
    if (!ok) {
        r.status = GT_PY_READ_FAILED;
        if (!in_place) state_.store(kRefused, std::memory_order_release); // fails while checking: refused
        return r;
    }
    if (frame && !r.truncated) r.truncated = true; // more frames than the walk may visit
    if (!in_place && r.nframes && checked_walks_.fetch_add(1, std::memory_order_relaxed) + 1 >= kWalksToCheck)
        state_.store(kTrusted, std::memory_order_release);
    hash = (hash ^ (uint64_t{pid_} << 32 | l.epoch) ^ uint64_t{r.truncated}) * kHashMul;
    r.id = hash ? hash : 1;
    r.status = GT_PY_OK;
    return r;
}

} // namespace gtrace::agent

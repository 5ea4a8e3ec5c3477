// Kept apart from <signal.h>: the kernel's sigcontext layout comes from <asm/sigcontext.h>.
#include "attach/sigreturn_frame.h"

#include <asm/sigcontext.h>
#include <asm/unistd.h>

#include <cstring>

namespace gtrace {
namespace {

// The kernel's struct ucontext on x86-64 (asm-generic/ucontext.h), not glibc's ucontext_t.
struct KernelStack {
    uint64_t sp;
    int32_t flags;
    int32_t pad;
    uint64_t size;
};
struct KernelUcontext {
    uint64_t flags;
    uint64_t link;
    KernelStack stack;
    sigcontext_64 mcontext;
    uint64_t sigmask;
};
constexpr uint64_t kUcFpXstate = 0x1, kUcSigcontextSs = 0x2, kUcStrictRestoreSs = 0x4;
constexpr size_t kSiginfoBytes = 128;
constexpr size_t kRedZone = 128;
// sigaltstack flags the kernel rejects: rt_sigreturn then leaves the thread's alternate signal
// stack as it is (a valid stack_t here would replace it).
constexpr int32_t kKeepAltStack = 0x7fff0000;

constexpr long kErestartSys = 512, kErestartNoIntr = 513, kErestartNoHand = 514, kErestartRestartBlock = 516;

uint64_t align_down(uint64_t v, uint64_t a) { return v & ~(a - 1); }

} // namespace

BorrowedCall prepare_borrowed_call(const user_regs_struct& saved, const std::vector<uint8_t>& xstate, uint64_t sigmask,
                                   uint64_t function, uint64_t arg1, const std::string& data, uint64_t trampoline) {
    // Where the thread will resume: an interrupted system call is restarted as the kernel
    // would have done on its way back to user space (no handler runs here).
    uint64_t resume_ip = saved.rip, resume_ax = saved.rax;
    long ret = -static_cast<long>(saved.rax);
    if (static_cast<int64_t>(saved.orig_rax) >= 0) {
        if (ret == kErestartSys || ret == kErestartNoIntr || ret == kErestartNoHand) {
            resume_ip -= 2; // the syscall instruction
            resume_ax = saved.orig_rax;
        } else if (ret == kErestartRestartBlock) {
            resume_ip -= 2;
            resume_ax = __NR_restart_syscall;
        }
    }

    // The FPU area: the regset carries the software bytes (magic1, sizes) in its legacy area;
    // the kernel also wants magic2 right after the state.
    std::vector<uint8_t> fp = xstate;
    bool has_xstate = false;
    if (fp.size() >= 512) {
        _fpx_sw_bytes sw{};
        std::memcpy(&sw, fp.data() + 464, sizeof sw);
        if (sw.magic1 == FP_XSTATE_MAGIC1 && sw.xstate_size <= fp.size()) {
            fp.resize(sw.xstate_size + 4);
            uint32_t magic2 = FP_XSTATE_MAGIC2;
            std::memcpy(fp.data() + sw.xstate_size, &magic2, 4);
            has_xstate = true;
        } else {
            fp.resize(512);
        }
    }

    uint64_t top = align_down(saved.rsp - kRedZone, 64);
    uint64_t data_at = align_down(top - (data.size() + 1), 64);
    uint64_t fp_at = align_down(data_at - fp.size(), 64);
    size_t frame_bytes = 8 + sizeof(KernelUcontext) + kSiginfoBytes;
    // rt_sigreturn finds the frame 8 bytes below the stack pointer left by the `ret` that
    // consumed the return address; at the function's entry rsp % 16 must be 8.
    uint64_t frame_at = align_down(fp_at - frame_bytes, 16) - 8;

    BorrowedCall call;
    call.stack_base = frame_at;
    call.stack.assign(top - frame_at, 0);
    auto put = [&](uint64_t addr, const void* src, size_t n) { std::memcpy(call.stack.data() + (addr - frame_at), src, n); };
    put(data_at, data.c_str(), data.size() + 1);
    if (!fp.empty()) put(fp_at, fp.data(), fp.size());

    KernelUcontext uc{};
    uc.flags = (has_xstate ? kUcFpXstate : 0) | kUcSigcontextSs | kUcStrictRestoreSs;
    uc.stack.flags = kKeepAltStack;
    sigcontext_64& m = uc.mcontext;
    m.r8 = saved.r8, m.r9 = saved.r9, m.r10 = saved.r10, m.r11 = saved.r11;
    m.r12 = saved.r12, m.r13 = saved.r13, m.r14 = saved.r14, m.r15 = saved.r15;
    m.di = saved.rdi, m.si = saved.rsi, m.bp = saved.rbp, m.bx = saved.rbx;
    m.dx = saved.rdx, m.ax = resume_ax, m.cx = saved.rcx, m.sp = saved.rsp;
    m.ip = resume_ip, m.flags = saved.eflags;
    m.cs = static_cast<uint16_t>(saved.cs), m.ss = static_cast<uint16_t>(saved.ss);
    m.fpstate = fp.empty() ? 0 : fp_at;
    uc.sigmask = sigmask;
    put(frame_at, &trampoline, 8);
    put(frame_at + 8, &uc, sizeof uc);

    call.regs = saved;
    call.regs.rip = function;
    call.regs.rdi = data_at;
    call.regs.rsi = arg1;
    call.regs.rax = 0;
    call.regs.rsp = frame_at; // [rsp] = return address = the sigreturn trampoline
    call.regs.orig_rax = static_cast<uint64_t>(-1); // not in a system call any more: no restart
    return call;
}

} // namespace gtrace

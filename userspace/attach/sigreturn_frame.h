// An rt_sigreturn frame that puts a thread back exactly as it was: general registers, the full
// extended FPU state, its signal mask, and an interrupted system call set up to restart the way
// the kernel would have restarted it. A function called in a borrowed thread "returns" into
// the C library's sigreturn trampoline with this frame on the stack, so the thread resumes its
// own work by itself — whether or not gtrace is still there to watch (kill -9 included).
#pragma once
#include <sys/user.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gtrace {

struct BorrowedCall {
    std::vector<uint8_t> stack;  // bytes to write at `stack_base` in the target
    uint64_t stack_base = 0;
    user_regs_struct regs{};     // registers that start the call
};

// Lays out, below the thread's red zone: `data` (a C string passed as the first argument), the
// saved FPU state, and the sigreturn frame whose first word is the return address `trampoline`.
// `xstate` is the NT_X86_XSTATE regset; `sigmask` the thread's blocked signals.
BorrowedCall prepare_borrowed_call(const user_regs_struct& saved, const std::vector<uint8_t>& xstate, uint64_t sigmask,
                                   uint64_t function, uint64_t arg1, const std::string& data, uint64_t trampoline);

} // namespace gtrace

// Test library for the call-site finder (attach/call_sites): known calls to an exported function,
// through the PLT as in any shared library, with the second argument set by an immediate, by a
// variable, and in a tail call. Built with -O2; the unit test checks what the finder reports.
#include <atomic>

std::atomic<int> g_after{0};

extern "C" __attribute__((noinline, visibility("default"))) void gt_target(void* self, int scope) {
    __asm__ volatile("" : : "r"(self), "r"(scope) : "memory");
}

extern "C" __attribute__((noinline, visibility("default"))) void gt_caller_user(void* p) {
    gt_target(p, 7);
    g_after.fetch_add(1); // keeps the call a call, not a tail call
}

extern "C" __attribute__((noinline, visibility("default"))) void gt_caller_other(void* p) {
    gt_target(p, 2);
    g_after.fetch_add(1);
}

extern "C" __attribute__((noinline, visibility("default"))) void gt_caller_variable(void* p, int scope) {
    gt_target(p, scope);
    g_after.fetch_add(1);
}

extern "C" __attribute__((noinline, visibility("default"))) void gt_caller_tail(void* p) { gt_target(p, 7); }

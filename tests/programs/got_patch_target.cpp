// A library whose one function calls an imported libc function through its PLT: the unit test of
// the agent's GOT redirection (tests/unit/test_got_patch.cpp) loads it built lazily and with
// -z now (its GOT then read-only after relocation: RELRO).
#include <unistd.h>

extern "C" __attribute__((visibility("default"))) int got_patch_target_call() { return static_cast<int>(getppid()); }

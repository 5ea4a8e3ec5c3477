// Test hooks: environment variables (GTRACE_TEST_*) through which the runtime cases provoke the
// races and failures a test cannot force otherwise (a slow host, a late answer, a missing kernel
// feature). They are compiled in only when CMake's GTRACE_TEST_HOOKS is ON — the test build that
// scripts/build.sh makes; in a release build (the package) each hook is a constant nullptr and
// its name is not in the binary (tests/runtime/security_attacks.py checks both binaries). Even
// compiled in, a privileged gtrace reads none of them (own_env).
#pragma once
#include <cstdlib>
#include <optional>

#include "foundation/numbers.h"

#ifdef GTRACE_TEST_HOOKS
#include "foundation/privilege.h"
// In gtrace: the variable of gtrace's own environment.
#define GTRACE_TEST_HOOK(name) ::gtrace::own_env("GTRACE_TEST_" name)
// In the agent, inside the traced process: the process's environment.
#define GTRACE_TEST_HOOK_IN_TARGET(name) ::getenv("GTRACE_TEST_" name)
#else
#define GTRACE_TEST_HOOK(name) (static_cast<const char*>(nullptr))
#define GTRACE_TEST_HOOK_IN_TARGET(name) (static_cast<const char*>(nullptr))
#endif

namespace gtrace {

// A hook's value as a count (of milliseconds, bytes, ...): nullopt when unset or not a number.
template <typename T = unsigned>
std::optional<T> test_hook_number(const char* value) {
    return value && *value ? parse_decimal<T>(value) : std::nullopt;
}

} // namespace gtrace

// Test timestamps are nanoseconds, unsigned as the trace model's are.
#pragma once
#include <cstdint>

inline constexpr uint64_t kMs = 1'000'000;

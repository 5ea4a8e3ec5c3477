// Shorthands for the path tables, and the driver tables (paths_driver.cpp).
#pragma once

#include "paths.h"

namespace gtsim_workload {

inline Call rt(const char* fn, const char* nested, std::vector<Op> ops, bool cooperative = false) {
    return Call{2, fn, nested, std::move(ops), cooperative};
}
inline Call drv(const char* fn, std::vector<Op> ops, bool cooperative = false) {
    return Call{1, fn, nullptr, std::move(ops), cooperative};
}
inline Op kernel(const char* name, uint32_t grid_x) { return Op{"kernel", 0, name, grid_x}; }
inline Op copy(uint64_t bytes) { return Op{"memcpy", bytes, "", 0}; }
inline Op set(uint64_t bytes) { return Op{"memset", bytes, "", 0}; }

std::vector<Path> driver_launch_paths();
std::vector<Path> driver_copy_paths();
std::vector<Path> driver_set_paths();

} // namespace gtsim_workload

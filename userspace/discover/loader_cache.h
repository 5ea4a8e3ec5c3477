// The dynamic loader's cache (/etc/ld.so.cache, as ldconfig writes it): which libraries a
// process's dlopen("libcudart.so.12") would find outside its LD_LIBRARY_PATH. gtrace reads the
// target's own cache file (inside its root) rather than running ldconfig, which a privileged
// gtrace must not look up through PATH, and which would describe the host, not a container.
// The format is glibc's (elf/cache.h): "glibc-ld.so.cache1.1" and its entries, possibly after
// the old "ld.so-1.7.0" table; every offset is checked against the file's size.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gtrace {

struct LoaderCacheEntry {
    std::string name; // the soname looked up: "libcudart.so.12"
    std::string path; // where it is: "/usr/local/cuda/lib64/libcudart.so.12"
};

// The entries of a cache file's bytes; empty when it is not one (malformed parts are left out).
std::vector<LoaderCacheEntry> parse_loader_cache(std::string_view bytes);

} // namespace gtrace

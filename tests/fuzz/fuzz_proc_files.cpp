// The /proc files and loader cache of a traced process, which its owner shapes: /proc/PID/maps
// (paths of any bytes, up to 4 KiB each), the Uid/Gid/Groups lines of /proc/PID/status, the
// target's own /etc/ld.so.cache, and interpreter file names (libpython3.99999999999.so once
// ended a capture with std::stoi). The first byte picks the parser; the rest is its input.
#include <cstdint>
#include <string>
#include <string_view>

#include "discover/loader_cache.h"
#include "discover/proc_maps.h"
#include "discover/proc_tree.h"
#include "discover/python_runtime.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gtrace;
    if (size < 1) return 0;
    std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
    size_t sink = 0;
    switch (data[0] % 4) {
    case 0:
        for (const Mapping& m : parse_maps(std::string(text))) {
            sink += m.path.size() + (m.end - m.start);
            if (auto v = python_file_version(m.path)) sink += static_cast<size_t>(v->first + v->second);
            sink += is_cuda_library_name(m.path);
        }
        break;
    case 1:
        if (auto c = parse_credentials(text)) sink += c->groups.size() + c->real_uid();
        break;
    case 2:
        for (const auto& e : parse_loader_cache(text)) sink += e.name.size() + e.path.size();
        break;
    default:
        if (auto v = python_file_version(text)) sink += static_cast<size_t>(v->first);
        break;
    }
    return sink == 0xdeadbeef; // keeps the work from being optimized away
}

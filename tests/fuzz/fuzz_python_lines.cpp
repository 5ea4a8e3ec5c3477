// CPython's line tables, read from the traced process's code objects (its memory: any bytes):
// 3.9's lnotab, 3.10's linetable and 3.11+'s location table, with a first line and an
// instruction offset from the input. Varints may run on without end and deltas may add up past
// any int: the line must stay a line number, never undefined behaviour.
#include <cstdint>
#include <cstring>
#include <string>

#include "decode/python_frames.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gtrace;
    if (size < 12) return 0;
    int32_t first = 0;
    uint64_t offset = 0;
    std::memcpy(&first, data, 4);
    std::memcpy(&offset, data + 4, 8);
    std::string table(reinterpret_cast<const char*>(data) + 12, size - 12);
    int lines[] = {line_from_lnotab(table, first, offset), line_from_linetable(table, first, offset),
                   line_from_locations(table, first, offset)};
    for (int line : lines)
        if (line < 0) __builtin_trap(); // a line number is never negative
    return 0;
}

// Line tables of each CPython format: instruction offset -> line.
#include <catch2/catch.hpp>

#include "decode/python_frames.h"

using namespace gtrace;

namespace {
std::string bytes(std::initializer_list<int> b) {
    std::string s;
    for (int v : b) s.push_back(static_cast<char>(v));
    return s;
}
} // namespace

TEST_CASE("3.9 lnotab: (address increment, line increment) pairs") {
    std::string t = bytes({2, 1, 4, 1});
    CHECK(line_from_lnotab(t, 10, 0) == 10);
    CHECK(line_from_lnotab(t, 10, 2) == 11);
    CHECK(line_from_lnotab(t, 10, 5) == 11);
    CHECK(line_from_lnotab(t, 10, 6) == 12);
}

TEST_CASE("3.10 linetable: (length, line delta) ranges, -128 for no line") {
    std::string t = bytes({4, 0, 6, 1, 2, -128});
    CHECK(line_from_linetable(t, 5, 0) == 5);
    CHECK(line_from_linetable(t, 5, 3) == 5);
    CHECK(line_from_linetable(t, 5, 4) == 6);
    CHECK(line_from_linetable(t, 5, 9) == 6);
    CHECK(line_from_linetable(t, 5, 10) == 0);
}

TEST_CASE("3.11+ location table: short, one-line, long and no-line entries") {
    std::string t = bytes({
        0x80 | (10 << 3) | 1, 0, 0, // code 10: same line, 2 code units
        0x80 | (11 << 3) | 0, 0, 0, // code 11: line + 1, 1 unit
        0x80 | (13 << 3) | 0, 6,    // code 13: signed varint delta +3, 1 unit
        0x80 | (15 << 3) | 0,       // code 15: no line, 1 unit
    });
    CHECK(line_from_locations(t, 20, 0) == 20);
    CHECK(line_from_locations(t, 20, 2) == 20);
    CHECK(line_from_locations(t, 20, 4) == 21);
    CHECK(line_from_locations(t, 20, 6) == 24);
    CHECK(line_from_locations(t, 20, 8) == 0);
}

TEST_CASE("the source frame skips torch, ctypes and CUDA binding frames") {
    std::vector<PyFrame> stack = {{"forward", "/usr/lib/python3/dist-packages/torch/nn/modules/linear.py", 114},
                                  {"CDLL.__call__", "/usr/lib/python3.11/ctypes/__init__.py", 10},
                                  {"train_step", "/home/u/train.py", 42},
                                  {"main", "/home/u/train.py", 80}};
    REQUIRE(source_frame(stack));
    CHECK(source_frame(stack)->text() == "train_step (/home/u/train.py:42)");
    CHECK(source_frame({}) == nullptr);
}

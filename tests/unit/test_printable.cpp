// Other users' text (command lines) made safe for a terminal and JSON; the exit codes per command.
#include <catch2/catch.hpp>

#include "cli/exit_code_help.h"
#include "foundation/printable.h"
#include "output/dump_report.h"

using namespace gtrace;

TEST_CASE("control characters, bidi overrides and invalid UTF-8 are escaped; text is kept") {
    CHECK(printable("python3 train.py --lr 0.1") == "python3 train.py --lr 0.1");
    CHECK(printable("a\x1b[31mb\n\t") == "a\\x1b[31mb\\x0a\\x09");
    CHECK(printable("back\\slash") == "back\\\\slash");
    CHECK(printable("caf\xc3\xa9 \xe6\x97\xa5") == "caf\xc3\xa9 \xe6\x97\xa5");
    CHECK(printable("\x7f") == "\\x7f");
    CHECK(printable("\xc2\x9b" "2J") == "\\xc2\\x9b2J");                   // C1 CSI
    CHECK(printable("evil\xe2\x80\xae" "txt.exe") == "evil\\xe2\\x80\\xaetxt.exe"); // right-to-left override
    CHECK(printable("\xff\xfe") == "\\xff\\xfe");
    CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");   // overlong '/'
    CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80"); // a surrogate
    CHECK(printable("cut \xe6\x97") == "cut \\xe6\\x97");   // a sequence cut short
    CHECK(printable(std::string("nul\0x", 5)) == "nul\\x00x");
}

TEST_CASE("gtrace dump escapes the texts a process controls") {
    DumpedThread t;
    t.owner = "pid 7 (evil\x1b]0;owned\x07)";
    t.is_rank_main = true;
    t.thread_name = "pt\x1b[2J";
    t.python = {"step (train.py:3\n)"};
    t.native = {"\xe2\x80\xae" "fn"};
    std::string out = format_dump("heading", {t});
    CHECK(out.find('\x1b') == std::string::npos);
    CHECK(out.find("\xe2\x80\xae") == std::string::npos);
    CHECK(out.find("pid 7 (evil\\x1b]0;owned\\x07)") != std::string::npos);
    CHECK(out.find("pt\\x1b[2J") != std::string::npos);
    CHECK(out.find("train.py:3\\x0a)") != std::string::npos);
}

TEST_CASE("truncation counts code points and never splits one") {
    CHECK(truncate_chars("abc", 3) == "abc");
    CHECK(truncate_chars("abcd", 3) == "ab…");
    CHECK(truncate_chars("h\xc3\xa9llo", 3) == "h\xc3\xa9…");
    CHECK(truncate_chars("\xe6\x97\xa5\xe6\x97\xa5\xe6\x97\xa5", 2) == "\xe6\x97\xa5…");
    CHECK(truncate_chars("abc", 1) == "…");
    CHECK(truncate_chars("abc", 0).empty());
}

TEST_CASE("each command's help lists only the exit codes it can return") {
    auto codes = [](const std::string& help) {
        std::string found;
        for (size_t pos = help.find("\n  "); pos != std::string::npos; pos = help.find("\n  ", pos + 1)) {
            size_t end = help.find(' ', pos + 3);
            if (end > pos + 3) found += help.substr(pos + 3, end - pos - 3) + ",";
        }
        return found;
    };
    CHECK(codes(exit_code_help("ps")) == "0,1,2,");
    CHECK(codes(exit_code_help("attach")) == "0,1,2,3,4,5,6,7,8,9,12,13,");
    CHECK(codes(exit_code_help("record")) == "0,1,2,6,7,8,9,10,12,13,");
    CHECK(codes(exit_code_help("dump")) == "0,1,2,3,4,5,6,");
    CHECK(codes(exit_code_help("report")) == "0,1,2,8,9,11,13,");
    CHECK(codes(exit_code_help("recover")) == "0,1,2,8,9,11,13,");
    CHECK(codes(exit_code_help("")) == "0,1,2,3,4,5,6,7,8,9,10,11,12,13,");
}

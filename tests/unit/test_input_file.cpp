// Files gtrace reads (traces, ELF objects, /proc): a FIFO, a device or a directory is refused at
// once, without blocking and without reading it.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "analyze/trace_data.h"
#include "foundation/elf_symbols.h"
#include "foundation/input_file.h"
#include "temp_dir.h"

using namespace gtrace;
namespace fs = std::filesystem;

namespace {

// A FIFO with no writer: a blocking open for reading would wait forever.
std::string make_fifo(const TempDir& dir) {
    std::string p = dir.at("fifo");
    REQUIRE(mkfifo(p.c_str(), 0600) == 0);
    return p;
}

} // namespace

TEST_CASE("only regular files are opened for reading") {
    TempDir dir;
    std::string fifo = make_fifo(dir);
    for (const auto& [path, kind] : std::vector<std::pair<std::string, std::string>>{
             {fifo, "a FIFO"}, {"/dev/zero", "a character device"}, {dir.path.string(), "a directory"}}) {
        auto f = open_input_file(path, ExitCode::BadTrace);
        REQUIRE_FALSE(f);
        CHECK(f.error().code == ExitCode::BadTrace);
        CHECK(f.error().message == path + " is not a regular file (it is " + kind + ")");
        CHECK(read_input_file(path, 1 << 20).empty());
    }
    auto missing = open_input_file((dir.path / "nope").string());
    REQUIRE_FALSE(missing);
    CHECK(missing.error().code == ExitCode::Usage);

    std::string regular = (dir.path / "f").string();
    std::ofstream(regular) << "0123456789";
    auto f = open_input_file(regular);
    REQUIRE(f);
    CHECK(f->size() == 10);
    CHECK(read_input_file(regular, 4) == "0123");
    CHECK(read_input_file(f->fd_path(), 100) == "0123456789");
    // /proc files are regular files that fstat calls empty: read to their end.
    CHECK(read_input_file("/proc/self/status", 1 << 20).find("Uid:") != std::string::npos);
}

TEST_CASE("report and ELF reading refuse a FIFO and /dev/zero at once") {
    TempDir dir;
    std::string fifo = make_fifo(dir);
    for (const std::string& path : {fifo, std::string("/dev/zero")}) {
        auto t = load_trace(path);
        REQUIRE_FALSE(t);
        CHECK(t.error().code == ExitCode::BadTrace);
        CHECK(t.error().message.find("is not a regular file") != std::string::npos);
        CHECK_FALSE(ElfSymbols::load(path));
        CHECK(elf_search_paths(path, "/").empty());
    }
}

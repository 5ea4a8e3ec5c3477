// Output files: the checks made before a capture starts, safe creation (links, modes), the trace
// sink cut back after a write error, and partial traces read and recovered.
#include <catch2/catch.hpp>

#include "temp_dir.h"
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fcntl.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analyze/partial_trace.h"
#include "analyze/trace_data.h"
#include "cli/recover_command.h"
#include "foundation/output_file.h"
#include "foundation/privilege.h"
#include "output/chrome_trace.h"

using namespace gtrace;
namespace fs = std::filesystem;

namespace {

std::string read(const std::string& path) { return read_file(path); }

ExitCode code_of(const Result<void>& r) { return r ? ExitCode::Ok : r.error().code; }

std::string with_header(const std::string& body) { return std::string(kChromeTraceHeader) + body; }

const std::string kEvent1 = R"({"name":"a","cat":"cuda_api","ph":"X","pid":1,"tid":1,"ts":1.000,"dur":1.000,"args":{"ret":0}})";
const std::string kEvent2 = R"({"name":"b","cat":"cuda_api","ph":"X","pid":1,"tid":1,"ts":3.000,"dur":1.000,"args":{"ret":0}})";

} // namespace

TEST_CASE("outputs are checked together before a capture starts") {
    TempDir dir;
    std::string t = dir.at("t.json");
    CHECK(check_outputs(trace_outputs(t), {}, false));
    CHECK(code_of(check_outputs({{"-o", "", false}}, {}, false)) == ExitCode::Usage);
    // The same file spelt two ways, and a hard link to it.
    CHECK(code_of(check_outputs({{"-o", t, false}, {"--folded", dir.at("sub/../t.json"), false}}, {}, false)) == ExitCode::Usage);
    fs::create_directories(dir.path / "sub");
    auto clash = check_outputs({{"-o", t, false}, {"--summary-json", dir.at("sub/../t.json"), false}}, {}, false);
    REQUIRE_FALSE(clash);
    CHECK(clash.error().message.find("name the same file") != std::string::npos);
    dir.write("a.json", "x");
    fs::create_hard_link(dir.at("a.json"), dir.at("b.json"));
    CHECK(code_of(check_outputs({{"--json", dir.at("b.json"), false}}, {dir.at("a.json")}, true)) == ExitCode::Usage);
    CHECK(code_of(check_outputs({{"--json", dir.at("a.json"), false}}, {dir.at("a.json")}, true)) == ExitCode::Usage);
    // The partial of -o is an output too.
    CHECK(code_of(check_outputs({{"-o", t, false}, {"-o's partial trace", t + ".partial", true}, {"--folded", t + ".partial", false}},
                                {}, false)) == ExitCode::Usage);
}

TEST_CASE("an output path must be a new or regular file in a writable directory") {
    TempDir dir;
    CHECK(code_of(check_outputs({{"-o", dir.at("missing/t.json"), false}}, {}, false)) == ExitCode::OutputUnwritable);
    CHECK(code_of(check_outputs({{"-o", dir.path.string(), false}}, {}, true)) == ExitCode::OutputUnwritable);
    CHECK(code_of(check_outputs({{"-o", dir.at("t/"), false}}, {}, true)) == ExitCode::OutputUnwritable);
    std::string victim = dir.write("victim", "precious\n");
    fs::create_symlink(victim, dir.at("link.json"));
    fs::create_symlink(dir.at("nowhere"), dir.at("dangling.json"));
    for (bool force : {false, true}) {
        CHECK(code_of(check_outputs({{"-o", dir.at("link.json"), false}}, {}, force)) == ExitCode::OutputUnwritable);
        CHECK(code_of(check_outputs({{"-o", dir.at("dangling.json"), false}}, {}, force)) == ExitCode::OutputUnwritable);
    }
    std::string existing = dir.write("old.json", "old");
    CHECK(code_of(check_outputs({{"-o", existing, false}}, {}, false)) == ExitCode::OutputExists);
    CHECK(check_outputs({{"-o", existing, false}}, {}, true));
    CHECK(read(victim) == "precious\n");
}

TEST_CASE("a killed capture's partial is kept unless --force, and a running one's always") {
    TempDir dir;
    std::string t = dir.at("t.json");
    dir.write("t.json.partial", with_header(kEvent1));
    auto left = check_outputs(trace_outputs(t), {}, false);
    REQUIRE_FALSE(left);
    CHECK(left.error().code == ExitCode::OutputExists);
    CHECK(left.error().message.find("gtrace recover") != std::string::npos);
    CHECK(check_outputs(trace_outputs(t), {}, true));
    int fd = open((t + ".partial").c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    REQUIRE(flock(fd, LOCK_EX) == 0); // as a running capture holds it
    CHECK(partial_in_use(t + ".partial"));
    CHECK(code_of(check_outputs(trace_outputs(t), {}, true)) == ExitCode::OutputExists);
    close(fd);
    CHECK_FALSE(partial_in_use(t + ".partial"));
}

TEST_CASE("outputs are created 0600 under the umask, never through a link") {
    TempDir dir;
    mode_t old = umask(022);
    REQUIRE(write_output(dir.at("a.json"), "a", false));
    umask(077);
    REQUIRE(write_output(dir.at("b.json"), "b", false));
    umask(0277);
    REQUIRE(write_output(dir.at("c.json"), "c", false));
    umask(old);
    auto mode = [&](const char* name) { return fs::status(dir.path / name).permissions(); };
    CHECK(mode("a.json") == (fs::perms::owner_read | fs::perms::owner_write));
    CHECK(mode("b.json") == (fs::perms::owner_read | fs::perms::owner_write));
    CHECK(mode("c.json") == fs::perms::owner_read);
    CHECK(read(dir.at("a.json")) == "a");
    // Existing without force: refused at the rename, the file untouched.
    CHECK(code_of(write_output(dir.at("a.json"), "new", false)) == ExitCode::OutputExists);
    CHECK(read(dir.at("a.json")) == "a");
    // A link raced in after the checks is replaced, never written through.
    std::string victim = dir.write("victim", "precious\n");
    fs::create_symlink(victim, dir.at("link.json"));
    REQUIRE(write_output(dir.at("link.json"), "trace", true));
    CHECK_FALSE(fs::is_symlink(dir.at("link.json")));
    CHECK(read(dir.at("link.json")) == "trace");
    CHECK(read(victim) == "precious\n");
    // Nothing else left in the directory: no temporary file.
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path)) ++n;
    CHECK(n == 5);
}

TEST_CASE("the sudo user is the numeric SUDO_UID/SUDO_GID, only for root") {
    setenv("SUDO_UID", "65534", 1);
    setenv("SUDO_GID", "65534", 1);
    auto who = sudo_invoker();
    CHECK(who.has_value() == (geteuid() == 0));
    if (who) CHECK(*who == std::make_pair(uid_t{65534}, gid_t{65534}));
    setenv("SUDO_UID", "-1", 1);
    CHECK_FALSE(sudo_invoker());
    setenv("SUDO_UID", "12x", 1);
    CHECK_FALSE(sudo_invoker());
    unsetenv("SUDO_UID");
    unsetenv("SUDO_GID");
    CHECK_FALSE(sudo_invoker());
}

TEST_CASE("a write error cuts the trace back to an event boundary with room for its end") {
    TempDir dir;
    std::string t = dir.at("t.json");
    auto created = ChromeTraceWriter::create(t, false);
    REQUIRE(created);
    auto& w = *created;
    // A file size limit makes writes fail (EFBIG) as a full disk would (ENOSPC).
    struct rlimit old {};
    getrlimit(RLIMIT_FSIZE, &old);
    auto old_handler = signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = old;
    small.rlim_cur = 3 << 20;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
    TraceModel model;
    uint64_t written = 0;
    for (; written < 200000 && !w->write_failed(); ++written) {
        w->torch_range({1, 1, 1000 + written * 10, 1005 + written * 10, fmt::format("slice {} with some padding to fill the file", written), {}});
        if (written % 1000 == 0) w->flush();
    }
    REQUIRE(w->write_failed());
    for (int i = 0; i < 10; ++i) w->torch_range({1, 1, 1, 2, "after", {}}); // dropped
    auto cut = w->finish(model, {{"tool", "gtrace"}});
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, old_handler);
    REQUIRE(cut);
    REQUIRE(cut->has_value());
    CHECK((*cut)->events_kept + (*cut)->events_dropped == written + 10);
    CHECK((*cut)->events_kept > 1000);
    CHECK(fs::file_size(t) <= (3u << 20));
    auto parsed = nlohmann::json::parse(read(t));
    CHECK(parsed["traceEvents"].size() == (*cut)->events_kept);
    CHECK(parsed["otherData"]["cut"]["events_kept"] == (*cut)->events_kept);
    CHECK(parsed["otherData"]["cut"]["error"] == "File too large");
    CHECK_FALSE(fs::exists(t + ".partial"));
}

TEST_CASE("a partial trace ends at its last whole event") {
    std::string two = with_header(kEvent1 + ",\n" + kEvent2);
    auto whole = find_partial_end(two);
    REQUIRE(whole);
    CHECK_FALSE(whole->complete);
    CHECK(whole->cut == two.size());
    CHECK(whole->events == 2);
    std::string cut_short = two.substr(0, two.size() - 10);
    auto shorter = find_partial_end(cut_short);
    REQUIRE(shorter);
    CHECK(shorter->events == 1);
    CHECK(cut_short.substr(0, shorter->cut) == with_header(kEvent1));
    auto separator_only = find_partial_end(with_header(kEvent1 + ",\n"));
    REQUIRE(separator_only);
    CHECK(separator_only->events == 1);
    auto empty = find_partial_end(std::string(kChromeTraceHeader));
    REQUIRE(empty);
    CHECK(empty->events == 0);
    CHECK(empty->cut == kChromeTraceHeader.size());
    std::string closed = with_header(kEvent1 + ",\n" + kEvent2) + partial_closing(R"({"tool":"gtrace"})");
    auto complete = find_partial_end(closed);
    REQUIRE(complete);
    CHECK(complete->complete);
    CHECK(complete->events == 2);
    auto closing_cut = find_partial_end(closed.substr(0, closed.size() - 5));
    REQUIRE(closing_cut);
    CHECK_FALSE(closing_cut->complete);
    CHECK(closing_cut->cut == two.size());
    CHECK_FALSE(find_partial_end(R"({"traceEvents":[)"));
    // Whatever the cut, what is kept plus a closing is valid JSON.
    for (size_t n = kChromeTraceHeader.size(); n <= two.size(); ++n) {
        auto end = find_partial_end(two.substr(0, n));
        REQUIRE(end);
        auto doc = nlohmann::json::parse(two.substr(0, end->cut) + partial_closing("{}"), nullptr, false);
        CHECK(doc.is_object());
        CHECK(doc["traceEvents"].size() == end->events);
    }
}

TEST_CASE("report reads a partial trace; recover completes it") {
    TempDir dir;
    std::string text = with_header(kEvent1 + ",\n" + kEvent2 + ",\n" + kEvent1.substr(0, 20));
    std::string partial = dir.write("t.json.partial", text);
    auto t = load_trace(partial);
    REQUIRE(t);
    REQUIRE(t->partial_events);
    CHECK(*t->partial_events == 2);
    CHECK(t->processes.at(1).calls.size() == 2);
    CHECK(read(partial) == text); // read, never changed
    // Not a partial name: a cut file is a bad trace.
    CHECK(load_trace(dir.write("cut.json", text)).error().code == ExitCode::BadTrace);

    REQUIRE(run_recover({partial, "", false}));
    CHECK_FALSE(fs::exists(partial));
    auto doc = nlohmann::json::parse(read(dir.at("t.json")));
    CHECK(doc["traceEvents"].size() == 2);
    CHECK(doc["otherData"]["tool"] == "gtrace");
    CHECK(doc["otherData"]["recovered"]["events_kept"] == 2);
    CHECK(doc["otherData"]["recovered"]["bytes_dropped"] == 22); // the cut event and the ",\n" before it
    auto loaded = load_trace(dir.at("t.json"));
    REQUIRE(loaded);
    CHECK_FALSE(loaded->partial_events);
    // Again, into an existing file: refused without --force.
    dir.write("u.json.partial", text);
    CHECK(code_of(run_recover({dir.at("u.json.partial"), dir.at("t.json"), false})) == ExitCode::OutputExists);
    CHECK(run_recover({dir.at("u.json.partial"), dir.at("t.json"), true}));
    CHECK(code_of(run_recover({dir.write("x.json.partial", "not a trace"), "", false})) == ExitCode::BadTrace);
}

TEST_CASE("an output's directory swapped for a link during the capture is not followed") {
    TempDir dir;
    fs::create_directories(dir.path / "out");
    fs::create_directories(dir.path / "elsewhere");
    std::string trace = dir.at("out/t.pftrace"), summary = dir.at("out/summary.json"), kineto = dir.at("out/k/");
    REQUIRE(check_outputs({{"-o", trace, false}, {"-o's partial trace", partial_path_of(trace), true}, {"--summary-json", summary, false}},
                          {}, false));
    REQUIRE(check_output_directory("-o", kineto, false));
    auto f = OutputFile::create(trace, false, partial_path_of(trace));
    REQUIRE(f);
    // Whoever owns out/ moves it away and leaves a link to another directory in its place.
    fs::rename(dir.path / "out", dir.path / "moved");
    fs::create_directory_symlink(dir.path / "elsewhere", dir.path / "out");
    REQUIRE(write(f->fd(), "x", 1) == 1);
    CHECK(read(f->readable_path()) == "x"); // the partial read back is the one being written
    REQUIRE(f->commit());
    REQUIRE(write_output(summary, "{}", false));
    auto k = create_output_directory(kineto, false);
    REQUIRE(k);
    close(*k);
    REQUIRE(write_output(kineto + "rank0.pt.trace.json", "{}", false));
    CHECK(read((dir.path / "moved" / "t.pftrace").string()) == "x");
    CHECK(fs::exists(dir.path / "moved" / "summary.json"));
    CHECK(fs::exists(dir.path / "moved" / "k" / "rank0.pt.trace.json"));
    CHECK(fs::is_empty(dir.path / "elsewhere"));
}

// What the fuzz targets share: a scratch directory of the process's own (on tmpfs where there is
// one) for the files gtrace's readers open by path, and `gtrace report`'s whole run over them.
// A target may return errors for any input; it may not crash, hang or read out of bounds.
#pragma once
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "analyze/job_report.h"
#include "analyze/report_json.h"
#include "analyze/report_text.h"

namespace gtrace::fuzz {

inline const std::string& scratch_dir() {
    static const std::string dir = [] {
        std::string base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        std::string tmpl = base + "/fuzz-gtrace-XXXXXX"; // not gtrace-*: the runtime tests look for leftovers of gtrace by that name
        if (!mkdtemp(tmpl.data())) {
            perror("gtrace fuzz: mkdtemp");
            std::abort();
        }
        static const std::string made = tmpl;
        std::atexit([] {
            std::error_code ec;
            std::filesystem::remove_all(made, ec);
        });
        return tmpl;
    }();
    return dir;
}

// The bytes as scratch_dir()/name (replacing what was there); its path.
inline std::string write_scratch(const std::string& name, const uint8_t* data, size_t size) {
    std::string path = scratch_dir() + "/" + name;
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || (size && write(fd, data, size) != static_cast<ssize_t>(size)) || close(fd) != 0) {
        perror("gtrace fuzz: write");
        std::abort();
    }
    return path;
}

// `gtrace report TRACE...` without the files it writes: analysis, the text and the JSON.
inline bool report(const std::vector<std::string>& traces) {
    auto job = analyze_job(traces, AnalysisOptions{});
    if (!job) return false;
    std::string text = format_report(*job);
    std::string json = report_json_text(report_json(*job));
    return !text.empty() || !json.empty();
}

// A reader that accepted a file gtrace itself wrote (recover's, merge's output) and then refused it
// is a bug: abort, so that libFuzzer keeps the input.
[[noreturn]] inline void broken(const char* what, const std::string& why) {
    fprintf(stderr, "gtrace fuzz: %s: %s\n", what, why.c_str());
    std::abort();
}

} // namespace gtrace::fuzz

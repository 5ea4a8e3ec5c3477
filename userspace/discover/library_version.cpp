#include "discover/library_version.h"

#include <unistd.h>

#include <algorithm>
#include <vector>

namespace gtrace {
namespace {

constexpr size_t kMaxRecordBytes = 1 << 20;
constexpr size_t kMaxDistInfos = 64;

bool all_digits(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }); }

std::string read_all(const InputFile& file, size_t max) {
    std::string out(static_cast<size_t>(std::min<uint64_t>(file.size(), max)), '\0');
    ssize_t n = pread(file.fd(), out.data(), out.size(), 0);
    out.resize(n > 0 ? static_cast<size_t>(n) : 0);
    return out;
}

} // namespace

std::string version_from_file_name(std::string_view name) {
    size_t so = name.find(".so.");
    if (so == std::string_view::npos) return {};
    std::string_view rest = name.substr(so + 4); // "13" or "12.4.127"
    size_t dot = rest.find('.');
    if (dot == std::string_view::npos) return {}; // the soname's major alone says little
    for (size_t p = 0; p <= rest.size();) {
        size_t end = std::min(rest.find('.', p), rest.size());
        if (!all_digits(rest.substr(p, end - p))) return {};
        p = end + 1;
    }
    return std::string(rest);
}

std::string version_from_dist_info(std::string_view dir) {
    constexpr std::string_view kSuffix = ".dist-info";
    if (!dir.ends_with(kSuffix)) return {};
    dir.remove_suffix(kSuffix.size());
    size_t dash = dir.find('-');
    if (dash == std::string_view::npos || dash == 0 || dash + 1 == dir.size()) return {};
    std::string name(dir.substr(0, dash));
    std::replace(name.begin(), name.end(), '_', '-');
    return name + " " + std::string(dir.substr(dash + 1));
}

std::string library_version(TargetFiles& files, int pid, const std::string& path) {
    std::string file_name = path.substr(path.rfind('/') + 1);
    for (std::string_view site : {"/site-packages/", "/dist-packages/"}) {
        size_t at = path.find(site);
        if (at == std::string::npos) continue;
        std::string root = path.substr(0, at + site.size() - 1), relative = path.substr(at + site.size());
        auto infos = files.list_in_root(pid, {root}, [](const std::string& n) { return n.ends_with(".dist-info"); });
        // The NVIDIA wheels first: the CUDA libraries are theirs.
        std::stable_partition(infos.begin(), infos.end(), [](const std::string& p) { return p.find("/nvidia") != std::string::npos; });
        if (infos.size() > kMaxDistInfos) infos.resize(kMaxDistInfos);
        std::vector<std::string> records;
        for (const auto& info : infos) records.push_back(info + "/RECORD");
        for (auto& [record, file] : files.open_in_root(pid, records)) {
            std::string text = read_all(file, kMaxRecordBytes);
            // A RECORD line: "PATH,sha256=…,SIZE" with PATH relative to site-packages.
            for (size_t p = 0; p < text.size();) {
                size_t end = std::min(text.find('\n', p), text.size());
                std::string_view line(text.data() + p, end - p);
                if (line.starts_with(relative) && line.size() > relative.size() && line[relative.size()] == ',') {
                    std::string dir = record.substr(0, record.rfind('/'));
                    return version_from_dist_info(dir.substr(dir.rfind('/') + 1));
                }
                p = end + 1;
            }
        }
    }
    return version_from_file_name(file_name);
}

} // namespace gtrace

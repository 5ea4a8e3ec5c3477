// A scratch directory for one test case, removed with everything in it afterwards.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

struct TempDir {
    std::filesystem::path path;
    explicit TempDir(const std::string& tag = "unit")
        : path(std::filesystem::temp_directory_path() / ("gtrace-" + tag + "-" + std::to_string(getpid()) + "-" + std::to_string(next()))) {
        std::filesystem::remove_all(path);
        std::filesystem::create_directories(path);
    }
    ~TempDir() { std::filesystem::remove_all(path); }
    static int next() {
        static int n = 0;
        return ++n;
    }
    std::string at(const std::string& name) const { return (path / name).string(); }
    std::string write(const std::string& name, const std::string& text) const {
        std::ofstream(path / name, std::ios::binary) << text;
        return at(name);
    }
};

inline std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

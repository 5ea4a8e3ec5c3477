// Counts the CUDA calls a test program makes, per API, and prints them as one JSON line
// ("GTRACE_COUNTS {...}") that the runtime tests compare with the trace.
#pragma once
#include <unistd.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <string>

class CallCounter {
public:
    template <typename Ret>
    void count(const char* api, Ret) {
        std::lock_guard<std::mutex> lock(mu_);
        ++calls_[api];
    }
    void print() const {
        std::string out = "GTRACE_COUNTS {\"pid\":" + std::to_string(getpid()) + ",\"calls\":{";
        bool first = true;
        for (const auto& [name, n] : calls_) {
            out += (first ? "\"" : ",\"") + name + "\":" + std::to_string(n);
            first = false;
        }
        out += "}}\n";
        fputs(out.c_str(), stdout);
        fflush(stdout);
    }

private:
    std::mutex mu_;
    std::map<std::string, unsigned long> calls_;
};

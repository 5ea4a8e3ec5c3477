// A file descriptor we own: closed when it goes out of scope.
#pragma once
#include <unistd.h>

#include <utility>

namespace gtrace {

class Fd {
public:
    explicit Fd(int fd = -1) : fd_(fd) {}
    Fd(const Fd&) = delete;
    Fd(Fd&& o) noexcept : fd_(o.release()) {}
    ~Fd() {
        if (fd_ >= 0) close(fd_);
    }
    int get() const { return fd_; }
    int release() { return std::exchange(fd_, -1); }

private:
    int fd_;
};

} // namespace gtrace

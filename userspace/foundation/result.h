// Errors as values at module borders: Result<T> holds a T or an Error with the exit code the
// CLI reports for it. Exceptions are only used at the CLI edge.
#pragma once
#include <string>
#include <utility>
#include <variant>

#include "foundation/exit_codes.h"

namespace gtrace {

struct Error {
    ExitCode code = ExitCode::Internal;
    std::string message; // one line: what is wrong and what to do
};

template <typename T>
class [[nodiscard]] Result {
public:
    Result(T value) : v_(std::move(value)) {}
    Result(Error error) : v_(std::move(error)) {}
    bool ok() const { return v_.index() == 0; }
    explicit operator bool() const { return ok(); }
    T& value() { return std::get<0>(v_); }
    const T& value() const { return std::get<0>(v_); }
    T& operator*() { return value(); }
    T* operator->() { return &value(); }
    const Error& error() const { return std::get<1>(v_); }

private:
    std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
public:
    Result() = default;
    Result(Error error) : error_(std::move(error)), ok_(false) {}
    bool ok() const { return ok_; }
    explicit operator bool() const { return ok_; }
    const Error& error() const { return error_; }

private:
    Error error_;
    bool ok_ = true;
};

inline Error make_error(ExitCode code, std::string message) { return Error{code, std::move(message)}; }

} // namespace gtrace

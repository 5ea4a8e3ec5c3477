// A failure inside an event callback (a probe that cannot be switched, a process that cannot be
// entered): the handlers cannot return it through the ring's callback, so the first one is kept
// here and the capture loop ends with it.
#pragma once
#include <optional>

#include "foundation/result.h"

namespace gtrace {

class DeferredError {
public:
    void defer(const Error& e) {
        if (!first_) first_ = e;
    }
    const std::optional<Error>& first() const { return first_; }

private:
    std::optional<Error> first_;
};

} // namespace gtrace

// Per-process state let go in one call: each component that keeps state per traced process
// implements the moments it cares about and is registered once (capture/capture.cpp); a
// process's fork, exec, exit and departure are then one call each on ProcessObservers
// (capture/process_events.cpp), not a list of forget_process calls kept by hand in two places.
#pragma once
#include <cstdint>
#include <vector>

namespace gtrace {

class ProcessObserver {
public:
    virtual ~ProcessObserver() = default;
    // A child forked from `parent` starts with its parent's state (in a PID that may have been
    // another process's before).
    virtual void process_forked(uint32_t /*pid*/, uint32_t /*parent*/) {}
    // Its image replaced: what belonged to the old image is gone.
    virtual void process_exec(uint32_t /*pid*/) {}
    // Exited: nothing of it is needed but what its last events in flight still name.
    virtual void process_exited(uint32_t /*pid*/) {}
    // A while after its exit: its last events are in (the trace's tracks may close).
    virtual void process_gone(uint32_t /*pid*/) {}
};

// The observers of one capture, called in the order they were added.
class ProcessObservers {
public:
    void add(ProcessObserver& o) { observers_.push_back(&o); }
    void forked(uint32_t pid, uint32_t parent) const {
        for (auto* o : observers_) o->process_forked(pid, parent);
    }
    void exec(uint32_t pid) const {
        for (auto* o : observers_) o->process_exec(pid);
    }
    void exited(uint32_t pid) const {
        for (auto* o : observers_) o->process_exited(pid);
    }
    void gone(uint32_t pid) const {
        for (auto* o : observers_) o->process_gone(pid);
    }

private:
    std::vector<ProcessObserver*> observers_;
};

} // namespace gtrace

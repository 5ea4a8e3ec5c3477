// Python stack definitions, read on a thread of their own. A definition is symbolized from the
// live process — its code objects, read with process_vm_readv — so it must be read while the
// process lives: a torchrun rank may exit 50 ms after its last CUDA call, while the capture loop
// can be seconds behind with the other events (a scan of a new process, an agent's injection, a
// slow disk). BPF sends definitions to a ring of their own with a wakeup (bpf/pystack.bpf.h); this
// thread takes them at once. The loop's events name the ids; an id not defined yet makes the loop
// read what is pending first (PythonStacks::find), so no event outruns its definition.
#pragma once
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "collect/ring_reader.h"
#include "decode/python_stacks.h"
#include "foundation/unique_fd.h"
#include "foundation/result.h"

namespace gtrace {

class StackDefinitions {
public:
    // Reads the ring `ring_fd` into `stacks` until destroyed; `stacks` reads it on a miss.
    static Result<std::unique_ptr<StackDefinitions>> start(int ring_fd, PythonStacks& stacks);
    ~StackDefinitions(); // stops the thread; `stacks` no longer reads the ring
    StackDefinitions(const StackDefinitions&) = delete;
    StackDefinitions& operator=(const StackDefinitions&) = delete;

    // Every definition submitted so far is in `stacks` when this returns.
    void catch_up();

private:
    class Sink;
    StackDefinitions(PythonStacks& stacks);
    void run();

    PythonStacks& stacks_;
    std::unique_ptr<Sink> sink_;
    std::optional<RingReader> reader_;
    std::mutex read_mutex_; // one reader of the ring at a time: this thread or the capture loop
    Fd stop_;               // an eventfd: written to stop the thread
    std::thread thread_;
};

} // namespace gtrace

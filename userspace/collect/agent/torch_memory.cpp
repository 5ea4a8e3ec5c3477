#include "collect/agent/torch_memory.h"

#include <dlfcn.h>
#include <pthread.h>
#include <time.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

namespace gtrace::agent {
namespace {

constexpr int kGilPatienceMs = 1000; // a busy interpreter switches threads every 5 ms
constexpr int kPyFileInput = 257;    // Py_file_input

// Runs in the interpreter's __main__-less scratch globals: reads, never imports torch or
// initializes its CUDA. Leaves "R:A,R:A,..." (one per device) in _gtrace_torch, "" when torch
// or its CUDA is not in use.
constexpr const char* kProbe =
    "import sys\n"
    "_t = sys.modules.get('torch')\n"
    "_gtrace_torch = ''\n"
    "if _t is not None and _t.cuda.is_initialized():\n"
    "    _gtrace_torch = ','.join('%d:%d' % (_t.cuda.memory_reserved(d), _t.cuda.memory_allocated(d))\n"
    "                             for d in range(_t.cuda.device_count()))\n";

using PyObj = void;
struct Python {
    int (*is_initialized)();
    int (*gil_ensure)();
    void (*gil_release)(int);
    PyObj* (*dict_new)();
    PyObj* (*run)(const char*, int, PyObj*, PyObj*, void*);
    PyObj* (*dict_get)(PyObj*, const char*);
    const char* (*utf8)(PyObj*);
    void (*decref)(PyObj*);
    void (*err_clear)();
};

template <typename F>
bool resolve(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
    return f != nullptr;
}

bool find_python(Python& p) {
    return resolve(p.is_initialized, "Py_IsInitialized") && resolve(p.gil_ensure, "PyGILState_Ensure") &&
           resolve(p.gil_release, "PyGILState_Release") && resolve(p.dict_new, "PyDict_New") &&
           resolve(p.run, "PyRun_StringFlags") && resolve(p.dict_get, "PyDict_GetItemString") &&
           resolve(p.utf8, "PyUnicode_AsUTF8") && resolve(p.decref, "Py_DecRef") && resolve(p.err_clear, "PyErr_Clear");
}

// Shared by the waiting agent thread and the helper, which may outlive the wait.
struct Exchange {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
    Python py{};
    TorchMemory result;
};

void parse(const std::string& text, TorchMemory& out) {
    if (text.empty()) {
        out.status = GT_TORCH_NOT_IMPORTED;
        return;
    }
    out.status = GT_TORCH_READ;
    for (const char* p = text.c_str(); *p;) {
        char* end = nullptr;
        TorchMemory::Device d;
        d.reserved = strtoull(p, &end, 10);
        if (*end != ':') break;
        d.allocated = strtoull(end + 1, &end, 10);
        out.devices.push_back(d);
        p = *end == ',' ? end + 1 : end;
    }
}

// The helper: takes the GIL like any thread the interpreter did not create. Where the
// interpreter is finalizing, CPython may end this thread inside PyGILState_Ensure: the agent's
// thread only stops waiting for it.
void* run_probe(void* arg) {
    auto ex = std::unique_ptr<std::shared_ptr<Exchange>>(static_cast<std::shared_ptr<Exchange>*>(arg));
    Exchange& e = **ex;
    const Python& py = e.py;
    TorchMemory got;
    int gil = py.gil_ensure();
    if (PyObj* globals = py.dict_new()) {
        PyObj* r = py.run(kProbe, kPyFileInput, globals, globals, nullptr);
        if (!r) {
            py.err_clear();
            got.status = GT_TORCH_ERROR;
        } else {
            py.decref(r);
            PyObj* v = py.dict_get(globals, "_gtrace_torch"); // borrowed
            const char* text = v ? py.utf8(v) : nullptr;
            if (text) parse(text, got);
            else py.err_clear(), got.status = GT_TORCH_ERROR;
        }
        py.decref(globals);
    }
    py.gil_release(gil);
    std::lock_guard lock(e.mutex);
    e.result = std::move(got);
    e.done = true;
    e.done_cv.notify_all();
    return nullptr;
}

} // namespace

TorchMemory read_torch_memory() {
    TorchMemory none;
    void* c10_cuda = dlopen("libc10_cuda.so", RTLD_LAZY | RTLD_NOLOAD); // torch's CUDA, if loaded
    if (!c10_cuda) {
        none.status = GT_TORCH_NOT_IMPORTED;
        return none;
    }
    dlclose(c10_cuda); // NOLOAD only counted a reference
    auto ex = std::make_shared<Exchange>();
    if (!find_python(ex->py) || !ex->py.is_initialized()) return none; // GT_TORCH_NO_PYTHON
    pthread_t helper;
    auto* arg = new std::shared_ptr<Exchange>(ex);
    if (pthread_create(&helper, nullptr, run_probe, arg) != 0) {
        delete arg;
        none.status = GT_TORCH_GIL_TIMEOUT;
        return none;
    }
    pthread_detach(helper);
    std::unique_lock lock(ex->mutex);
    if (!ex->done_cv.wait_for(lock, std::chrono::milliseconds(kGilPatienceMs), [&] { return ex->done; })) {
        none.status = GT_TORCH_GIL_TIMEOUT;
        return none;
    }
    return ex->result;
}

} // namespace gtrace::agent

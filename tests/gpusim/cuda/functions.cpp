// Kernel handles: every CUfunction and CUkernel the simulator hands out is registered, so a launch
// of anything else is refused instead of dereferenced.
#include "functions.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace gtsim {
namespace {

// A module or library: kernel name -> handle. Modules hand out CUfunctions, libraries CUkernels.
struct Image {
    bool library = false;
    std::map<std::string, void*> handles;
};

// A library's kernel: its CUkernel handle is this object, its CUfunction the `function` member.
struct Kernel {
    uint64_t tag = 0x6b65726e656cULL; // keeps &function apart from the Kernel's own address
    Function function;
};

struct Registry {
    std::mutex mu;
    std::deque<Function> functions; // never shrink: handles stay valid and unique
    std::deque<Kernel> kernels;
    std::deque<Image> images;
    std::unordered_map<const void*, const Function*> launchable;
    std::unordered_map<const void*, const Function*> stubs;
    std::unordered_map<const void*, const void*> stub_kernels;
    std::unordered_set<const void*> live_images;
    std::unordered_set<std::string> names;

    const char* intern(const std::string& name) { return names.insert(name).first->c_str(); }
};

Registry& registry() {
    static Registry* r = new Registry(); // leaked: records keep name pointers until exit
    return *r;
}

// Kernel names of a fake image, or false if it is not one.
bool parse_image(const void* image, std::vector<std::string>* names) {
    if (!image) return false;
    const char* text = static_cast<const char*>(image);
    size_t magic = sizeof kModuleMagic - 1;
    if (strncmp(text, kModuleMagic, magic) != 0) return false;
    for (const char* p = text + magic; *p;) {
        const char* end = strchr(p, '\n');
        size_t len = end ? size_t(end - p) : strlen(p);
        if (len) names->emplace_back(p, len);
        p += len + (end ? 1 : 0);
    }
    return true;
}

CUresult load(void** out, const void* image, bool library) {
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    std::vector<std::string> names;
    if (!parse_image(image, &names)) return CUDA_ERROR_INVALID_IMAGE;
    Registry& r = registry();
    std::lock_guard lk(r.mu);
    Image& img = r.images.emplace_back();
    img.library = library;
    for (const std::string& n : names) {
        if (img.handles.count(n)) continue;
        if (library) {
            Kernel& k = r.kernels.emplace_back();
            k.function.name = r.intern(n);
            img.handles[n] = &k;
            r.launchable[&k] = &k.function;               // a CUkernel may be launched as a CUfunction
            r.launchable[&k.function] = &k.function;
        } else {
            Function& f = r.functions.emplace_back(Function{r.intern(n)});
            img.handles[n] = &f;
            r.launchable[&f] = &f;
        }
    }
    r.live_images.insert(&img);
    *out = &img;
    return CUDA_SUCCESS;
}

CUresult lookup(void** out, const void* handle, const char* name, bool library) {
    if (!out || !name) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lk(r.mu);
    if (!r.live_images.count(handle)) return CUDA_ERROR_INVALID_HANDLE;
    auto* img = static_cast<const Image*>(handle);
    if (img->library != library) return CUDA_ERROR_INVALID_HANDLE;
    auto it = img->handles.find(name);
    if (it == img->handles.end()) return CUDA_ERROR_NOT_FOUND;
    *out = it->second;
    return CUDA_SUCCESS;
}

CUresult unload(const void* handle, bool library) {
    Registry& r = registry();
    std::lock_guard lk(r.mu);
    if (!r.live_images.count(handle) || static_cast<const Image*>(handle)->library != library)
        return CUDA_ERROR_INVALID_HANDLE;
    r.live_images.erase(handle); // its kernels stay launchable: names in records must stay valid
    return CUDA_SUCCESS;
}

} // namespace

const Function* launchable(const void* handle) {
    Registry& r = registry();
    std::lock_guard lk(r.mu);
    auto it = r.launchable.find(handle);
    return it == r.launchable.end() ? nullptr : it->second;
}

namespace {

const Function* host_function_locked(Registry& r, const void* stub) {
    auto it = r.stubs.find(stub);
    if (it != r.stubs.end()) return it->second;
    Dl_info info{};
    std::string name;
    if (dladdr(stub, &info) && info.dli_sname && info.dli_saddr == stub) {
        name = info.dli_sname;
    } else {
        char buf[40];
        snprintf(buf, sizeof buf, "kernel_0x%llx", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(stub)));
        name = buf;
    }
    Function& f = r.functions.emplace_back(Function{r.intern(name)});
    r.launchable[&f] = &f;
    r.stubs.emplace(stub, &f);
    return &f;
}

} // namespace

const Function* host_function(const void* stub) {
    Registry& r = registry();
    std::lock_guard lk(r.mu);
    return host_function_locked(r, stub);
}

const void* host_kernel(const void* stub) {
    Registry& r = registry();
    std::lock_guard lk(r.mu);
    auto it = r.stub_kernels.find(stub);
    if (it != r.stub_kernels.end()) return it->second;
    const Function* f = host_function_locked(r, stub);
    Kernel& k = r.kernels.emplace_back();
    k.function.name = f->name;
    r.launchable[&k] = f;
    r.stub_kernels.emplace(stub, &k);
    return &k;
}

CUresult module_load(CUmodule* out, const void* image) { return load(reinterpret_cast<void**>(out), image, false); }

CUresult module_get_function(CUfunction* out, CUmodule mod, const char* name) {
    return lookup(reinterpret_cast<void**>(out), mod, name, false);
}

CUresult module_unload(CUmodule mod) { return unload(mod, false); }

CUresult library_load(CUlibrary* out, const void* image) { return load(reinterpret_cast<void**>(out), image, true); }

CUresult library_get_kernel(CUkernel* out, CUlibrary lib, const char* name) {
    return lookup(reinterpret_cast<void**>(out), lib, name, true);
}

CUresult library_unload(CUlibrary lib) { return unload(lib, true); }

CUresult kernel_get_function(CUfunction* out, CUkernel kernel) {
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    Registry& r = registry();
    std::lock_guard lk(r.mu);
    auto it = r.launchable.find(kernel);
    // Only CUkernels: their function is a different object.
    if (it == r.launchable.end() || static_cast<const void*>(it->second) == static_cast<const void*>(kernel))
        return CUDA_ERROR_INVALID_HANDLE;
    *out = reinterpret_cast<CUfunction>(const_cast<Function*>(it->second));
    return CUDA_SUCCESS;
}

} // namespace gtsim

// gpusim_selfcheck support: loading CUPTI, the buffer and subscriber callbacks, GTSIM_LOG reading.
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <type_traits>


#include "sim_selfcheck.h"

namespace selfcheck {

Cupti cupti;
std::atomic<int> g_checks{0};
static std::atomic<int> g_failures{0};
BufferMode g_buffer_mode = BufferMode::Normal;

bool load_cupti(const std::string& path) {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "selfcheck: dlopen %s: %s\n", path.c_str(), dlerror());
        return false;
    }
    bool ok = true;
    auto get = [&](auto& fn, const char* name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
        if (!fn) {
            fprintf(stderr, "selfcheck: %s missing from %s\n", name, path.c_str());
            ok = false;
        }
    };
    get(cupti.GetVersion, "cuptiGetVersion");
    get(cupti.GetResultString, "cuptiGetResultString");
    get(cupti.GetTimestamp, "cuptiGetTimestamp");
    get(cupti.ActivityEnable, "cuptiActivityEnable");
    get(cupti.ActivityDisable, "cuptiActivityDisable");
    get(cupti.ActivityRegisterCallbacks, "cuptiActivityRegisterCallbacks");
    get(cupti.ActivityFlushAll, "cuptiActivityFlushAll");
    get(cupti.ActivityGetNextRecord, "cuptiActivityGetNextRecord");
    get(cupti.ActivityGetNumDroppedRecords, "cuptiActivityGetNumDroppedRecords");
    get(cupti.Subscribe, "cuptiSubscribe");
    get(cupti.Unsubscribe, "cuptiUnsubscribe");
    get(cupti.EnableDomain, "cuptiEnableDomain");
    get(cupti.EnableCallback, "cuptiEnableCallback");
    get(cupti.Finalize, "cuptiFinalize");
    get(cupti.GetStreamIdEx, "cuptiGetStreamIdEx");
    get(cupti.GetContextId, "cuptiGetContextId");
    get(cupti.SetThreadIdType, "cuptiSetThreadIdType");
    // CUPTI's libcuda dependency must be this process's copy (matched by soname), the one the
    // runtime loaded too.
    std::string dir = path.substr(0, path.rfind('/') + 1);
    void* cuda = dlopen((dir + "libcuda.so.1").c_str(), RTLD_NOW | RTLD_NOLOAD);
    void* theirs = dlsym(h, "gtsim_set_observer");
    if (!cuda || !theirs || theirs != dlsym(cuda, "gtsim_set_observer")) {
        fprintf(stderr, "selfcheck: libcupti resolved a different libcuda\n");
        ok = false;
    }
    return ok;
}

int check_failed(const char* file, int line, const char* what) {
    if (++g_failures <= 40) fprintf(stderr, "FAIL %s:%d: %s\n", strrchr(file, '/') ? strrchr(file, '/') + 1 : file, line, what);
    return 0;
}

int failures() { return g_failures; }

void Collected::clear() {
    std::lock_guard lk(mu);
    kernels.clear(), memcpys.clear(), memsets.clear(), apis.clear(), drivers.clear(), syncs.clear(), memory.clear();
    bad_records = buffers = empty_buffers = 0;
    completing_threads.clear();
}

Collected& collected() {
    static Collected c;
    return c;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *max_records = 0;
    switch (g_buffer_mode) {
    case BufferMode::Null:
        *buffer = nullptr;
        *size = 0;
        return;
    case BufferMode::Tiny: *size = 16; break;
    case BufferMode::Normal: *size = 4096; break; // small, so the workload fills several buffers
    }
    *buffer = static_cast<uint8_t*>(aligned_alloc(8, *size));
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    Collected& c = collected();
    std::lock_guard lk(c.mu);
    c.buffers++;
    if (valid == 0) c.empty_buffers++;
    c.completing_threads.push_back(std::this_thread::get_id());
    CUpti_Activity* rec = nullptr;
    for (;;) {
        CUptiResult r = cupti.ActivityGetNextRecord(buffer, valid, &rec);
        if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
        if (r != CUPTI_SUCCESS) {
            c.bad_records++;
            break;
        }
        switch (rec->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
            c.kernels.push_back(*reinterpret_cast<CUpti_ActivityKernel10*>(rec));
            break;
        case CUPTI_ACTIVITY_KIND_MEMCPY: c.memcpys.push_back(*reinterpret_cast<CUpti_ActivityMemcpy6*>(rec)); break;
        case CUPTI_ACTIVITY_KIND_MEMSET: c.memsets.push_back(*reinterpret_cast<CUpti_ActivityMemset4*>(rec)); break;
        case CUPTI_ACTIVITY_KIND_RUNTIME: c.apis.push_back(*reinterpret_cast<CUpti_ActivityAPI*>(rec)); break;
        case CUPTI_ACTIVITY_KIND_DRIVER: c.drivers.push_back(*reinterpret_cast<CUpti_ActivityAPI*>(rec)); break;
        case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
            c.syncs.push_back(*reinterpret_cast<CUpti_ActivitySynchronization2*>(rec));
            break;
        case CUPTI_ACTIVITY_KIND_MEMORY2: c.memory.push_back(*reinterpret_cast<CUpti_ActivityMemory4*>(rec)); break;
        default: c.bad_records++; break;
        }
    }
    free(buffer);
}

Calls& calls() {
    static Calls c;
    return c;
}

Events& events() {
    static Events e;
    return e;
}

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
    auto* d = static_cast<const CUpti_CallbackData*>(data);
    {
        ApiEvent e;
        e.domain = domain, e.cbid = cbid, e.correlation = d->correlationId;
        e.tid = uint32_t(syscall(SYS_gettid));
        e.enter = d->callbackSite == CUPTI_API_ENTER;
        e.function = d->functionName ? d->functionName : "";
        e.symbol = d->symbolName ? d->symbolName : "";
        std::lock_guard lk(events().mu);
        events().list.push_back(std::move(e));
    }
    if (domain != CUPTI_CB_DOMAIN_RUNTIME_API) return;
    Calls& c = calls();
    std::lock_guard lk(c.mu);
    Call& call = c.by_corr[d->correlationId];
    call.cbid = cbid;
    call.correlation = d->correlationId;
    if (d->callbackSite == CUPTI_API_ENTER) {
        call.entered = true;
        *d->correlationData = 0x5eed0000ULL + d->correlationId; // must come back at exit
        if (d->symbolName) call.symbol = d->symbolName;
        switch (cbid) {
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
            call.grid = static_cast<const cudaLaunchKernel_v7000_params*>(d->functionParams)->gridDim;
            c.launches.push_back(d->correlationId);
            break;
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
            call.grid = static_cast<const cudaLaunchKernelExC_v11060_params*>(d->functionParams)->config->gridDim;
            c.launches.push_back(d->correlationId);
            break;
        default: break;
        }
    } else {
        call.exited = true;
        call.slot_ok = *d->correlationData == 0x5eed0000ULL + d->correlationId;
        call.return_value = *static_cast<const cudaError_t*>(d->functionReturnValue);
    }
}

namespace {

bool field(const std::string& line, const char* key, uint64_t* out) {
    std::string k = std::string("\"") + key + "\":";
    size_t p = line.find(k);
    if (p == std::string::npos) return false;
    *out = strtoull(line.c_str() + p + k.size(), nullptr, 10);
    return true;
}

std::string field_str(const std::string& line, const char* key) {
    std::string k = std::string("\"") + key + "\":\"";
    size_t p = line.find(k);
    if (p == std::string::npos) return "";
    size_t b = p + k.size();
    return line.substr(b, line.find('"', b) - b);
}

uint64_t env_u64(const char* name, uint64_t def) {
    const char* v = getenv(name);
    return v && *v ? strtoull(v, nullptr, 10) : def;
}

double env_f64(const char* name, double def) {
    const char* v = getenv(name);
    return v && *v ? strtod(v, nullptr) : def;
}

} // namespace

std::vector<LogLine> read_log(const std::string& path, uint64_t pid) {
    std::vector<LogLine> out;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        LogLine l;
        if (!field(line, "pid", &l.pid) || l.pid != pid) continue;
        l.kind = field_str(line, "kind");
        l.name = field_str(line, "name");
        l.copy = field_str(line, "copy");
        l.api = field_str(line, "api");
        field(line, "graph", &l.graph);
        field(line, "graph_node", &l.graph_node);
        field(line, "correlation", &l.correlation);
        field(line, "stream", &l.stream);
        field(line, "start", &l.start);
        field(line, "end", &l.end);
        field(line, "mono_start", &l.mono_start);
        field(line, "mono_end", &l.mono_end);
        field(line, "bytes", &l.bytes);
        if (size_t g = line.find("\"grid\":["); g != std::string::npos)
            sscanf(line.c_str() + g + 8, "%lu,%lu,%lu", &l.grid[0], &l.grid[1], &l.grid[2]);
        out.push_back(l);
    }
    return out;
}

uint64_t expected_kernel_ns(uint64_t blocks) {
    uint64_t d = env_u64("GTSIM_KERNEL_BASE_NS", 2000) + env_u64("GTSIM_KERNEL_NS_PER_BLOCK", 10) * blocks;
    const char *rank = getenv("RANK"), *slow = getenv("GTSIM_SLOW_RANK");
    if (rank && slow && *slow && strcmp(rank, slow) == 0) d = uint64_t(double(d) * env_f64("GTSIM_SLOW_FACTOR", 1.0));
    return d;
}

uint64_t expected_copy_ns(const char* dir, uint64_t bytes) {
    double gbps = strcmp(dir, "DtoH") == 0   ? env_f64("GTSIM_D2H_GBPS", 12)
                  : strcmp(dir, "DtoD") == 0 ? env_f64("GTSIM_D2D_GBPS", 500)
                                             : env_f64("GTSIM_H2D_GBPS", 12);
    return env_u64("GTSIM_COPY_BASE_NS", 1500) + uint64_t(double(bytes) / gbps);
}

uint64_t expected_memset_ns(uint64_t bytes) {
    return env_u64("GTSIM_COPY_BASE_NS", 1500) + uint64_t(double(bytes) / env_f64("GTSIM_D2D_GBPS", 500));
}

uint64_t launch_latency_ns() { return env_u64("GTSIM_LAUNCH_LATENCY_NS", 3000); }

} // namespace selfcheck

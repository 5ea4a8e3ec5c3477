/* Internal interface of the GPU simulator's libraries.
 *
 * The simulated libcuda.so.1 owns the device model, the correlation ids and the single observer
 * (the CUPTI simulator, or a test); the simulated libcudart.so.13 is a thin layer that calls
 * libcuda's exported driver functions, as CUDA 13's runtime does, and brackets each runtime call
 * with gtsim_api_enter/gtsim_api_exit. Only these gtsim_* symbols are exported besides the
 * CUDA/CUPTI API; nothing here is part of CUDA.
 */
#ifndef GTSIM_GPUSIM_H
#define GTSIM_GPUSIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Callback domains: the values of CUpti_CallbackDomain. */
enum { GTSIM_DOMAIN_DRIVER = 1, GTSIM_DOMAIN_RUNTIME = 2 };

/* One API call, passed to api_enter and again (with exit fields filled) to api_exit.
 * Valid only during the callback. */
typedef struct gtsim_api_info {
    uint32_t size;              /* sizeof(gtsim_api_info), so fields can be appended */
    uint32_t cbid;              /* CUPTI_RUNTIME_TRACE_CBID_* or CUPTI_DRIVER_TRACE_CBID_*, by domain */
    const char *function_name;  /* exported name, e.g. "cudaLaunchKernel_ptsz"; static storage */
    const char *symbol_name;    /* interned kernel name for launches, else NULL */
    uint32_t correlation_id;    /* see CUPTI_CORRELATION.md; GPU ops of this call carry it too */
    int device;                 /* device current on the calling thread */
    const void *params;         /* <api>_params from generated_cuda_{runtime_api_,}meta.h, or NULL */
    uint32_t stream_id;         /* stream the call targets (launch/copy/sync/record), else 0 */
    uint32_t event_id;          /* event of event calls, else 0 */
    uint64_t address;           /* allocation address of malloc/free calls (known at exit), else 0 */
    uint64_t bytes;             /* allocation size of malloc/free calls, else 0 */
    uint64_t enter_ns;          /* CLOCK_REALTIME ns when the call entered */
    uint64_t exit_ns;           /* CLOCK_REALTIME ns when it returned; 0 at enter */
    int return_value;           /* cudaError_t or CUresult at exit; 0 at enter */
    uint32_t domain;            /* GTSIM_DOMAIN_* */
    int nested;                 /* driver call made inside a runtime call (shares its id) */
} gtsim_api_info;

typedef enum gtsim_op_kind { GTSIM_OP_KERNEL = 1, GTSIM_OP_MEMCPY = 2, GTSIM_OP_MEMSET = 3 } gtsim_op_kind;

/* Copy directions; numbering is ours (map to CUpti_ActivityMemcpyKind explicitly). */
typedef enum gtsim_copy_kind {
    GTSIM_COPY_NONE = 0, GTSIM_COPY_HTOD = 1, GTSIM_COPY_DTOH = 2, GTSIM_COPY_DTOD = 3, GTSIM_COPY_HTOH = 4
} gtsim_copy_kind;

/* Where a copy end lives; same numbers as CUpti_ActivityMemoryKind for these three. */
typedef enum gtsim_mem_kind {
    GTSIM_MEM_UNKNOWN = 0, GTSIM_MEM_PAGEABLE = 1, GTSIM_MEM_PINNED = 2, GTSIM_MEM_DEVICE = 3
} gtsim_mem_kind;

/* One GPU operation as the device model scheduled it. Valid only during the callback. */
typedef struct gtsim_gpu_op {
    uint32_t size;             /* sizeof(gtsim_gpu_op) */
    gtsim_op_kind kind;
    uint32_t correlation_id;   /* of the API call that issued it (a graph launch for graph nodes) */
    int device;
    uint32_t stream_id;
    int async;                 /* issued by an *Async call (graph nodes: always) */
    uint64_t queued_ns;        /* host time the op was enqueued (CLOCK_REALTIME) */
    uint64_t start_ns;         /* CLOCK_REALTIME */
    uint64_t end_ns;
    const char *name;          /* kernels: interned, valid for the process lifetime; else NULL */
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t dynamic_shared;   /* bytes */
    uint64_t bytes;            /* memcpy/memset */
    gtsim_copy_kind copy_kind; /* memcpy */
    gtsim_mem_kind src_kind;   /* memcpy */
    gtsim_mem_kind dst_kind;   /* memcpy; memset: DEVICE */
    int memset_value;          /* memset */
    uint32_t runtime_correlation_id; /* id of the runtime call it came from, 0 for a driver call */
    uint32_t graph_id;         /* instantiated graph that launched it, else 0 */
    uint64_t graph_node_id;    /* its node in that graph, else 0 */
    const char *api_name;      /* the call that owns correlation_id, e.g. "cudaGraphLaunch" */
    int cooperative;           /* launched by a cooperative launch */
} gtsim_gpu_op;

/* Callbacks run on the calling application thread, with no simulator lock held, so they may
 * call back into the simulator. Any pointer may be NULL. */
typedef struct gtsim_observer {
    uint32_t size; /* sizeof(gtsim_observer) */
    void *user;
    void (*api_enter)(void *user, const gtsim_api_info *info);
    void (*api_exit)(void *user, const gtsim_api_info *info);
    void (*gpu_op)(void *user, const gtsim_gpu_op *op);
    /* Several ops at once (a graph launch); when NULL, gpu_op is called for each. */
    void (*gpu_ops)(void *user, const gtsim_gpu_op *ops, size_t count);
} gtsim_observer;

/* Install (or with NULL remove) the single observer. The struct is not copied: it must stay
 * valid until replaced. Calls already past their enter notification may still report to the
 * previous observer. */
void gtsim_set_observer(const gtsim_observer *observer);

/* A runtime API call: assigns its correlation id, makes it the thread's current runtime call
 * (driver calls inside share its id) and notifies the observer. info->size, cbid,
 * function_name, params and symbol_name must be set; the rest is filled in. */
void gtsim_api_enter(gtsim_api_info *info);
/* Its exit: info->return_value set by the caller. */
void gtsim_api_exit(gtsim_api_info *info);

/* Stream id for a CUstream/cudaStream_t as the calling thread sees it (per_thread: what handle 0
 * means, 0 the legacy default stream, 1 the per-thread one). Returns 0, or -1 for an unknown
 * handle. */
int gtsim_stream_id(const void *stream, int per_thread, uint32_t *stream_id);

/* Number of simulated devices (GTSIM_DEVICES). */
int gtsim_device_count(void);

/* The primary context of a device (NULL if none) and back (-1 if not a context). */
void *gtsim_context(int device);
int gtsim_context_device(const void *context);

/* Device of the thread's current context; the runtime's current device. -1 when none is current. */
int gtsim_current_device(void);

/* The CUfunction the runtime launches for a kernel's host function (named by dladdr, interned). */
void *gtsim_host_function(const void *host_function);
/* The cudaKernel_t (a CUkernel) CUDA 13's __cudaGetKernel gives for a host function. */
void *gtsim_host_kernel(const void *host_function);
/* Name of a CUfunction or CUkernel handle, NULL if not one. */
const char *gtsim_function_name(const void *function);

#ifdef __cplusplus
}
#endif

#endif /* GTSIM_GPUSIM_H */

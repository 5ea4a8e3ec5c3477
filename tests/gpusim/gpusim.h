/* Internal interface between the simulated libcudart and the simulated libcupti.
 *
 * The cudart simulator owns the device model and notifies one observer (the CUPTI simulator,
 * or a test) about every runtime API call and every GPU operation it schedules. Only these
 * gtsim_* symbols are exported besides the CUDA/CUPTI API; nothing here is part of CUDA.
 */
#ifndef GTSIM_GPUSIM_H
#define GTSIM_GPUSIM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One runtime API call, passed to api_enter and again (with exit fields filled) to api_exit.
 * Valid only during the callback. */
typedef struct gtsim_api_info {
    uint32_t size;              /* sizeof(gtsim_api_info), so fields can be appended */
    uint32_t cbid;              /* CUPTI_RUNTIME_TRACE_CBID_* of the call */
    const char *function_name;  /* exported name, e.g. "cudaLaunchKernel_ptsz"; static storage */
    const char *symbol_name;    /* interned kernel name for launches, else NULL */
    uint32_t correlation_id;    /* process-global, from 1; GPU ops of this call carry it too */
    int device;                 /* device current on the calling thread */
    const void *params;         /* <api>_<ver>_params from generated_cuda_runtime_api_meta.h, or NULL */
    uint32_t stream_id;         /* stream the call targets (launch/copy/sync/record), else 0 */
    uint32_t event_id;          /* event of cudaEvent* calls, else 0 */
    uint64_t address;           /* allocation address of malloc/free calls (known at exit), else 0 */
    uint64_t bytes;             /* allocation size of malloc/free calls, else 0 */
    uint64_t enter_ns;          /* CLOCK_REALTIME ns when the call entered */
    uint64_t exit_ns;           /* CLOCK_REALTIME ns when it returned; 0 at enter */
    int return_value;           /* cudaError_t at exit; 0 at enter */
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
    uint32_t correlation_id;   /* of the API call that issued it */
    int device;
    uint32_t stream_id;
    int async;                 /* issued by an *Async call */
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
} gtsim_gpu_op;

/* Callbacks run on the calling application thread, with no simulator lock held, so they may
 * call back into cudart or CUPTI. Any pointer may be NULL. */
typedef struct gtsim_observer {
    uint32_t size; /* sizeof(gtsim_observer) */
    void *user;
    void (*api_enter)(void *user, const gtsim_api_info *info);
    void (*api_exit)(void *user, const gtsim_api_info *info);
    void (*gpu_op)(void *user, const gtsim_gpu_op *op);
} gtsim_observer;

/* Install (or with NULL remove) the single observer. The struct is not copied: it must stay
 * valid until replaced. Calls already past their enter notification may still report to the
 * previous observer. */
void gtsim_set_observer(const gtsim_observer *observer);

/* Stream id for a cudaStream_t as the calling thread sees it (per_thread: 0 means the legacy
 * default stream for handle 0, 1 the per-thread one). Returns 0, or -1 for an unknown handle. */
int gtsim_stream_id(const void *stream, int per_thread, uint32_t *stream_id);

/* Number of simulated devices (GTSIM_DEVICES). */
int gtsim_device_count(void);

#ifdef __cplusplus
}
#endif

#endif /* GTSIM_GPUSIM_H */

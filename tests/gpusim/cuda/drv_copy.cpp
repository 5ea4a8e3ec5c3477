// Exported driver API: every memcpy and memset variant, under its real exported name (_v2, and
// the _ptds/_ptsz twins that use the per-thread default stream for handle 0).
#include "call.h"
#include "twins.h"

using namespace gtsim;

namespace {

// One end of a copy: where it lives, as the caller declared it (UNIFIED: from the pointer).
struct End {
    CUmemorytype type;
    const void* ptr;
};

gtsim_mem_kind kind_of(const End& e) {
    gtsim_mem_kind k = Model::get().classify(e.ptr);
    switch (e.type) {
    case CU_MEMORYTYPE_DEVICE: return GTSIM_MEM_DEVICE;
    case CU_MEMORYTYPE_HOST: return k == GTSIM_MEM_DEVICE ? GTSIM_MEM_PAGEABLE : k;
    default: return k;
    }
}

const void* dptr(CUdeviceptr p) { return reinterpret_cast<const void*>(p); }

struct Copy {
    End dst, src;
    uint64_t bytes;
    CUstream stream;
    bool per_thread, async;
};

CUresult copy(uint32_t cbid, const char* name, const void* params, const Copy& c) {
    DriverCall call(cbid, name, params);
    if (!call.has_context()) return call.finish(CUDA_ERROR_INVALID_CONTEXT);
    if (c.dst.type == CU_MEMORYTYPE_ARRAY || c.src.type == CU_MEMORYTYPE_ARRAY)
        return call.finish(CUDA_ERROR_NOT_SUPPORTED); // CUDA arrays are not modelled
    if (c.bytes == 0) return call.finish(CUDA_SUCCESS); // nothing reaches the device
    if (!c.dst.ptr || !c.src.ptr) return call.finish(CUDA_ERROR_INVALID_VALUE);
    gtsim_gpu_op op = call.new_op(GTSIM_OP_MEMCPY);
    op.src_kind = kind_of(c.src);
    op.dst_kind = kind_of(c.dst);
    bool sd = op.src_kind == GTSIM_MEM_DEVICE, dd = op.dst_kind == GTSIM_MEM_DEVICE;
    op.copy_kind = sd ? (dd ? GTSIM_COPY_DTOD : GTSIM_COPY_DTOH) : (dd ? GTSIM_COPY_HTOD : GTSIM_COPY_HTOH);
    op.async = c.async;
    op.bytes = c.bytes;
    bool ran = false;
    CUresult rc = call.enqueue(op, c.stream, c.per_thread, &ran);
    if (ran && !c.async) sleep_until_realtime(op.end_ns); // synchronous copies return when done
    return call.finish(rc);
}

End host(const void* p) { return End{CU_MEMORYTYPE_HOST, p}; }
End device(CUdeviceptr p) { return End{CU_MEMORYTYPE_DEVICE, dptr(p)}; }
End unified(CUdeviceptr p) { return End{CU_MEMORYTYPE_UNIFIED, dptr(p)}; }

End end2d(CUmemorytype t, const void* h, CUdeviceptr d) {
    return End{t, t == CU_MEMORYTYPE_HOST ? h : dptr(d)};
}

Copy copy2d(const CUDA_MEMCPY2D* p, CUstream s, bool per_thread, bool async) {
    return Copy{end2d(p->dstMemoryType, p->dstHost, p->dstDevice), end2d(p->srcMemoryType, p->srcHost, p->srcDevice),
                uint64_t{p->WidthInBytes} * p->Height, s, per_thread, async};
}

Copy copy3d(const CUDA_MEMCPY3D* p, CUstream s, bool per_thread, bool async) {
    return Copy{end2d(p->dstMemoryType, p->dstHost, p->dstDevice), end2d(p->srcMemoryType, p->srcHost, p->srcDevice),
                uint64_t{p->WidthInBytes} * p->Height * p->Depth, s, per_thread, async};
}

CUresult fill(uint32_t cbid, const char* name, const void* params, CUdeviceptr dst, unsigned value, unsigned elem,
              uint64_t count, CUstream stream, bool per_thread, bool async) {
    DriverCall call(cbid, name, params);
    if (!call.has_context()) return call.finish(CUDA_ERROR_INVALID_CONTEXT);
    if (count == 0) return call.finish(CUDA_SUCCESS);
    if (!dst) return call.finish(CUDA_ERROR_INVALID_VALUE);
    gtsim_gpu_op op = call.new_op(GTSIM_OP_MEMSET);
    op.async = async;
    op.bytes = count * elem;
    op.dst_kind = GTSIM_MEM_DEVICE;
    op.memset_value = int(value);
    bool ran = false;
    CUresult rc = call.enqueue(op, stream, per_thread, &ran);
    if (ran && !async) sleep_until_realtime(op.end_ns);
    return call.finish(rc);
}

} // namespace

#define GTSIM_COPY(fn, DstT, SrcT, dst_end, src_end, pt)                                                           \
    GTSIM_EXPORT CUresult fn(DstT dst, SrcT src, size_t n) {                                                       \
        fn##_params p{dst, src, n};                                                                                \
        return copy(GTSIM_DCBID(fn), #fn, &p, Copy{dst_end(dst), src_end(src), n, nullptr, pt, false});            \
    }
#define GTSIM_COPY_ASYNC(fn, DstT, SrcT, dst_end, src_end, pt)                                                     \
    GTSIM_EXPORT CUresult fn(DstT dst, SrcT src, size_t n, CUstream s) {                                           \
        fn##_params p{dst, src, n, s};                                                                             \
        return copy(GTSIM_DCBID(fn), #fn, &p, Copy{dst_end(dst), src_end(src), n, s, pt, true});                   \
    }
GTSIM_COPY(cuMemcpy, CUdeviceptr, CUdeviceptr, unified, unified, false)
GTSIM_COPY(cuMemcpy_ptds, CUdeviceptr, CUdeviceptr, unified, unified, true)
GTSIM_COPY_ASYNC(cuMemcpyAsync, CUdeviceptr, CUdeviceptr, unified, unified, false)
GTSIM_COPY_ASYNC(cuMemcpyAsync_ptsz, CUdeviceptr, CUdeviceptr, unified, unified, true)
GTSIM_COPY(cuMemcpyHtoD_v2, CUdeviceptr, const void*, device, host, false)
GTSIM_COPY(cuMemcpyHtoD_v2_ptds, CUdeviceptr, const void*, device, host, true)
GTSIM_COPY(cuMemcpyDtoH_v2, void*, CUdeviceptr, host, device, false)
GTSIM_COPY(cuMemcpyDtoH_v2_ptds, void*, CUdeviceptr, host, device, true)
GTSIM_COPY(cuMemcpyDtoD_v2, CUdeviceptr, CUdeviceptr, device, device, false)
GTSIM_COPY(cuMemcpyDtoD_v2_ptds, CUdeviceptr, CUdeviceptr, device, device, true)
GTSIM_COPY_ASYNC(cuMemcpyHtoDAsync_v2, CUdeviceptr, const void*, device, host, false)
GTSIM_COPY_ASYNC(cuMemcpyHtoDAsync_v2_ptsz, CUdeviceptr, const void*, device, host, true)
GTSIM_COPY_ASYNC(cuMemcpyDtoHAsync_v2, void*, CUdeviceptr, host, device, false)
GTSIM_COPY_ASYNC(cuMemcpyDtoHAsync_v2_ptsz, void*, CUdeviceptr, host, device, true)
GTSIM_COPY_ASYNC(cuMemcpyDtoDAsync_v2, CUdeviceptr, CUdeviceptr, device, device, false)
GTSIM_COPY_ASYNC(cuMemcpyDtoDAsync_v2_ptsz, CUdeviceptr, CUdeviceptr, device, device, true)
#undef GTSIM_COPY
#undef GTSIM_COPY_ASYNC

#define GTSIM_COPY_ND(fn, Desc, make, pt)                                                                          \
    GTSIM_EXPORT CUresult fn(const Desc* c) {                                                                      \
        fn##_params p{c};                                                                                          \
        if (!c) {                                                                                                  \
            DriverCall call(GTSIM_DCBID(fn), #fn, &p);                                                             \
            return call.finish(CUDA_ERROR_INVALID_VALUE);                                                          \
        }                                                                                                          \
        return copy(GTSIM_DCBID(fn), #fn, &p, make(c, nullptr, pt, false));                                        \
    }
#define GTSIM_COPY_ND_ASYNC(fn, Desc, make, pt)                                                                    \
    GTSIM_EXPORT CUresult fn(const Desc* c, CUstream s) {                                                          \
        fn##_params p{c, s};                                                                                       \
        if (!c) {                                                                                                  \
            DriverCall call(GTSIM_DCBID(fn), #fn, &p);                                                             \
            return call.finish(CUDA_ERROR_INVALID_VALUE);                                                          \
        }                                                                                                          \
        return copy(GTSIM_DCBID(fn), #fn, &p, make(c, s, pt, true));                                               \
    }
GTSIM_COPY_ND(cuMemcpy2D_v2, CUDA_MEMCPY2D, copy2d, false)
GTSIM_COPY_ND(cuMemcpy2D_v2_ptds, CUDA_MEMCPY2D, copy2d, true)
GTSIM_COPY_ND(cuMemcpy2DUnaligned_v2, CUDA_MEMCPY2D, copy2d, false)
GTSIM_COPY_ND(cuMemcpy2DUnaligned_v2_ptds, CUDA_MEMCPY2D, copy2d, true)
GTSIM_COPY_ND_ASYNC(cuMemcpy2DAsync_v2, CUDA_MEMCPY2D, copy2d, false)
GTSIM_COPY_ND_ASYNC(cuMemcpy2DAsync_v2_ptsz, CUDA_MEMCPY2D, copy2d, true)
GTSIM_COPY_ND(cuMemcpy3D_v2, CUDA_MEMCPY3D, copy3d, false)
GTSIM_COPY_ND(cuMemcpy3D_v2_ptds, CUDA_MEMCPY3D, copy3d, true)
GTSIM_COPY_ND_ASYNC(cuMemcpy3DAsync_v2, CUDA_MEMCPY3D, copy3d, false)
GTSIM_COPY_ND_ASYNC(cuMemcpy3DAsync_v2_ptsz, CUDA_MEMCPY3D, copy3d, true)
#undef GTSIM_COPY_ND
#undef GTSIM_COPY_ND_ASYNC

#define GTSIM_SET(fn, T, elem, pt)                                                                                 \
    GTSIM_EXPORT CUresult fn(CUdeviceptr dst, T v, size_t n) {                                                     \
        fn##_params p{dst, v, n};                                                                                  \
        return fill(GTSIM_DCBID(fn), #fn, &p, dst, v, elem, n, nullptr, pt, false);                                \
    }
#define GTSIM_SET_ASYNC(fn, T, elem, pt)                                                                           \
    GTSIM_EXPORT CUresult fn(CUdeviceptr dst, T v, size_t n, CUstream s) {                                         \
        fn##_params p{dst, v, n, s};                                                                               \
        return fill(GTSIM_DCBID(fn), #fn, &p, dst, v, elem, n, s, pt, true);                                       \
    }
#define GTSIM_SET2D(fn, T, elem, pt)                                                                               \
    GTSIM_EXPORT CUresult fn(CUdeviceptr dst, size_t pitch, T v, size_t w, size_t h) {                             \
        fn##_params p{dst, pitch, v, w, h};                                                                        \
        return fill(GTSIM_DCBID(fn), #fn, &p, dst, v, elem, uint64_t{w} * h, nullptr, pt, false);                  \
    }
#define GTSIM_SET2D_ASYNC(fn, T, elem, pt)                                                                         \
    GTSIM_EXPORT CUresult fn(CUdeviceptr dst, size_t pitch, T v, size_t w, size_t h, CUstream s) {                 \
        fn##_params p{dst, pitch, v, w, h, s};                                                                     \
        return fill(GTSIM_DCBID(fn), #fn, &p, dst, v, elem, uint64_t{w} * h, s, pt, true);                         \
    }
GTSIM_SET(cuMemsetD8_v2, unsigned char, 1, false)
GTSIM_SET(cuMemsetD8_v2_ptds, unsigned char, 1, true)
GTSIM_SET(cuMemsetD16_v2, unsigned short, 2, false)
GTSIM_SET(cuMemsetD16_v2_ptds, unsigned short, 2, true)
GTSIM_SET(cuMemsetD32_v2, unsigned int, 4, false)
GTSIM_SET(cuMemsetD32_v2_ptds, unsigned int, 4, true)
GTSIM_SET_ASYNC(cuMemsetD8Async, unsigned char, 1, false)
GTSIM_SET_ASYNC(cuMemsetD8Async_ptsz, unsigned char, 1, true)
GTSIM_SET_ASYNC(cuMemsetD16Async, unsigned short, 2, false)
GTSIM_SET_ASYNC(cuMemsetD16Async_ptsz, unsigned short, 2, true)
GTSIM_SET_ASYNC(cuMemsetD32Async, unsigned int, 4, false)
GTSIM_SET_ASYNC(cuMemsetD32Async_ptsz, unsigned int, 4, true)
GTSIM_SET2D(cuMemsetD2D8_v2, unsigned char, 1, false)
GTSIM_SET2D(cuMemsetD2D8_v2_ptds, unsigned char, 1, true)
GTSIM_SET2D(cuMemsetD2D16_v2, unsigned short, 2, false)
GTSIM_SET2D(cuMemsetD2D16_v2_ptds, unsigned short, 2, true)
GTSIM_SET2D(cuMemsetD2D32_v2, unsigned int, 4, false)
GTSIM_SET2D(cuMemsetD2D32_v2_ptds, unsigned int, 4, true)
GTSIM_SET2D_ASYNC(cuMemsetD2D8Async, unsigned char, 1, false)
GTSIM_SET2D_ASYNC(cuMemsetD2D8Async_ptsz, unsigned char, 1, true)
GTSIM_SET2D_ASYNC(cuMemsetD2D16Async, unsigned short, 2, false)
GTSIM_SET2D_ASYNC(cuMemsetD2D16Async_ptsz, unsigned short, 2, true)
GTSIM_SET2D_ASYNC(cuMemsetD2D32Async, unsigned int, 4, false)
GTSIM_SET2D_ASYNC(cuMemsetD2D32Async_ptsz, unsigned int, 4, true)
#undef GTSIM_SET
#undef GTSIM_SET_ASYNC
#undef GTSIM_SET2D
#undef GTSIM_SET2D_ASYNC

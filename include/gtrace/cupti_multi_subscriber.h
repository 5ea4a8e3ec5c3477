// CUPTI's subscriber-scoped ("V2") activity API and its multi-subscriber mode, for code built
// against CUDA 13.0's headers (the toolkit here), which lack them. Types, signatures and values
// as in CUPTI 13.2's cupti_activity.h and cupti_callbacks.h (CUPTI_API_VERSION 130202, the pip
// wheel nvidia-cuda-cupti 13.2); the rules of the mode from the CUPTI 13.3 documentation,
// "Multiple Subscribers" (docs.nvidia.com/cupti, section 2.4):
//   - CUDA 13.3+ with an r610+ driver; requested by the first subscriber, through
//     cuptiSubscribe_v2 with allowMultipleSubscribers = 1; the setting is global, and every later
//     subscriber must ask the same;
//   - each subscriber has its own buffers (cuptiActivityRegisterCallbacks_v2), its own activity
//     kinds (cuptiActivityEnable_v2/Disable_v2) and its own callbacks (cuptiEnableCallback);
//   - the unversioned (V1) activity API and the V2 API cannot be used together in one process:
//     CUPTI answers CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
//   - CUPTI_ACTIVITY_ATTR_MULTIPLE_SUBSCRIBER_STATE (cuptiActivityGetAttribute_v2) tells what a
//     prior subscriber chose: 0 single, 1 multiple, 2 not set yet;
//   - cuptiFinalize returns early, tearing nothing down, while more than one subscriber is active.
// Both gtrace's agent (which resolves these by dlsym: they exist from CUPTI 13.2) and the GPU
// simulator (tests/gpusim, which models the mode as an option) use this one declaration.
#pragma once
#include <cupti.h>

#include <cstddef>
#include <cstdint>

#if !defined(CUPTI_API_VERSION) || CUPTI_API_VERSION < 130200
typedef struct {
    size_t structSize;
} CUpti_BufferCallbackRequestInfo;

typedef struct {
    size_t structSize;
    uint64_t threadId;
    void** ppRecordLayouts; // CUpti_ActivityRecordLayout** in 13.2: user-defined records only
    size_t numRecordLayouts;
} CUpti_BufferCallbackCompleteInfo;

typedef void(CUPTIAPI* CUpti_BuffersCallbackRequestFunc_v2)(uint8_t** buffer, size_t* size, size_t* maxNumRecords,
                                                            CUpti_BufferCallbackRequestInfo* pBufferRequestInfo);
typedef void(CUPTIAPI* CUpti_BuffersCallbackCompleteFunc_v2)(uint8_t* buffer, size_t size, size_t validSize,
                                                             CUpti_BufferCallbackCompleteInfo* pBufferCompleteInfo);
typedef struct CUpti_ActivityConfig CUpti_ActivityConfig; // field selection: user-defined records only

extern "C" {
CUptiResult CUPTIAPI cuptiActivityEnable_v2(CUpti_SubscriberHandle subscriber, CUpti_ActivityKind kind,
                                            CUpti_ActivityConfig* pActivityConfig);
CUptiResult CUPTIAPI cuptiActivityDisable_v2(CUpti_SubscriberHandle subscriber, CUpti_ActivityKind kind,
                                             CUpti_ActivityConfig* pActivityConfig);
CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks_v2(CUpti_SubscriberHandle subscriber,
                                                       CUpti_BuffersCallbackRequestFunc_v2 funcBufferRequested,
                                                       CUpti_BuffersCallbackCompleteFunc_v2 funcBufferCompleted);
CUptiResult CUPTIAPI cuptiActivityGetAttribute_v2(CUpti_SubscriberHandle subscriber, CUpti_ActivityAttribute attr,
                                                  size_t* valueSize, void* value);
}
#endif

namespace gtrace::cupti_v2 {

// CUpti_SubscriberParams as CUPTI 13.2 has it: 13.0's fields, then the request for several
// subscribers. CUPTI reads the field only when structSize covers it.
struct SubscriberParams {
    size_t structSize = sizeof(SubscriberParams);
    const char* subscriberName = nullptr;
    char* oldSubscriberName = nullptr;
    size_t oldSubscriberSize = 0;
    uint8_t allowMultipleSubscribers = 0;
    uint8_t padding[7] = {};
};
constexpr size_t kAllowMultipleEnd = offsetof(SubscriberParams, allowMultipleSubscribers) + 1;

// CUpti_ActivityAttribute values new in 13.2 (after 13.0's last, DEVICE_BUFFER_SIZE_DEVICE_GRAPHS = 10).
constexpr int kAttrUserDefinedRecords = 11;
constexpr int kAttrMultipleSubscriberState = 12;
enum MultipleSubscriberState : uint8_t { kSingle = 0, kMultiple = 1, kNotSet = 2 };

} // namespace gtrace::cupti_v2

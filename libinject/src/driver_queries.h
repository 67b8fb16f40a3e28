// The driver calls the injector does not subscribe to although it takes the rest of the driver
// API domain (for api_error events): queries libraries make at a high rate and whose failures are
// never more than routine. Each subscribed call costs an enter and an exit callback. Shared with
// the overhead benchmark's null subscriber (bench/overhead/null_subscriber.cc), which must
// subscribe exactly as the injector does.
#ifndef CUFLIGHT_LIBINJECT_SRC_DRIVER_QUERIES_H_
#define CUFLIGHT_LIBINJECT_SRC_DRIVER_QUERIES_H_

#include <cupti.h>

namespace cuflight::inject {

inline constexpr CUpti_CallbackId kUnsubscribedQueries[] = {
    CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress,
    CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress_v2,
    CUPTI_DRIVER_TRACE_CBID_cuGetExportTable,
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent,
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice,
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice_v2,
    CUPTI_DRIVER_TRACE_CBID_cuDeviceGet,
    CUPTI_DRIVER_TRACE_CBID_cuDeviceGetCount,
    CUPTI_DRIVER_TRACE_CBID_cuDeviceGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuDriverGetVersion,
    CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState,
    CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttributes,
    CUPTI_DRIVER_TRACE_CBID_cuFuncGetAttribute,
};

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_DRIVER_QUERIES_H_

// The fixed-size record the CUPTI callback copies into the ring for each recorded launch: all the
// sender thread needs to build the kernel event, nothing that must be freed. Its layout is the
// black box's (cuflight/blackbox/launch_record.h): the ring lives in memory the collector reads
// after the process died. Here its function is a FunctionInfo pointer.
#ifndef CUFLIGHT_LIBINJECT_SRC_LAUNCH_RECORD_H_
#define CUFLIGHT_LIBINJECT_SRC_LAUNCH_RECORD_H_

#include <type_traits>

#include "cuflight/blackbox/launch_record.h"

namespace cuflight::inject {

struct FunctionInfo;

using blackbox::kLaunchApiCount;
using blackbox::kLaunchApiNames;
using blackbox::LaunchApi;
using blackbox::LaunchApiName;
using blackbox::RecordKind;

using LaunchRecord = blackbox::BasicLaunchRecord<const FunctionInfo*>;
static_assert(std::is_trivially_copyable_v<LaunchRecord>);
static_assert(sizeof(LaunchRecord) == blackbox::kLaunchRecordBytes);

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_LAUNCH_RECORD_H_

// The log sink's file names: the layout shared with the injected library's spill files, defined
// in cuflight/schema/log_layout.h, under the collector's namespace.
#ifndef CUFLIGHT_LOGSTORE_FILES_SEGMENT_NAMES_H_
#define CUFLIGHT_LOGSTORE_FILES_SEGMENT_NAMES_H_

#include "cuflight/schema/log_layout.h"

namespace cuflight::logstore {

using schema::ActiveFileName;
using schema::ExeBaseName;
using schema::IsDateDirName;
using schema::kMaxNameComponentBytes;
using schema::LogFileKind;
using schema::ParsedLogFileName;
using schema::ParseLogFileName;
using schema::SanitizeNameComponent;
using schema::SegmentFileName;
using schema::StartDate;
using schema::StreamBaseName;

}  // namespace cuflight::logstore

#endif  // CUFLIGHT_LOGSTORE_FILES_SEGMENT_NAMES_H_

# The collector's log sink (log_sink.h and its helpers): sources and libraries, included by the
# daemon's CMakeLists.txt (into the cuflight_collector library) and by tests/collector/log_sink.cmake.
#   CUFLIGHT_LOGSINK_SOURCES     absolute paths of the .cc files
#   CUFLIGHT_LOGSINK_INCLUDE_DIR the directory of their headers (include "log_sink.h")
#   CUFLIGHT_LOGSINK_LIBS        what they link: the log files (cuflight::logfiles: the directory,
#                                segment names and files, zstd), schema, spdlog, nlohmann_json,
#                                threads
#
# spdlog, nlohmann_json and Threads are found by the top-level CMakeLists.txt; cuflight::logfiles
# is defined in logstore/files/.

set(CUFLIGHT_LOGSINK_INCLUDE_DIR ${CMAKE_CURRENT_LIST_DIR})
set(CUFLIGHT_LOGSINK_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/log_sink.cc
  ${CMAKE_CURRENT_LIST_DIR}/retention.cc
  ${CMAKE_CURRENT_LIST_DIR}/segment_worker.cc)
set(CUFLIGHT_LOGSINK_LIBS cuflight::logfiles cuflight::schema spdlog::spdlog_header_only
    nlohmann_json::nlohmann_json Threads::Threads)

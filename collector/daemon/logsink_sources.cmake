# The collector's log sink (log_sink.h and its helpers): sources and libraries, included by the
# daemon's CMakeLists.txt (into the cuflight_collector library) and by tests/collector/log_sink.cmake.
#   CUFLIGHT_LOGSINK_SOURCES     absolute paths of the .cc files
#   CUFLIGHT_LOGSINK_INCLUDE_DIR the directory of their headers (include "log_sink.h")
#   CUFLIGHT_LOGSINK_LIBS        what they link: schema (the file layout), zstd, spdlog, nlohmann_json, threads
#
# zstd comes from Debian's libzstd-dev (zstd.h and libzstd, >= 1.4 for ZSTD_compressStream2). The
# interface target cuflight_zstd wraps it; it is defined once, whoever includes this first.
# spdlog, nlohmann_json and Threads are found by the top-level CMakeLists.txt.

if(NOT TARGET cuflight_zstd)
  # The static library where there is one (Debian's libzstd-dev ships libzstd.a), so the
  # binaries run on machines without libzstd (the GPU machine the build is carried to).
  find_path(CUFLIGHT_ZSTD_INCLUDE_DIR zstd.h)
  find_library(CUFLIGHT_ZSTD_LIBRARY NAMES libzstd.a zstd)
  if(NOT CUFLIGHT_ZSTD_INCLUDE_DIR OR NOT CUFLIGHT_ZSTD_LIBRARY)
    message(FATAL_ERROR "The collector's log sink needs zstd (zstd.h and libzstd); "
                        "on Debian: apt-get install libzstd-dev")
  endif()
  add_library(cuflight_zstd INTERFACE)
  target_include_directories(cuflight_zstd SYSTEM INTERFACE ${CUFLIGHT_ZSTD_INCLUDE_DIR})
  target_link_libraries(cuflight_zstd INTERFACE ${CUFLIGHT_ZSTD_LIBRARY})
endif()

set(CUFLIGHT_LOGSINK_INCLUDE_DIR ${CMAKE_CURRENT_LIST_DIR})
set(CUFLIGHT_LOGSINK_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/log_dir.cc
  ${CMAKE_CURRENT_LIST_DIR}/log_sink.cc
  ${CMAKE_CURRENT_LIST_DIR}/retention.cc
  ${CMAKE_CURRENT_LIST_DIR}/segment_error_log.cc
  ${CMAKE_CURRENT_LIST_DIR}/segment_file.cc
  ${CMAKE_CURRENT_LIST_DIR}/segment_worker.cc
  ${CMAKE_CURRENT_LIST_DIR}/zstd_file.cc)
set(CUFLIGHT_LOGSINK_LIBS cuflight::schema cuflight_zstd spdlog::spdlog_header_only nlohmann_json::nlohmann_json Threads::Threads)

# log_sink_test: the collector's log sink, built from its sources directly (not through the
# daemon's library), so it builds and runs on its own.
include(${PROJECT_SOURCE_DIR}/collector/daemon/logsink_sources.cmake)

cuflight_add_gtest(NAME log_sink_test
  SOURCES
    ${CUFLIGHT_LOGSINK_SOURCES}
    ${CMAKE_CURRENT_LIST_DIR}/log_sink_test_util.cc
    ${CMAKE_CURRENT_LIST_DIR}/log_sink_names_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/log_sink_append_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/log_sink_rotation_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/log_sink_recovery_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/log_sink_retention_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/log_sink_error_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/log_sink_crash_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/log_sink_trust_test.cc
  LIBS ${CUFLIGHT_LOGSINK_LIBS} cuflight_test_support)
target_include_directories(log_sink_test PRIVATE ${CUFLIGHT_LOGSINK_INCLUDE_DIR})

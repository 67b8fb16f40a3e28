# ingest_bench: the collector's ingest rate (events/s per core of its loop thread, with
# validation and file writing) next to a raw byte copy of the same stream, and the
# cuflight-collector binary's peak RSS under that load.
add_executable(ingest_bench ${CMAKE_CURRENT_LIST_DIR}/ingest_bench.cc)
cuflight_target_defaults(ingest_bench)
target_link_libraries(ingest_bench PRIVATE
  cuflight::collector cuflight::metrics cuflight::schema spdlog::spdlog_header_only benchmark::benchmark
  Threads::Threads)
target_compile_definitions(ingest_bench PRIVATE
  CUFLIGHT_COLLECTOR_PATH="$<TARGET_FILE:cuflight-collector>")
add_dependencies(ingest_bench cuflight-collector)

# ring_bench: push/pop cost of the launch ring (libinject/ring).
add_executable(ring_bench ${CMAKE_CURRENT_LIST_DIR}/ring_bench.cc)
cuflight_target_defaults(ring_bench)
target_link_libraries(ring_bench PRIVATE cuflight::ring benchmark::benchmark Threads::Threads)

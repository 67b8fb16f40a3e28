if(TARGET cuflight::inject_core)
  add_executable(hot_path_bench ${CMAKE_CURRENT_SOURCE_DIR}/hot_path_bench.cc
                                ${PROJECT_SOURCE_DIR}/tests/inject/fake_cuda.cc)
  cuflight_target_defaults(hot_path_bench)
  target_include_directories(hot_path_bench PRIVATE ${PROJECT_SOURCE_DIR}/tests/inject)
  target_link_libraries(hot_path_bench PRIVATE cuflight::inject_core benchmark::benchmark)
endif()

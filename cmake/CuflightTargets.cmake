# Per-target settings for cuflight's own targets: warnings (as errors) and sanitizers.
# Third-party code never sees these flags.

function(cuflight_target_defaults target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align -Wunused
    -Woverloaded-virtual -Wnull-dereference -Wformat=2 -Wimplicit-fallthrough)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    # GCC 12 at -O3 reports impossible overlaps in std::string concatenation (GCC bug 105651).
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
  if(CUFLIGHT_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(CUFLIGHT_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=${CUFLIGHT_SANITIZE} -fno-omit-frame-pointer
                                             -fno-sanitize-recover=all)
    target_link_options(${target} PRIVATE -fsanitize=${CUFLIGHT_SANITIZE})
  endif()
endfunction()

# A GoogleTest executable with its tests discovered by CTest.
# Usage: cuflight_add_gtest(NAME name SOURCES ... LIBS ... [LABELS ...])
function(cuflight_add_gtest)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  cuflight_target_defaults(${ARG_NAME})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main GTest::gmock)
  set(labels unit)
  if(ARG_LABELS)
    set(labels ${ARG_LABELS})
  endif()
  gtest_discover_tests(${ARG_NAME} DISCOVERY_TIMEOUT 60)
  # gtest_discover_tests (CMake 3.25) keeps only the first element of a list-valued PROPERTIES
  # value, so the labels and the environment are set by a script CTest runs after it has defined
  # the discovered tests (${ARG_NAME}_TESTS).
  set(script ${CMAKE_CURRENT_BINARY_DIR}/${ARG_NAME}_properties.cmake)
  file(GENERATE OUTPUT ${script} CONTENT "
foreach(test IN LISTS ${ARG_NAME}_TESTS)
  set_tests_properties(\"\${test}\" PROPERTIES
    LABELS \"${labels}\"
    ENVIRONMENT \"CUFLIGHT_SOURCE_DIR=${PROJECT_SOURCE_DIR};CUFLIGHT_BINARY_DIR=${PROJECT_BINARY_DIR}\")
endforeach()
")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${script})
endfunction()

# Tests of the HTML report (report/render_html.cc, timeline.cc):
#   report_html_test     the page from hand-written logs: well-formed, the four charts, nothing
#                        fetched, names escaped, the review section; the timeline's join and caps
#   ReportHtmlBrowser    html_browser_test.py: headless Chromium loads the page (no console
#                        errors, charts in the DOM) and takes a screenshot to
#                        ${CMAKE_BINARY_DIR}/test-output/html/report.png
cuflight_add_gtest(NAME report_html_test
  SOURCES html_test.cc report_test_events.cc
  LIBS cuflight::report cuflight_test_support)
target_include_directories(report_html_test PRIVATE ${PROJECT_SOURCE_DIR}/report)

find_program(CUFLIGHT_TEST_PYTHON3 python3)
if(CUFLIGHT_TEST_PYTHON3)
  add_test(NAME ReportHtmlBrowser
    COMMAND ${CUFLIGHT_TEST_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/html_browser_test.py
            --cuflight $<TARGET_FILE:cuflight>
            --out ${CMAKE_BINARY_DIR}/test-output/html)
  set_tests_properties(ReportHtmlBrowser PROPERTIES LABELS unit TIMEOUT 120)
else()
  message(STATUS "tests/report: no python3; the headless-browser test of the HTML report is not built")
endif()

// A minimal HTTP/1.1 GET over a raw loopback socket, for the metrics endpoint tests: the tests
// check the server's bytes, so the client is as plain as possible.
#ifndef CUFLIGHT_TESTS_METRICS_HTTP_GET_H_
#define CUFLIGHT_TESTS_METRICS_HTTP_GET_H_

#include <map>
#include <string>

namespace cuflight::collector::testing {

struct HttpResponse {
  int status = 0;                              // 0: no response (see error)
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string error;
};

// GET `path` from 127.0.0.1:`port` with "Connection: close"; reads to EOF (10 s timeout).
HttpResponse HttpGet(int port, const std::string& path);

}  // namespace cuflight::collector::testing

#endif  // CUFLIGHT_TESTS_METRICS_HTTP_GET_H_

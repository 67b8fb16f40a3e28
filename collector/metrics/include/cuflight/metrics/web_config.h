// The metrics endpoint's "web config": the YAML file Prometheus exporters take with
// --web.config.file (exporter-toolkit's format,
// https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md), read by
// `cuflight-collector --web-config FILE`, and the HTTP basic authentication it configures.
//
// Design:
//  1. The part of the format cuflight serves: `basic_auth_users` (user name: bcrypt hash of the
//     password, "$2a$", "$2b$" or "$2y$"), `tls_server_config` with `cert_file`, `key_file`,
//     `client_ca_file`, `client_auth_type` (NoClientCert, VerifyClientCertIfGiven,
//     RequireAndVerifyClientCert), `min_version` and `max_version` (TLS12, TLS13) and
//     `prefer_server_cipher_suites`, and `http_server_config.http2` (accepted and ignored: the
//     endpoint speaks HTTP/1.1). Anything else is refused with one line naming it, never ignored:
//     unknown keys (exporter-toolkit reads the file strictly too), the keys not served (inline
//     PEM, cipher and curve lists, client_allowed_sans, rate_limit), the client_auth_types
//     exporter-toolkit calls insecure, TLS below 1.2, a hash that is not bcrypt, files OpenSSL
//     cannot use (server_tls.h). A file that neither names a user nor turns TLS on is refused: it
//     would change nothing. Relative file names are taken from the web config's directory, as
//     exporter-toolkit does. The file is read once, at start.
//  2. Passwords are checked by crypt(3) (libxcrypt's bcrypt). A bcrypt check costs 2^cost rounds
//     (0.22 s at cost 12 on the 2-vCPU build machine; each step of cost doubles it), on the
//     metrics thread, so:
//     (a) cost is at most kMaxBcryptCost, so no single check can hold the thread for long;
//     (b) a user's password that was verified once is kept, and a later request with the same
//         user and password is compared with it in constant time instead of checked again:
//         Prometheus's scrapes cost one bcrypt check per collector lifetime (exporter-toolkit
//         caches verified credentials the same way);
//     (c) any other credential (a wrong password, an unknown user, which is checked against a
//         hash too so that both take as long) is checked only when the thread has spent at most a
//         quarter of its time on such checks: after a check that took T, the next may start 3T
//         later; before that the answer is 429 (Retry-After: 1). A client guessing passwords
//         cannot take more than that quarter from scrapes.
//  3. A request is authorised by its one `Authorization: Basic base64(user:password)` header
//     (RFC 7617); none, several, a malformed one or a password holding a NUL byte (crypt(3) would
//     see a shorter one) is refused like a wrong password.
#ifndef CUFLIGHT_METRICS_WEB_CONFIG_H_
#define CUFLIGHT_METRICS_WEB_CONFIG_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cuflight::collector {

// The highest bcrypt cost accepted: 2^14 rounds, under a second a check.
inline constexpr int kMaxBcryptCost = 14;
// The largest web config file read.
inline constexpr size_t kMaxWebConfigBytes = 1 << 20;

// The OpenSSL context tls_server_config makes (src/server_tls.h).
class ServerTls;

struct WebConfig {
  // (user name, bcrypt hash), in the file's order; names are unique, non-empty, without ':' or
  // control characters; hashes are "$2a$"/"$2b$"/"$2y$", cost 04..kMaxBcryptCost, 60 characters.
  std::vector<std::pair<std::string, std::string>> basic_auth_users;
  // Set when tls_server_config turns TLS on: the endpoint then speaks HTTPS only.
  std::shared_ptr<ServerTls> tls;
};

// Parses a web config from `yaml`; relative file names are taken from `base_dir` (empty: the
// working directory). Returns false with *error set to one line (no newline, naming the YAML line
// or the key, e.g. "basic_auth_users: 'alice' (line 2): not a bcrypt hash ...") when the text is
// not YAML, not the format of design note 1, a hash is one this libcrypt cannot check, or a TLS
// file cannot be used. Never throws.
bool ParseWebConfig(std::string_view yaml, WebConfig* out, std::string* error,
                    const std::string& base_dir = {}) noexcept;

// Reads `file` (at most kMaxWebConfigBytes) and parses it; *error is one line naming the file.
bool LoadWebConfig(const std::string& file, WebConfig* out, std::string* error) noexcept;

// The check of design notes 2 and 3. One thread at a time (the metrics server's).
class BasicAuth {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Verdict {
    kAllowed,
    kDenied,     // no, several or malformed credentials, or wrong ones: 401
    kThrottled,  // credentials not checked now (design note 2c): 429
  };

  explicit BasicAuth(WebConfig config);
  ~BasicAuth();
  BasicAuth(const BasicAuth&) = delete;
  BasicAuth& operator=(const BasicAuth&) = delete;

  // `request`: the request line and headers as read (up to the blank line). `now`: the time
  // throttling counts from.
  Verdict Check(std::string_view request, Clock::time_point now);

  // bcrypt checks run since construction (for tests and the server's stats).
  uint64_t checks() const { return checks_; }

 private:
  struct User {
    std::string name;
    std::string hash;
    std::string verified;  // the password that matched once; empty: none yet
  };
  bool BcryptMatches(const std::string& password, const std::string& hash);

  std::vector<User> users_;
  struct CryptScratch;
  std::unique_ptr<CryptScratch> scratch_;  // crypt_r's state (tens of KiB), made once
  Clock::time_point next_check_{};
  uint64_t checks_ = 0;
};

}  // namespace cuflight::collector

#endif  // CUFLIGHT_METRICS_WEB_CONFIG_H_

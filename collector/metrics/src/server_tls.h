// The metrics endpoint's TLS (web_config.h, tls_server_config): an OpenSSL server context made
// once at start from the files the web config names, and the sessions the server makes from it.
//
// Design:
//  1. Everything that can be wrong with the files (missing, not PEM, a key that does not match the
//     certificate, an unreadable CA file) is found when the context is made, so the collector
//     refuses to start with one line instead of failing every handshake later.
//  2. TLS 1.2 and 1.3 only (exporter-toolkit's default range); client certificates are asked for
//     only in the two modes exporter-toolkit documents as secure: RequireAndVerifyClientCert and
//     VerifyClientCertIfGiven, both against client_ca_file.
//  3. Sessions are non-blocking: the server drives SSL_read and SSL_write from its epoll loop and
//     waits for whichever direction OpenSSL asks for (metrics_server.cc). Partial writes are
//     enabled so a large exposition goes out as the socket takes it.
#ifndef CUFLIGHT_METRICS_SERVER_TLS_H_
#define CUFLIGHT_METRICS_SERVER_TLS_H_

#include <openssl/ssl.h>

#include <memory>
#include <string>

namespace cuflight::collector {

struct TlsSettings {
  std::string cert_file;       // PEM certificate chain, the server's first
  std::string key_file;        // PEM private key of that certificate
  std::string client_ca_file;  // PEM CAs that sign client certificates; empty: none
  enum class ClientAuth { kNone, kVerifyIfGiven, kRequireAndVerify };
  ClientAuth client_auth = ClientAuth::kNone;
  int min_version = TLS1_2_VERSION;
  int max_version = TLS1_3_VERSION;
  bool prefer_server_ciphers = true;
};

class ServerTls {
 public:
  // Makes the context; nullptr with *error set to one line naming the file and OpenSSL's reason.
  static std::shared_ptr<ServerTls> Make(const TlsSettings& settings, std::string* error);
  ~ServerTls();
  ServerTls(const ServerTls&) = delete;
  ServerTls& operator=(const ServerTls&) = delete;

  // A server session on the accepted socket `fd` (not owned), or nullptr (out of memory). Any
  // thread; the session is then used by one thread at a time.
  SSL* NewSession(int fd) const;

 private:
  explicit ServerTls(SSL_CTX* ctx) : ctx_(ctx) {}
  SSL_CTX* ctx_;
};

}  // namespace cuflight::collector

#endif  // CUFLIGHT_METRICS_SERVER_TLS_H_

#include "server_tls.h"

#include <openssl/err.h>
#include <openssl/x509.h>

namespace cuflight::collector {

namespace {

// OpenSSL's reason for the last failure on this thread's error queue, emptied.
std::string OpenSslReason() {
  unsigned long last = 0;
  while (const unsigned long e = ERR_get_error()) last = e;
  if (last == 0) return "unknown reason";
  char buf[256];
  ERR_error_string_n(last, buf, sizeof(buf));
  const char* reason = ERR_reason_error_string(last);
  return reason != nullptr ? std::string(reason) : std::string(buf);
}

}  // namespace

std::shared_ptr<ServerTls> ServerTls::Make(const TlsSettings& s, std::string* error) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) {
    *error = "cannot make a TLS context: " + OpenSslReason();
    return nullptr;
  }
  std::shared_ptr<ServerTls> tls(new ServerTls(ctx));
  SSL_CTX_set_min_proto_version(ctx, s.min_version);
  SSL_CTX_set_max_proto_version(ctx, s.max_version);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // No session tickets or cache: one scrape per connection, every ~15-60 s; nothing to resume.
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION |
                               (s.prefer_server_ciphers ? SSL_OP_CIPHER_SERVER_PREFERENCE : 0));
  if (SSL_CTX_use_certificate_chain_file(ctx, s.cert_file.c_str()) != 1) {
    *error = "cert_file '" + s.cert_file + "': " + OpenSslReason();
    return nullptr;
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, s.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    *error = "key_file '" + s.key_file + "': " + OpenSslReason();
    return nullptr;
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    *error = "key_file '" + s.key_file + "' is not the key of cert_file '" + s.cert_file +
             "': " + OpenSslReason();
    return nullptr;
  }
  if (!s.client_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, s.client_ca_file.c_str(), nullptr) != 1) {
      *error = "client_ca_file '" + s.client_ca_file + "': " + OpenSslReason();
      return nullptr;
    }
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(s.client_ca_file.c_str());
    if (names == nullptr) {
      *error = "client_ca_file '" + s.client_ca_file + "': no certificate in it";
      return nullptr;
    }
    SSL_CTX_set_client_CA_list(ctx, names);  // takes ownership
  }
  switch (s.client_auth) {
    case TlsSettings::ClientAuth::kNone:
      SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
      break;
    case TlsSettings::ClientAuth::kVerifyIfGiven:
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
      break;
    case TlsSettings::ClientAuth::kRequireAndVerify:
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
      break;
  }
  ERR_clear_error();
  return tls;
}

ServerTls::~ServerTls() { SSL_CTX_free(ctx_); }

SSL* ServerTls::NewSession(int fd) const {
  SSL* ssl = SSL_new(ctx_);
  if (ssl == nullptr) return nullptr;
  if (SSL_set_fd(ssl, fd) != 1) {
    SSL_free(ssl);
    return nullptr;
  }
  SSL_set_accept_state(ssl);
  return ssl;
}

}  // namespace cuflight::collector

#include "cuflight/metrics/web_config.h"

#include <crypt.h>
#include <yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>

#include "server_tls.h"

namespace cuflight::collector {

namespace {

std::string Quote(std::string_view text) {
  std::string out = "'";
  for (const char c : text.substr(0, 64)) {
    out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  }
  if (text.size() > 64) out += "...";
  out += "'";
  return out;
}

// The libyaml document, freed on every path.
class YamlDocument {
 public:
  YamlDocument() = default;
  ~YamlDocument() {
    if (loaded_) yaml_document_delete(&doc_);
  }
  YamlDocument(const YamlDocument&) = delete;
  YamlDocument& operator=(const YamlDocument&) = delete;
  yaml_document_t* get() { return &doc_; }
  void set_loaded() { loaded_ = true; }

 private:
  yaml_document_t doc_{};
  bool loaded_ = false;
};

class YamlParser {
 public:
  YamlParser() { ok_ = yaml_parser_initialize(&parser_) != 0; }
  ~YamlParser() {
    if (ok_) yaml_parser_delete(&parser_);
  }
  YamlParser(const YamlParser&) = delete;
  YamlParser& operator=(const YamlParser&) = delete;
  bool ok() const { return ok_; }
  yaml_parser_t* get() { return &parser_; }

  std::string Problem() const {
    std::string out = "line " + std::to_string(parser_.problem_mark.line + 1) + ": ";
    out += parser_.problem != nullptr ? parser_.problem : "not YAML";
    if (parser_.context != nullptr) out += std::string(" ") + parser_.context;
    return out;
  }

 private:
  yaml_parser_t parser_{};
  bool ok_ = false;
};

std::string Line(const yaml_node_t* node) {
  return "line " + std::to_string(node->start_mark.line + 1);
}

std::optional<std::string_view> Scalar(const yaml_node_t* node) {
  if (node == nullptr || node->type != YAML_SCALAR_NODE) return std::nullopt;
  return std::string_view(reinterpret_cast<const char*>(node->data.scalar.value),
                          node->data.scalar.length);
}

// A plain scalar YAML reads as null: empty, "~", "null" (a key with nothing after its colon).
bool IsNull(const yaml_node_t* node) {
  if (node == nullptr || node->type != YAML_SCALAR_NODE) return false;
  if (node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return false;
  const std::string_view v = *Scalar(node);
  return v.empty() || v == "~" || v == "null" || v == "Null" || v == "NULL";
}

// "$2a$", "$2b$" or "$2y$", two cost digits, '$', 53 characters of bcrypt's base64 alphabet.
bool IsBcryptHash(std::string_view hash, int* cost) {
  if (hash.size() != 60 || hash[0] != '$' || hash[1] != '2' ||
      (hash[2] != 'a' && hash[2] != 'b' && hash[2] != 'y') || hash[3] != '$' || hash[6] != '$') {
    return false;
  }
  if (hash[4] < '0' || hash[4] > '9' || hash[5] < '0' || hash[5] > '9') return false;
  *cost = (hash[4] - '0') * 10 + (hash[5] - '0');
  return std::all_of(hash.begin() + 7, hash.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '/';
  });
}

bool ParseUsers(yaml_document_t* doc, const yaml_node_t* users, WebConfig* out,
                std::string* error) {
  if (IsNull(users)) return true;
  if (users->type != YAML_MAPPING_NODE) {
    *error = "basic_auth_users (" + Line(users) + "): not a mapping of user names to bcrypt hashes";
    return false;
  }
  for (const yaml_node_pair_t* p = users->data.mapping.pairs.start;
       p < users->data.mapping.pairs.top; ++p) {
    const yaml_node_t* key = yaml_document_get_node(doc, p->key);
    const yaml_node_t* value = yaml_document_get_node(doc, p->value);
    const std::optional<std::string_view> name = Scalar(key);
    if (!name) {
      *error = "basic_auth_users (" + Line(key) + "): a user name must be a string";
      return false;
    }
    if (name->empty() || name->find(':') != std::string_view::npos ||
        std::any_of(name->begin(), name->end(),
                    [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
      *error = "basic_auth_users (" + Line(key) + "): user name " + Quote(*name) +
               " is empty or holds ':' or a control character (basic auth cannot send it)";
      return false;
    }
    for (const auto& [known, hash] : out->basic_auth_users) {
      if (known == *name) {
        *error = "basic_auth_users (" + Line(key) + "): user " + Quote(*name) + " appears twice";
        return false;
      }
    }
    const std::optional<std::string_view> hash = Scalar(value);
    int cost = 0;
    if (!hash || !IsBcryptHash(*hash, &cost)) {
      *error = "basic_auth_users: " + Quote(*name) + " (" + Line(value) +
               "): not a bcrypt hash ($2a$, $2b$ or $2y$, a cost and 53 characters; e.g. from "
               "htpasswd -nBC 10 USER)";
      return false;
    }
    if (cost < 4 || cost > kMaxBcryptCost) {
      *error = "basic_auth_users: " + Quote(*name) + " (" + Line(value) + "): bcrypt cost " +
               std::to_string(cost) + " is outside 04.." + std::to_string(kMaxBcryptCost) +
               " (each check of a new password would hold the metrics endpoint that long)";
      return false;
    }
    out->basic_auth_users.emplace_back(std::string(*name), std::string(*hash));
  }
  return true;
}

bool ParseHttpServerConfig(yaml_document_t* doc, const yaml_node_t* node, std::string* error) {
  if (IsNull(node)) return true;
  if (node->type != YAML_MAPPING_NODE) {
    *error = "http_server_config (" + Line(node) + "): not a mapping";
    return false;
  }
  for (const yaml_node_pair_t* p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top;
       ++p) {
    const yaml_node_t* key = yaml_document_get_node(doc, p->key);
    const yaml_node_t* value = yaml_document_get_node(doc, p->value);
    const std::optional<std::string_view> name = Scalar(key);
    if (name && *name == "http2") {
      const std::optional<std::string_view> v = Scalar(value);
      if (!v || (*v != "true" && *v != "false")) {
        *error = "http_server_config: http2 (" + Line(value) + "): not true or false";
        return false;
      }
      continue;  // HTTP/1.1 is served either way
    }
    *error = "http_server_config: " + (name ? Quote(*name) : std::string("a key")) + " (" +
             Line(key) + ") is not supported by cuflight-collector (only http2)";
    return false;
  }
  return true;
}

// tls_server_config (design note 1) into *settings; *enabled is false for an empty section.
bool ParseTls(yaml_document_t* doc, const yaml_node_t* node, const std::string& base_dir,
              TlsSettings* settings, bool* enabled, std::string* error) {
  *enabled = false;
  if (IsNull(node)) return true;
  if (node->type != YAML_MAPPING_NODE) {
    *error = "tls_server_config (" + Line(node) + "): not a mapping";
    return false;
  }
  if (node->data.mapping.pairs.start == node->data.mapping.pairs.top) return true;
  *enabled = true;
  const auto path = [&](std::string_view v) {
    const std::filesystem::path p{std::string(v)};
    return (p.is_relative() && !base_dir.empty() ? std::filesystem::path(base_dir) / p : p)
        .string();
  };
  const auto version = [](std::string_view v) -> int {
    if (v == "TLS12") return TLS1_2_VERSION;
    if (v == "TLS13") return TLS1_3_VERSION;
    return 0;
  };
  for (const yaml_node_pair_t* p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top;
       ++p) {
    const yaml_node_t* key = yaml_document_get_node(doc, p->key);
    const yaml_node_t* value = yaml_document_get_node(doc, p->value);
    const std::optional<std::string_view> name = Scalar(key);
    const std::optional<std::string_view> v = Scalar(value);
    const std::string where =
        "tls_server_config: " + (name ? std::string(*name) : std::string("a key")) + " (" +
        Line(key) + ")";
    if (!name) {
      *error = where + ": not a string";
      return false;
    }
    if (*name == "cert" || *name == "key" || *name == "client_ca" ||
        *name == "client_allowed_sans" || *name == "cipher_suites" ||
        *name == "curve_preferences") {
      *error = where +
               " is not supported by cuflight-collector (it reads cert_file, key_file, "
               "client_ca_file, client_auth_type, min_version, max_version, "
               "prefer_server_cipher_suites)";
      return false;
    }
    const bool known = *name == "cert_file" || *name == "key_file" || *name == "client_ca_file" ||
                       *name == "client_auth_type" || *name == "min_version" ||
                       *name == "max_version" || *name == "prefer_server_cipher_suites";
    if (!known) {
      *error = "tls_server_config: unknown key " + Quote(*name) + " (" + Line(key) + ")";
      return false;
    }
    if (!v || v->empty()) {
      *error = where + ": not a string";
      return false;
    }
    if (*name == "cert_file") {
      settings->cert_file = path(*v);
    } else if (*name == "key_file") {
      settings->key_file = path(*v);
    } else if (*name == "client_ca_file") {
      settings->client_ca_file = path(*v);
    } else if (*name == "client_auth_type") {
      if (*v == "NoClientCert") {
        settings->client_auth = TlsSettings::ClientAuth::kNone;
      } else if (*v == "VerifyClientCertIfGiven") {
        settings->client_auth = TlsSettings::ClientAuth::kVerifyIfGiven;
      } else if (*v == "RequireAndVerifyClientCert") {
        settings->client_auth = TlsSettings::ClientAuth::kRequireAndVerify;
      } else if (*v == "RequestClientCert" || *v == "RequireAnyClientCert") {
        *error = where + ": " + Quote(*v) +
                 " accepts certificates nobody verified; use RequireAndVerifyClientCert";
        return false;
      } else {
        *error = where + ": " + Quote(*v) +
                 " is not NoClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert";
        return false;
      }
    } else if (*name == "min_version" || *name == "max_version") {
      const int ver = version(*v);
      if (ver == 0) {
        *error = where + ": " + Quote(*v) + " is not TLS12 or TLS13 (nothing older is served)";
        return false;
      }
      (*name == "min_version" ? settings->min_version : settings->max_version) = ver;
    } else if (*name == "prefer_server_cipher_suites") {
      if (*v != "true" && *v != "false") {
        *error = where + ": not true or false";
        return false;
      }
      settings->prefer_server_ciphers = *v == "true";
    }
  }
  if (settings->cert_file.empty() || settings->key_file.empty()) {
    *error = "tls_server_config (" + Line(node) + "): needs both cert_file and key_file";
    return false;
  }
  if (settings->min_version > settings->max_version) {
    *error = "tls_server_config (" + Line(node) + "): min_version is above max_version";
    return false;
  }
  if (settings->client_auth != TlsSettings::ClientAuth::kNone && settings->client_ca_file.empty()) {
    *error = "tls_server_config (" + Line(node) +
             "): client_auth_type verifies client certificates against client_ca_file, which is "
             "missing";
    return false;
  }
  return true;
}

// Checks that this libcrypt computes bcrypt for `hash`'s prefix (libxcrypt may be built without
// it): a check of any password must give a hash of the same shape.
bool CryptKnows(const std::string& hash) {
  crypt_data data{};
  const char* result = crypt_r("cuflight", hash.c_str(), &data);
  return result != nullptr && result[0] == '$' && std::strlen(result) == hash.size() &&
         std::memcmp(result, hash.data(), 7) == 0;
}

bool ParseDocument(std::string_view yaml, const std::string& base_dir, WebConfig* out,
                   std::string* error) {
  YamlParser parser;
  if (!parser.ok()) {
    *error = "cannot start the YAML parser";
    return false;
  }
  yaml_parser_set_input_string(parser.get(), reinterpret_cast<const unsigned char*>(yaml.data()),
                               yaml.size());
  YamlDocument doc;
  if (yaml_parser_load(parser.get(), doc.get()) == 0) {
    *error = "not YAML: " + parser.Problem();
    return false;
  }
  doc.set_loaded();
  const yaml_node_t* root = yaml_document_get_root_node(doc.get());
  if (root != nullptr) {
    YamlDocument second;
    if (yaml_parser_load(parser.get(), second.get()) == 0) {
      *error = "not YAML: " + parser.Problem();
      return false;
    }
    second.set_loaded();
    if (yaml_document_get_root_node(second.get()) != nullptr) {
      *error = "holds more than one YAML document";
      return false;
    }
  }
  WebConfig config;
  TlsSettings tls;
  bool tls_enabled = false;
  if (root != nullptr && !IsNull(root)) {
    if (root->type != YAML_MAPPING_NODE) {
      *error = "not a mapping of basic_auth_users, tls_server_config and http_server_config";
      return false;
    }
    bool seen_users = false;
    bool seen_tls = false;
    for (const yaml_node_pair_t* p = root->data.mapping.pairs.start;
         p < root->data.mapping.pairs.top; ++p) {
      const yaml_node_t* key = yaml_document_get_node(doc.get(), p->key);
      const yaml_node_t* value = yaml_document_get_node(doc.get(), p->value);
      const std::optional<std::string_view> name = Scalar(key);
      if (name && *name == "basic_auth_users") {
        if (seen_users) {
          *error = "basic_auth_users (" + Line(key) + ") appears twice";
          return false;
        }
        seen_users = true;
        if (!ParseUsers(doc.get(), value, &config, error)) return false;
      } else if (name && *name == "http_server_config") {
        if (!ParseHttpServerConfig(doc.get(), value, error)) return false;
      } else if (name && *name == "tls_server_config") {
        if (seen_tls) {
          *error = "tls_server_config (" + Line(key) + ") appears twice";
          return false;
        }
        seen_tls = true;
        if (!ParseTls(doc.get(), value, base_dir, &tls, &tls_enabled, error)) return false;
      } else {
        *error =
            (name ? "unknown key " + Quote(*name) : std::string("a key that is not a string")) +
            " (" + Line(key) + "; keys: basic_auth_users, http_server_config, tls_server_config)";
        return false;
      }
    }
  }
  if (config.basic_auth_users.empty() && !tls_enabled) {
    *error = "names no basic_auth_users and no tls_server_config: it would change nothing";
    return false;
  }
  for (const auto& [name, hash] : config.basic_auth_users) {
    if (!CryptKnows(hash)) {
      *error = "basic_auth_users: " + Quote(name) + ": this system's crypt(3) cannot check " +
               Quote(hash.substr(0, 4)) + " hashes";
      return false;
    }
  }
  if (tls_enabled) {
    std::string why;
    config.tls = ServerTls::Make(tls, &why);
    if (config.tls == nullptr) {
      *error = "tls_server_config: " + why;
      return false;
    }
  }
  *out = std::move(config);
  return true;
}

// RFC 4648 base64 (with padding) into *out; false for anything else.
bool DecodeBase64(std::string_view in, std::string* out) {
  if (in.empty() || in.size() % 4 != 0) return false;
  out->clear();
  out->reserve(in.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  size_t padding = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    int v = 0;
    if (c >= 'A' && c <= 'Z') {
      v = c - 'A';
    } else if (c >= 'a' && c <= 'z') {
      v = c - 'a' + 26;
    } else if (c >= '0' && c <= '9') {
      v = c - '0' + 52;
    } else if (c == '+') {
      v = 62;
    } else if (c == '/') {
      v = 63;
    } else if (c == '=' && i + 2 >= in.size()) {
      ++padding;
      continue;
    } else {
      return false;
    }
    if (padding > 0) return false;  // data after '='
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return padding <= 2;
}

char AsciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return AsciiLower(x) == AsciiLower(y);
         });
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The value of the request's one Authorization header; nullopt: none or several.
std::optional<std::string_view> AuthorizationHeader(std::string_view request) {
  std::optional<std::string_view> found;
  size_t pos = request.find("\r\n");  // after the request line
  while (pos != std::string_view::npos && pos + 2 < request.size()) {
    const size_t start = pos + 2;
    const size_t end = request.find("\r\n", start);
    const std::string_view line =
        request.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (line.empty()) break;  // the blank line ending the headers
    const size_t colon = line.find(':');
    if (colon != std::string_view::npos &&
        EqualsIgnoreCase(line.substr(0, colon), "authorization")) {
      if (found) return std::nullopt;
      found = Trim(line.substr(colon + 1));
    }
    pos = end;
  }
  return found;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

}  // namespace

bool ParseWebConfig(std::string_view yaml, WebConfig* out, std::string* error,
                    const std::string& base_dir) noexcept {
  try {
    return ParseDocument(yaml, base_dir, out, error);
  } catch (const std::exception& e) {
    *error = std::string("cannot read: ") + e.what();
    return false;
  }
}

bool LoadWebConfig(const std::string& file, WebConfig* out, std::string* error) noexcept {
  try {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      *error = Quote(file) + ": cannot read: " + std::strerror(errno);  // NOLINT: at startup
      return false;
    }
    std::string text(kMaxWebConfigBytes + 1, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    if (in.bad()) {
      *error = Quote(file) + ": cannot read it";
      return false;
    }
    if (text.size() > kMaxWebConfigBytes) {
      *error = Quote(file) + ": larger than " + std::to_string(kMaxWebConfigBytes) + " bytes";
      return false;
    }
    std::string why;
    if (!ParseWebConfig(text, out, &why, std::filesystem::path(file).parent_path().string())) {
      *error = Quote(file) + ": " + why;
      return false;
    }
    return true;
  } catch (const std::exception& e) {
    *error = Quote(file) + ": " + e.what();
    return false;
  }
}

struct BasicAuth::CryptScratch {
  crypt_data data{};
};

BasicAuth::BasicAuth(WebConfig config) : scratch_(std::make_unique<CryptScratch>()) {
  for (auto& [name, hash] : config.basic_auth_users) {
    users_.push_back(User{std::move(name), std::move(hash), {}});
  }
}

BasicAuth::~BasicAuth() {
  for (User& u : users_) std::fill(u.verified.begin(), u.verified.end(), '\0');
}

bool BasicAuth::BcryptMatches(const std::string& password, const std::string& hash) {
  ++checks_;
  const char* result = crypt_r(password.c_str(), hash.c_str(), &scratch_->data);
  return result != nullptr && ConstantTimeEquals(result, hash);
}

BasicAuth::Verdict BasicAuth::Check(std::string_view request, Clock::time_point now) {
  if (users_.empty()) return Verdict::kDenied;
  const std::optional<std::string_view> header = AuthorizationHeader(request);
  if (!header) return Verdict::kDenied;
  const size_t space = header->find(' ');
  if (space == std::string_view::npos || !EqualsIgnoreCase(header->substr(0, space), "basic")) {
    return Verdict::kDenied;
  }
  std::string decoded;
  if (!DecodeBase64(Trim(header->substr(space + 1)), &decoded)) return Verdict::kDenied;
  const size_t colon = decoded.find(':');
  if (colon == std::string::npos) return Verdict::kDenied;
  const std::string_view name(decoded.data(), colon);
  const std::string password = decoded.substr(colon + 1);
  if (password.find('\0') != std::string::npos) return Verdict::kDenied;

  User* user = nullptr;
  for (User& u : users_) {
    if (u.name == name) user = &u;
  }
  if (user != nullptr && !user->verified.empty() && ConstantTimeEquals(user->verified, password)) {
    return Verdict::kAllowed;
  }
  if (now < next_check_) return Verdict::kThrottled;
  // An unknown user is checked against the first user's hash, so that it takes as long as a
  // wrong password: the answer's time does not tell which user names exist.
  const std::string& hash = user != nullptr ? user->hash : users_.front().hash;
  const Clock::time_point start = Clock::now();
  const bool matches = BcryptMatches(password, hash);
  const Clock::time_point end = Clock::now();
  next_check_ = end + 3 * (end - start);
  if (user == nullptr || !matches) return Verdict::kDenied;
  user->verified = password;
  return Verdict::kAllowed;
}

}  // namespace cuflight::collector

#include "exposition_parser.h"

#include <cstdlib>
#include <limits>
#include <set>
#include <utility>

namespace cuflight::collector::testing {

namespace {

bool IsNameStart(char c, bool colon_ok) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon_ok && c == ':');
}
bool IsNameChar(char c, bool colon_ok) {
  return IsNameStart(c, colon_ok) || (c >= '0' && c <= '9');
}

// Reads a metric name (colon_ok) or label name from s[*pos...].
bool ReadName(std::string_view s, size_t* pos, bool colon_ok, std::string* out) {
  size_t i = *pos;
  if (i >= s.size() || !IsNameStart(s[i], colon_ok)) return false;
  while (i < s.size() && IsNameChar(s[i], colon_ok)) ++i;
  *out = std::string(s.substr(*pos, i - *pos));
  *pos = i;
  return true;
}

bool ParseValue(std::string_view text, double* out) {
  if (text == "+Inf") {
    *out = std::numeric_limits<double>::infinity();
    return true;
  }
  if (text == "-Inf") {
    *out = -std::numeric_limits<double>::infinity();
    return true;
  }
  if (text == "NaN") {
    *out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (text.empty()) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+')) {
      return false;
    }
  }
  const std::string copy(text);
  char* end = nullptr;
  *out = std::strtod(copy.c_str(), &end);
  return end == copy.c_str() + copy.size();
}

bool Unescape(std::string_view text, bool quote_ok, std::string* out) {
  out->clear();
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\') {
      out->push_back(text[i]);
      continue;
    }
    if (++i == text.size()) return false;
    switch (text[i]) {
      case '\\':
        out->push_back('\\');
        break;
      case 'n':
        out->push_back('\n');
        break;
      case '"':
        if (!quote_ok) return false;
        out->push_back('"');
        break;
      default:
        return false;
    }
  }
  return true;
}

std::string SeriesKey(const Sample& s) {
  std::string key = s.name;
  for (const auto& [k, v] : s.labels) key += "\x01" + k + "\x02" + v;
  return key;
}

bool BelongsTo(const Family& family, std::string_view sample_name) {
  if (sample_name == family.name) return family.type != "histogram" && family.type != "summary";
  if (family.type == "histogram" || family.type == "summary") {
    for (std::string_view suffix : {"_sum", "_count", "_bucket"}) {
      if (suffix == "_bucket" && family.type != "histogram") continue;
      if (sample_name.size() == family.name.size() + suffix.size() &&
          sample_name.substr(0, family.name.size()) == family.name &&
          sample_name.substr(family.name.size()) == suffix) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace

const Family* Exposition::FindFamily(std::string_view name) const {
  for (const Family& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::optional<double> Exposition::Value(std::string_view name, const Labels& labels) const {
  for (const Family& f : families) {
    for (const Sample& s : f.samples) {
      if (s.name == name && s.labels == labels) return s.value;
    }
  }
  return std::nullopt;
}

std::vector<const Sample*> Exposition::SamplesNamed(std::string_view name) const {
  std::vector<const Sample*> out;
  for (const Family& f : families) {
    for (const Sample& s : f.samples) {
      if (s.name == name) out.push_back(&s);
    }
  }
  return out;
}

bool ParseExposition(std::string_view text, Exposition* out, std::string* error) {
  out->families.clear();
  std::set<std::string> family_names;
  std::set<std::string> series;
  std::string pending_help_name, pending_help;
  bool have_help = false;
  Family* current = nullptr;
  int line_no = 0;
  auto fail = [&](const std::string& what) {
    *error = "line " + std::to_string(line_no) + ": " + what;
    return false;
  };
  if (!text.empty() && text.back() != '\n') {
    line_no = 0;
    return fail("text does not end in a line feed");
  }

  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (line.empty()) return fail("empty line");

    if (line.starts_with("# HELP ")) {
      size_t pos = 7;
      std::string name;
      if (!ReadName(line, &pos, true, &name)) return fail("bad HELP name");
      if (pos >= line.size() || line[pos] != ' ') return fail("HELP without text");
      std::string help;
      if (!Unescape(line.substr(pos + 1), false, &help)) return fail("bad HELP escape");
      if (family_names.count(name) != 0) return fail("family repeated: " + name);
      pending_help_name = name;
      pending_help = help;
      have_help = true;
      current = nullptr;
      continue;
    }
    if (line.starts_with("# TYPE ")) {
      size_t pos = 7;
      std::string name;
      if (!ReadName(line, &pos, true, &name)) return fail("bad TYPE name");
      if (pos >= line.size() || line[pos] != ' ') return fail("TYPE without type");
      const std::string type(line.substr(pos + 1));
      if (type != "counter" && type != "gauge" && type != "histogram" && type != "summary" &&
          type != "untyped") {
        return fail("unknown type " + type);
      }
      if (!have_help || pending_help_name != name) return fail("TYPE without HELP: " + name);
      if (!family_names.insert(name).second) return fail("family repeated: " + name);
      out->families.push_back(Family{name, type, pending_help, {}});
      current = &out->families.back();
      have_help = false;
      continue;
    }
    if (line.front() == '#') return fail("unexpected comment");

    Sample sample;
    size_t pos = 0;
    if (!ReadName(line, &pos, true, &sample.name)) return fail("bad metric name");
    if (pos < line.size() && line[pos] == '{') {
      ++pos;
      while (true) {
        if (pos < line.size() && line[pos] == '}') {
          ++pos;
          break;
        }
        std::string label;
        if (!ReadName(line, &pos, false, &label)) return fail("bad label name");
        if (line.substr(pos, 2) != "=\"") return fail("label without =\"");
        pos += 2;
        size_t value_end = pos;
        while (value_end < line.size() && line[value_end] != '"') {
          value_end += line[value_end] == '\\' ? 2 : 1;
        }
        if (value_end >= line.size()) return fail("unterminated label value");
        std::string value;
        if (!Unescape(line.substr(pos, value_end - pos), true, &value)) {
          return fail("bad label value escape");
        }
        if (!sample.labels.emplace(label, value).second) return fail("label repeated: " + label);
        pos = value_end + 1;
        if (pos < line.size() && line[pos] == ',') {
          ++pos;
        } else if (pos >= line.size() || line[pos] != '}') {
          return fail("expected , or } after a label");
        }
      }
    }
    if (pos >= line.size() || line[pos] != ' ') return fail("no value");
    if (!ParseValue(line.substr(pos + 1), &sample.value)) return fail("bad value");
    if (current == nullptr || !BelongsTo(*current, sample.name)) {
      return fail("sample outside its family: " + sample.name);
    }
    if (!series.insert(SeriesKey(sample)).second) return fail("series repeated: " + sample.name);
    current->samples.push_back(std::move(sample));
  }
  if (have_help) return fail("HELP without TYPE: " + pending_help_name);
  return true;
}

}  // namespace cuflight::collector::testing

#include "cuflight/report/kernel_names.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <regex>

namespace cuflight::report {
namespace {

constexpr size_t kMinWidth = 8;
constexpr std::string_view kElided = "...";
// A differing argument loses a common prefix only when it is at least this long.
constexpr size_t kMinCommonPrefix = 8;

bool IsOpen(char c) { return c == '<' || c == '(' || c == '{' || c == '['; }
bool IsClose(char c) { return c == '>' || c == ')' || c == '}' || c == ']'; }

std::string Trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return std::string(s);
}

// Index of the '(' opening a trailing parameter list, or npos.
size_t ParameterListStart(std::string_view name) {
  if (!name.ends_with(')')) return std::string_view::npos;
  int depth = 0;
  for (size_t i = name.size(); i-- > 0;) {
    if (name[i] == ')') ++depth;
    if (name[i] == '(' && --depth == 0) return i;
  }
  return std::string_view::npos;
}

// Step 1: without "void " and the parameter list.
std::string StripSignature(std::string_view name) {
  std::string s(name);
  if (s.starts_with("void ")) s.erase(0, 5);
  if (const size_t p = ParameterListStart(s); p != std::string::npos && p > 0) s.erase(p);
  return s;
}

// A name split at its top-level template argument list: base<args...>rest.
struct Parsed {
  std::string base;
  bool templated = false;
  std::vector<std::string> args;
  std::string rest;
};

// Splits "a, b<c, d>, e" at the commas outside brackets.
std::vector<std::string> SplitArgs(std::string_view list) {
  std::vector<std::string> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    if (IsOpen(list[i])) ++depth;
    if (IsClose(list[i]) && depth > 0) --depth;
    if (list[i] == ',' && depth == 0) {
      out.push_back(Trim(list.substr(start, i - start)));
      start = i + 1;
    }
  }
  const std::string last = Trim(list.substr(start));
  if (!last.empty() || !out.empty()) out.push_back(last);
  return out;
}

Parsed Parse(std::string_view s) {
  Parsed p;
  int depth = 0;
  size_t open = std::string_view::npos;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<' && depth == 0) {
      open = i;
      break;
    }
    if (s[i] == '(' || s[i] == '{' || s[i] == '[') ++depth;
    if ((s[i] == ')' || s[i] == '}' || s[i] == ']') && depth > 0) --depth;
  }
  if (open == std::string_view::npos) {
    p.base = std::string(s);
    return p;
  }
  depth = 0;
  size_t close = std::string_view::npos;
  for (size_t i = open; i < s.size(); ++i) {
    if (IsOpen(s[i])) ++depth;
    if (IsClose(s[i]) && --depth == 0) {
      close = i;
      break;
    }
  }
  if (close == std::string_view::npos) {
    p.base = std::string(s);
    return p;
  }
  p.base = std::string(s.substr(0, open));
  p.templated = true;
  p.args = SplitArgs(s.substr(open + 1, close - open - 1));
  p.rest = std::string(s.substr(close + 1));
  return p;
}

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& part : parts) {
    if (!out.empty()) out += ", ";
    out += part;
  }
  return out;
}

std::string Render(const std::string& base, const std::vector<std::string>& args,
                   const std::string& rest) {
  return base + "<" + Join(args) + ">" + rest;
}

// Step 3: namespaces go ("at::native::AddFunctor" -> "AddFunctor"), and a lambda chain
// ("F(at::X&)::{lambda()#2}::operator()() const::{lambda(float)#1}") becomes "F::lambda".
std::string DropScopes(const std::string& s) {
  // A scope that holds a lambda stays: "GeluCUDAKernelImpl::lambda" says whose lambda it is.
  static const std::regex kNamespace(
      R"((^|[\s<,(*&])(?:[A-Za-z_][A-Za-z_0-9]*::(?!lambda\b)|\(anonymous namespace\)::)+)");
  static const std::regex kLambda(R"(\{lambda\([^{}]*\)#\d+\})");
  static const std::regex kCallOperator(R"(::operator\(\)\([^()]*\)( const)?)");
  static const std::regex kParamsBeforeScope(R"(\([^()]*\)( const)?::)");
  static const std::regex kLambdas(R"((::lambda)+)");
  std::string out = std::regex_replace(s, kLambda, "lambda");
  out = std::regex_replace(out, kCallOperator, "");
  for (std::string prev; prev != out;) {
    prev = out;
    out = std::regex_replace(out, kParamsBeforeScope, "::");
  }
  out = std::regex_replace(out, kLambdas, "::lambda");
  return std::regex_replace(out, kNamespace, "$1");
}

// A builtin type or a number: what step 4 drops from nested argument lists.
bool IsNoise(std::string_view arg) {
  static const std::vector<std::string_view> kWords = {
      "float",   "double",        "int",           "unsigned", "long",    "short",
      "char",    "bool",          "signed",        "const",    "half",    "__half",
      "Half",    "BFloat16",      "__nv_bfloat16", "bfloat16", "void",    "true",
      "false",   "__nv_fp8_e4m3", "__nv_fp8_e5m2", "int8_t",   "uint8_t", "int16_t",
      "int32_t", "int64_t",       "uint32_t",      "uint64_t", "size_t"};
  size_t i = 0;
  bool any = false;
  while (i < arg.size()) {
    if (arg[i] == ' ' || arg[i] == '*' || arg[i] == '&' || arg[i] == '(' || arg[i] == ')') {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < arg.size() &&
           (std::isalnum(static_cast<unsigned char>(arg[j])) || arg[j] == '_' || arg[j] == '-')) {
      ++j;
    }
    if (j == i) return false;  // some other punctuation: a template, a scope
    const std::string_view word = arg.substr(i, j - i);
    const bool number = std::isdigit(static_cast<unsigned char>(word.front())) ||
                        (word.front() == '-' && word.size() > 1);
    if (!number && std::find(kWords.begin(), kWords.end(), word) == kWords.end()) return false;
    any = true;
    i = j;
  }
  return any;
}

// Step 4 on one argument: nested argument lists lose their builtin types and numbers, and an
// emptied list goes ("AddFunctor<float>" -> "AddFunctor").
std::string DropNoise(const std::string& arg) {
  const Parsed p = Parse(arg);
  if (!p.templated) return arg;
  std::vector<std::string> kept;
  for (const std::string& a : p.args) {
    if (!IsNoise(a)) kept.push_back(DropNoise(a));
  }
  if (kept.empty()) return p.base + p.rest;
  return Render(p.base, kept, p.rest);
}

// Step 5 on one argument: its own argument list becomes "<...>".
std::string CollapseArgs(const std::string& arg) {
  const Parsed p = Parse(arg);
  if (!p.templated) return arg;
  return p.base + "<" + std::string(kElided) + ">" + p.rest;
}

// The longest prefix all of `args` share, ended at a '_' (kept in the prefix), or "".
std::string CommonPrefix(const std::vector<const std::string*>& args) {
  if (args.size() < 2) return "";
  size_t n = args[0]->size();
  for (const std::string* a : args) {
    size_t k = 0;
    while (k < n && k < a->size() && (*a)[k] == (*args[0])[k]) ++k;
    n = k;
  }
  while (n > 0 && (*args[0])[n - 1] != '_') --n;
  return n >= kMinCommonPrefix ? args[0]->substr(0, n) : "";
}

// One template's names at one step: the arguments with what every name shares elided.
struct Group {
  std::vector<size_t> members;  // indices into the names
};

// The display arguments of each member: a run of arguments common to all becomes one "...",
// a differing one loses the prefix the members share at that position. `diff_only` leaves out
// the common ones altogether (the last step's "<differing>").
std::map<size_t, std::vector<std::string>> Elide(const Group& g,
                                                 const std::vector<std::vector<std::string>>& args,
                                                 bool diff_only) {
  std::map<size_t, std::vector<std::string>> out;
  size_t common_count = SIZE_MAX;
  for (const size_t m : g.members) common_count = std::min(common_count, args[m].size());
  std::vector<bool> common(common_count, g.members.size() > 1);
  std::vector<std::string> prefix(common_count);
  for (size_t i = 0; i < common_count; ++i) {
    std::vector<const std::string*> column;
    for (const size_t m : g.members) {
      column.push_back(&args[m][i]);
      if (args[m][i] != args[g.members[0]][i]) common[i] = false;
    }
    if (!common[i]) prefix[i] = CommonPrefix(column);
  }
  for (const size_t m : g.members) {
    std::vector<std::string> shown;
    for (size_t i = 0; i < args[m].size(); ++i) {
      if (i < common_count && common[i]) {
        if (!diff_only && (shown.empty() || shown.back() != kElided)) shown.emplace_back(kElided);
        continue;
      }
      std::string a = args[m][i];
      if (i < common_count && !prefix[i].empty())
        a = std::string(kElided) + a.substr(prefix[i].size());
      shown.push_back(std::move(a));
    }
    out[m] = std::move(shown);
  }
  return out;
}

std::string CutEnd(const std::string& s, size_t width) {
  if (s.size() <= width) return s;
  return s.substr(0, width - kElided.size()) + std::string(kElided);
}

}  // namespace

std::vector<std::string> ShortenKernelNames(const std::vector<std::string>& names, size_t width) {
  width = std::max(width, kMinWidth);
  const size_t n = names.size();
  std::vector<std::string> out(n);
  std::vector<bool> done(n, false);
  std::vector<Parsed> parsed(n);
  std::map<std::string, Group> groups;  // by the template's qualified name
  for (size_t i = 0; i < n; ++i) {
    if (names[i].size() <= width) {
      out[i] = names[i];
      done[i] = true;
    }
    parsed[i] = Parse(StripSignature(names[i]));
    if (parsed[i].templated) groups[parsed[i].base].members.push_back(i);
  }
  auto fit = [&](size_t i, const std::string& candidate) {
    if (done[i] || candidate.size() > width) return;
    out[i] = candidate;
    done[i] = true;
  };
  auto all_done = [&] { return std::all_of(done.begin(), done.end(), [](bool d) { return d; }); };

  // Step 1.
  for (size_t i = 0; i < n; ++i) fit(i, StripSignature(names[i]));
  if (all_done()) return out;

  // Steps 2 to 5: the arguments of each name at each step, elided across its template's group.
  std::vector<std::vector<std::string>> args(n);
  std::vector<std::string> base(n);
  for (size_t i = 0; i < n; ++i) {
    args[i] = parsed[i].args;
    base[i] = parsed[i].base;
  }
  // The arguments part ("<..., AddFunctor, ...>rest") of each templated name.
  auto tails = [&](bool diff_only) {
    std::vector<std::string> r(n);
    for (const auto& [key, g] : groups) {
      for (auto& [m, shown] : Elide(g, args, diff_only)) {
        r[m] = "<" + Join(shown) + ">" + DropScopes(parsed[m].rest);
      }
    }
    return r;
  };
  auto try_step = [&] {
    const std::vector<std::string> t = tails(false);
    for (size_t i = 0; i < n; ++i) {
      fit(i, base[i] + (parsed[i].templated ? t[i] : DropScopes(parsed[i].rest)));
    }
  };
  auto shared = [&](size_t i) {
    return parsed[i].templated && groups[parsed[i].base].members.size() > 1;
  };
  // A shared template's own name cut to the room its arguments leave, keeping at least 8 bytes.
  auto try_cut_base = [&](bool diff_only, size_t min_base) {
    const std::vector<std::string> t = tails(diff_only);
    for (size_t i = 0; i < n; ++i) {
      if (done[i] || !shared(i) || t[i].size() + min_base > width) continue;
      const size_t room = width - t[i].size();
      fit(i, (base[i].size() <= room
                  ? base[i]
                  : base[i].substr(0, room - kElided.size()) + std::string(kElided)) +
                 t[i]);
    }
  };
  try_step();                       // step 2
  for (size_t i = 0; i < n; ++i) {  // step 3
    base[i] = DropScopes(base[i]);
    for (std::string& a : args[i]) a = DropScopes(a);
  }
  try_step();
  for (size_t i = 0; i < n; ++i) {  // step 4
    for (std::string& a : args[i]) a = DropNoise(a);
  }
  try_step();
  try_cut_base(false, kMinWidth);  // step 5
  const std::vector<std::vector<std::string>> uncollapsed = args;
  for (size_t i = 0; i < n; ++i) {  // step 6
    for (std::string& a : args[i]) a = CollapseArgs(a);
  }
  try_step();
  try_cut_base(false, kMinWidth);
  if (all_done()) return out;

  // Step 7: a template no other name shown shares needs no argument to be told apart.
  for (const auto& [key, g] : groups) {
    if (g.members.size() == 1)
      fit(g.members[0], base[g.members[0]] + "<" + std::string(kElided) + ">");
  }
  // Step 8: the differing arguments (before step 6 collapsed them) after what is left of the
  // template's name.
  args = uncollapsed;
  try_cut_base(true, kElided.size() + 2);
  const std::vector<std::string> diff = tails(true);
  for (size_t i = 0; i < n; ++i) {
    if (done[i]) continue;
    if (shared(i)) {
      out[i] = CutEnd(base[i].substr(0, 1) + std::string(kElided) + diff[i], width);
    } else {
      out[i] =
          CutEnd(parsed[i].templated ? base[i] + "<" + std::string(kElided) + ">" : base[i], width);
    }
    done[i] = true;
  }
  return out;
}

}  // namespace cuflight::report

#include "cuflight/report/kernel_names.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <regex>
#include <set>

namespace cuflight::report {
namespace {

constexpr size_t kMinWidth = 8;
constexpr std::string_view kElided = "...";
// An argument shown alone (no other name has its template there) keeps its own arguments, less
// builtin types and numbers, up to this long; longer, they become "<...>".
constexpr size_t kCompactMax = 32;
// Form 5 keeps at least this much of the outer template's name.
constexpr size_t kMinHead = 8;
// A legend entry is cut at this length: the whole name is in --json and the HTML report.
constexpr size_t kLegendMax = 240;

bool IsOpen(char c) { return c == '<' || c == '(' || c == '{' || c == '['; }
bool IsClose(char c) { return c == '>' || c == ')' || c == '}' || c == ']'; }
char CloserOf(char open) {
  switch (open) {
    case '<':
      return '>';
    case '(':
      return ')';
    case '{':
      return '}';
    default:
      return ']';
  }
}
bool IsIdent(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// ---- The tree -------------------------------------------------------------------------------

// A name, or one argument of a bracket list: text and bracket groups in turn
// ("Gemm", <args>, "::Params").
struct Node;
struct Item {
  std::string text;        // when open == 0
  char open = 0;           // '<', '(', '{' or '[' for a group
  std::vector<Node> args;  // a group's comma-separated arguments
};
struct Node {
  std::vector<Item> items;
  std::string str;  // the whole node rendered, for comparing
};

std::string RenderGroup(char open, const std::vector<std::string>& args) {
  std::string out(1, open);
  for (size_t i = 0; i < args.size(); ++i) {
    if (i > 0) out += ", ";
    out += args[i];
  }
  out += CloserOf(open);
  return out;
}

void Finish(Node* n) {
  n->str.clear();
  for (const Item& it : n->items) {
    if (it.open == 0) {
      n->str += it.text;
      continue;
    }
    std::vector<std::string> args;
    for (const Node& a : it.args) args.push_back(a.str);
    n->str += RenderGroup(it.open, args);
  }
}

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}
  bool ok() const { return ok_ && pos_ == s_.size(); }

  // Up to `close` or a ',' at this level (close != 0), or the end.
  Node ParseNode(char close) {
    Node n;
    std::string text;
    auto flush = [&] {
      if (!text.empty()) n.items.push_back(Item{std::move(text), 0, {}});
      text.clear();
    };
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (close != 0 && (c == ',' || c == close)) break;
      if (IsClose(c)) {  // unbalanced
        ok_ = false;
        return n;
      }
      if (!IsOpen(c)) {
        text += c;
        ++pos_;
        continue;
      }
      flush();
      Item group;
      group.open = c;
      const char want = CloserOf(c);
      ++pos_;
      while (true) {
        Node arg = ParseNode(want);
        if (!ok_ || pos_ >= s_.size()) {
          ok_ = false;
          return n;
        }
        if (!arg.items.empty() || s_[pos_] == ',' || !group.args.empty()) {
          group.args.push_back(std::move(arg));
        }
        if (s_[pos_++] == want) break;
      }
      n.items.push_back(std::move(group));
    }
    flush();
    // Spaces around an argument ("> >", ", x") are not part of it.
    if (!n.items.empty() && n.items.front().open == 0) {
      std::string& t = n.items.front().text;
      t.erase(0, t.find_first_not_of(' '));
    }
    if (!n.items.empty() && n.items.back().open == 0) {
      std::string& t = n.items.back().text;
      t.erase(t.find_last_not_of(' ') + 1);
    }
    std::erase_if(n.items, [](const Item& it) { return it.open == 0 && it.text.empty(); });
    Finish(&n);
    return n;
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
  bool ok_ = true;
};

Node TextNode(std::string_view s) {
  Node n;
  n.items.push_back(Item{std::string(s), 0, {}});
  Finish(&n);
  return n;
}

Node ParseName(std::string_view s) {
  Parser p(s);
  Node n = p.ParseNode(0);
  return p.ok() ? n : TextNode(s);
}

// The index of the top-level parameter list: the first '(' group right after the name or its
// template arguments; npos when none.
size_t ParameterList(const Node& n) {
  for (size_t i = 1; i < n.items.size(); ++i) {
    if (n.items[i].open != '(') continue;
    const Item& before = n.items[i - 1];
    if (before.open == '<' || (before.open == 0 && IsIdent(before.text.back()))) return i;
  }
  return std::string::npos;
}

// ---- Normalising ----------------------------------------------------------------------------

// Namespaces go ("at::native::AddFunctor" -> "AddFunctor"); a scope holding a lambda stays
// ("GeluCUDAKernelImpl::lambda" says whose lambda it is), and so does one after a template
// ("X<int>::Params").
std::string DropNamespaces(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const bool boundary = out.empty() || std::string_view(" <,(*&").find(out.back()) !=
                                             std::string_view::npos;
    if (!boundary || !(std::isalpha(static_cast<unsigned char>(s[i])) || s[i] == '_')) {
      out += s[i++];
      continue;
    }
    size_t j = i;
    while (j < s.size() && IsIdent(s[j])) ++j;
    const bool scope = s.substr(j, 2) == "::";
    const bool lambda_next = scope && s.substr(j + 2, 6) == "lambda";
    if (scope && !lambda_next) {
      i = j + 2;  // the scope goes; what follows is at a boundary again
      continue;
    }
    out.append(s.substr(i, j - i));
    i = j;
  }
  return out;
}

// Lambda chains ("F(at::X&)::{lambda()#2}::operator()() const::{lambda(float)#1}") become
// "F::lambda"; anonymous namespaces go.
std::string Normalise(std::string_view name) {
  std::string s(name);
  for (const std::string_view anon : {"(anonymous namespace)::", "<unnamed>::"}) {
    for (size_t p; (p = s.find(anon)) != std::string::npos;) s.erase(p, anon.size());
  }
  if (s.find("{lambda") != std::string::npos) {
    static const std::regex kLambda(R"(\{lambda\([^{}]*\)#\d+\})");
    static const std::regex kCallOperator(R"(::operator\(\)\([^()]*\)( const)?)");
    static const std::regex kParamsBeforeScope(R"(\([^()]*\)( const)?::)");
    static const std::regex kLambdas(R"((::lambda)+)");
    s = std::regex_replace(s, kLambda, "lambda");
    s = std::regex_replace(s, kCallOperator, "");
    for (std::string prev; prev != s;) {
      prev = s;
      s = std::regex_replace(s, kParamsBeforeScope, "::");
    }
    s = std::regex_replace(s, kLambdas, "::lambda");
  }
  return DropNamespaces(s);
}

// The tree of a name at a level: 0 without "void ", 1 also without the parameter list, 2 also
// normalised.
Node TreeAt(std::string_view name, int level) {
  std::string_view s = name;
  if (s.starts_with("void ")) s.remove_prefix(5);
  if (level == 0) return ParseName(s);
  Node n = ParseName(level >= 2 ? std::string_view(Normalise(s)) : s);
  if (const size_t p = ParameterList(n); p != std::string::npos) {
    n.items.erase(n.items.begin() + static_cast<std::ptrdiff_t>(p));
    Finish(&n);
  }
  return n;
}

// ---- Compact forms --------------------------------------------------------------------------

// A builtin type, a CUTLASS number type or a number: what a compact argument drops.
bool IsNoise(const Node& n) {
  if (n.items.size() != 1 || n.items[0].open != 0) return false;
  static const std::set<std::string_view> kWords = {
      "float",    "double",        "int",           "unsigned",      "long",     "short",
      "char",     "bool",          "signed",        "const",         "half",     "__half",
      "Half",     "BFloat16",      "__nv_bfloat16", "bfloat16",      "void",     "true",
      "false",    "__nv_fp8_e4m3", "__nv_fp8_e5m2", "int8_t",        "uint8_t",  "int16_t",
      "int32_t",  "int64_t",       "uint32_t",      "uint64_t",      "size_t",   "half_t",
      "bfloat16_t", "tfloat32_t",  "float_e4m3_t",  "float_e5m2_t",  "c10::Half", "c10::BFloat16"};
  const std::string& t = n.items[0].text;
  size_t i = 0;
  bool any = false;
  while (i < t.size()) {
    if (t[i] == ' ' || t[i] == '*' || t[i] == '&') {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < t.size() && (IsIdent(t[j]) || t[j] == '-' || t[j] == ':')) ++j;
    if (j == i) return false;
    const std::string_view word = std::string_view(t).substr(i, j - i);
    const bool number = std::isdigit(static_cast<unsigned char>(word.front())) ||
                        (word.front() == '-' && word.size() > 1);
    if (!number && !kWords.contains(word)) return false;
    any = true;
    i = j;
  }
  return any;
}

// `n` without builtin types and numbers in its argument lists; a '<' list left empty goes.
std::string WithoutNoise(const Node& n) {
  std::string out;
  for (const Item& it : n.items) {
    if (it.open == 0) {
      out += it.text;
      continue;
    }
    std::vector<std::string> kept;
    for (const Node& a : it.args) {
      if (!IsNoise(a)) kept.push_back(WithoutNoise(a));
    }
    if (kept.empty() && it.open == '<') continue;
    out += RenderGroup(it.open, kept);
  }
  return out;
}

// `n` with each argument list as "<...>".
std::string Collapsed(const Node& n) {
  std::string out;
  for (const Item& it : n.items) {
    if (it.open == 0) {
      out += it.text;
    } else {
      out += it.open;
      if (!it.args.empty()) out += kElided;
      out += CloserOf(it.open);
    }
  }
  return out;
}

// An argument no other name's argument at its place shares the template of.
std::string Compact(const Node& n) {
  std::string s = WithoutNoise(n);
  return s.size() <= kCompactMax ? s : Collapsed(n);
}

// ---- Diffing the trees ----------------------------------------------------------------------

// Nodes compared item by item: the same head text and the same bracket structure.
std::string ShapeKey(const Node& n) {
  std::string key = !n.items.empty() && n.items[0].open == 0 ? n.items[0].text : "";
  for (const Item& it : n.items) {
    key += '|';
    key += it.open == 0 ? 'T' : it.open;
    key += std::to_string(it.args.size());
  }
  return key;
}

bool IsPlainWord(const Node& n) { return n.items.size() == 1 && n.items[0].open == 0; }

// "a_b_c" -> {"a", "b", "c"}.
std::vector<std::string_view> Words(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == '_') {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

// Flat names that differ: the words they all share become "...", the first word stays when
// `keep_first` (it says which family: sm90, nvjet, triton). Each result is no longer than its
// name; a name whose words do not line up with the others' (or that gains nothing) stays whole.
std::vector<std::string> WordDiff(const std::vector<std::string_view>& texts, bool keep_first) {
  if (texts.empty()) return {};
  std::vector<std::vector<std::string_view>> words;
  for (const std::string_view t : texts) words.push_back(Words(t));
  const size_t count = words.front().size();
  bool same_count = true;
  for (const auto& w : words) same_count = same_count && w.size() == count;
  std::vector<bool> common(count, same_count);
  if (same_count) {
    for (size_t k = 0; k < count; ++k) {
      for (const auto& w : words) common[k] = common[k] && w[k] == words[0][k];
    }
  }
  std::vector<std::string> out;
  for (size_t m = 0; m < texts.size(); ++m) {
    std::string r;
    bool elided_last = false;
    if (same_count) {
      for (size_t k = 0; k < count; ++k) {
        const bool keep = !common[k] || (k == 0 && keep_first);
        if (!keep && elided_last) continue;
        if (!r.empty()) r += '_';
        r += keep ? std::string(words[m][k]) : std::string(kElided);
        elided_last = !keep;
      }
    }
    out.push_back(!same_count || r.size() >= texts[m].size() ? std::string(texts[m]) : r);
  }
  return out;
}

// A column: the nodes at one place of several names (pointers into their trees).
using Column = std::vector<const Node*>;

// The members of `col` grouped by ShapeKey, in first-seen order.
std::vector<std::vector<size_t>> Partition(const Column& col) {
  std::vector<std::vector<size_t>> parts;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < col.size(); ++i) {
    const auto [it, added] = index.emplace(ShapeKey(*col[i]), parts.size());
    if (added) parts.emplace_back();
    parts[it->second].push_back(i);
  }
  return parts;
}

bool AllEqual(const Column& col, const std::vector<size_t>& members) {
  for (const size_t m : members) {
    if (col[m]->str != col[members[0]]->str) return false;
  }
  return true;
}

// Column `j` of group item `k` of the members.
Column ArgColumn(const Column& col, const std::vector<size_t>& members, size_t k, size_t j) {
  Column out;
  for (const size_t m : members) out.push_back(&col[m]->items[k].args[j]);
  return out;
}

// The members that no partner shares a shape with: compact forms, and a word diff between flat
// names.
void RenderSingles(const Column& col, const std::vector<size_t>& singles, bool keep_first,
                   std::vector<std::string>* out) {
  std::vector<size_t> plain;
  std::vector<std::string_view> texts;
  for (const size_t m : singles) {
    (*out)[m] = Compact(*col[m]);
    if (IsPlainWord(*col[m])) {
      plain.push_back(m);
      texts.push_back(col[m]->str);
    }
  }
  std::set<std::string_view> distinct(texts.begin(), texts.end());
  if (distinct.size() < 2) return;
  const std::vector<std::string> diff = WordDiff(texts, keep_first);
  for (size_t i = 0; i < plain.size(); ++i) (*out)[plain[i]] = diff[i];
}

// Form 3 for each node of `col`: what its partners share is "...", the rest compared again.
std::vector<std::string> Nested(const Column& col, bool top) {
  std::vector<std::string> out(col.size());
  std::vector<size_t> singles;
  for (const std::vector<size_t>& part : Partition(col)) {
    if (AllEqual(col, part)) {
      for (const size_t m : part) singles.push_back(m);
      continue;
    }
    const Node& first = *col[part[0]];
    for (size_t k = 0; k < first.items.size(); ++k) {
      const Item& it = first.items[k];
      if (it.open == 0) {
        for (const size_t m : part) out[m] += col[m]->items[k].text;
        continue;
      }
      std::vector<std::vector<std::string>> shown(part.size());
      for (size_t j = 0; j < it.args.size(); ++j) {
        const Column arg = ArgColumn(col, part, k, j);
        std::vector<size_t> all(arg.size());
        for (size_t i = 0; i < all.size(); ++i) all[i] = i;
        if (AllEqual(arg, all)) {
          for (auto& s : shown) {
            if (s.empty() || s.back() != kElided) s.emplace_back(kElided);
          }
          continue;
        }
        const std::vector<std::string> diff = Nested(arg, false);
        for (size_t i = 0; i < part.size(); ++i) shown[i].push_back(diff[i]);
      }
      for (size_t i = 0; i < part.size(); ++i) out[part[i]] += RenderGroup(it.open, shown[i]);
    }
  }
  RenderSingles(col, singles, top, &out);
  return out;
}

// A column whose nodes read as values: no brackets ("64", "true"), or a tiny template of values
// (cute's "C<128>").
bool IsValueColumn(const Column& col) {
  for (const Node* n : col) {
    if (IsPlainWord(*n)) continue;
    if (n->items.size() != 2 || n->items[0].open != 0 || n->items[0].text.size() > 2 ||
        n->items[1].open == 0) {
      return false;
    }
    for (const Node& a : n->items[1].args) {
      if (!IsPlainWord(a)) return false;
    }
  }
  return true;
}

// Form 4 for each node of `col`: the places where it differs from its partners, each as the
// smallest node that says what the difference is ("GemmShape<64, ...>", "LinearCombinationRelu").
// At the top (`top`), a differing value is listed alone: the outer name stands before it.
std::vector<std::vector<std::string>> Sites(const Column& col, bool top) {
  std::vector<std::vector<std::string>> out(col.size());
  std::vector<size_t> singles;
  for (const std::vector<size_t>& part : Partition(col)) {
    if (AllEqual(col, part)) {
      for (const size_t m : part) singles.push_back(m);
      continue;
    }
    const Node& first = *col[part[0]];
    // The node with only its differing values shown, when it has any.
    std::vector<std::string> masked(part.size());
    std::vector<std::vector<std::string>> inner(part.size());
    bool any_value = false;
    for (size_t k = 0; k < first.items.size(); ++k) {
      const Item& it = first.items[k];
      if (it.open == 0) {
        const bool same = std::all_of(part.begin(), part.end(), [&](size_t m) {
          return col[m]->items[k].text == it.text;
        });
        for (size_t i = 0; i < part.size(); ++i) {
          masked[i] += col[part[i]]->items[k].text;
          if (!same && k > 0) inner[i].push_back(col[part[i]]->items[k].text);
        }
        continue;
      }
      std::vector<std::vector<std::string>> shown(part.size());
      for (size_t j = 0; j < it.args.size(); ++j) {
        const Column arg = ArgColumn(col, part, k, j);
        std::vector<size_t> all(arg.size());
        for (size_t i = 0; i < all.size(); ++i) all[i] = i;
        const bool same = AllEqual(arg, all);
        if (!same && IsValueColumn(arg)) {
          any_value = true;
          for (size_t i = 0; i < part.size(); ++i) {
            shown[i].push_back(arg[i]->str);
            if (top) inner[i].push_back(arg[i]->str);
          }
          continue;
        }
        for (auto& s : shown) {
          if (s.empty() || s.back() != kElided) s.emplace_back(kElided);
        }
        if (same) continue;
        const std::vector<std::vector<std::string>> deeper = Sites(arg, false);
        for (size_t i = 0; i < part.size(); ++i) {
          inner[i].insert(inner[i].end(), deeper[i].begin(), deeper[i].end());
        }
      }
      for (size_t i = 0; i < part.size(); ++i) masked[i] += RenderGroup(it.open, shown[i]);
    }
    for (size_t i = 0; i < part.size(); ++i) {
      out[part[i]].insert(out[part[i]].end(), inner[i].begin(), inner[i].end());
      if (any_value && !top) out[part[i]].push_back(masked[i]);
    }
  }
  std::vector<std::string> single(col.size());
  RenderSingles(col, singles, top, &single);
  for (const size_t m : singles) out[m] = {single[m]};
  return out;
}

std::string CutEnd(const std::string& s, size_t width) {
  if (s.size() <= width) return s;
  std::string out = s.substr(0, width - kElided.size());
  while (!out.empty() && (out.back() == '.' || out.back() == ' ' || out.back() == ',')) {
    out.pop_back();
  }
  return out + std::string(kElided);
}

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) {
    if (!out.empty()) out += ", ";
    out += p;
  }
  return out;
}

}  // namespace

ShortKernelNames ShortenKernelNames(const std::vector<std::string>& names, size_t width) {
  width = std::max(width, kMinWidth);
  ShortKernelNames result;
  result.names.resize(names.size());

  // The distinct names, in first-seen order: a name's id is its place here.
  std::vector<std::string> distinct;
  std::map<std::string, size_t> index;
  std::vector<size_t> of(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const auto [it, added] = index.emplace(names[i], distinct.size());
    if (added) distinct.push_back(names[i]);
    of[i] = it->second;
  }
  const size_t n = distinct.size();
  std::vector<std::string> shown(n);
  std::vector<bool> done(n, false);
  auto fit = [&](size_t i, const std::string& candidate) {
    if (done[i] || candidate.size() > width) return;
    shown[i] = candidate;
    done[i] = true;
  };

  // Forms 0 to 2. The trees compared are the normalised ones, except for names that read the
  // same normalised (they keep namespaces) or also without parameters (they keep those).
  std::vector<int> level(n, 2);
  for (int l = 2; l >= 1; --l) {
    std::map<std::string, std::vector<size_t>> by_key;
    for (size_t i = 0; i < n; ++i) {
      if (level[i] == l) by_key[TreeAt(distinct[i], l).str].push_back(i);
    }
    for (const auto& [key, members] : by_key) {
      if (members.size() > 1) {
        for (const size_t m : members) level[m] = l - 1;
      }
    }
  }
  std::vector<Node> trees(n);
  for (size_t i = 0; i < n; ++i) {
    trees[i] = TreeAt(distinct[i], level[i]);
    fit(i, distinct[i]);
    if (level[i] >= 1) fit(i, TreeAt(distinct[i], 1).str);
    fit(i, trees[i].str);
  }

  // Forms 3 to 5, from the trees of all the names (a name that fits whole is still a partner).
  Column col;
  for (const Node& t : trees) col.push_back(&t);
  const std::vector<std::string> nested = Nested(col, true);
  const std::vector<std::vector<std::string>> sites = Sites(col, true);
  std::vector<bool> outer(n, false);  // compared with partners of its own template
  for (const std::vector<size_t>& part : Partition(col)) {
    if (AllEqual(col, part)) continue;
    for (const size_t m : part) outer[m] = true;
  }
  std::vector<std::string> flat(n);
  std::vector<size_t> head_size(n, 0);  // flat[i] starts with a head of this many bytes to cut
  for (size_t i = 0; i < n; ++i) {
    const Node& t = trees[i];
    if (outer[i] && t.items.size() > 1 && t.items[0].open == 0) {
      head_size[i] = t.items[0].text.size();
      const char open = t.items[1].open != 0 ? t.items[1].open : '<';
      flat[i] = t.items[0].text + open + Join(sites[i]) + CloserOf(open);
    } else {
      flat[i] = Join(sites[i]);
    }
  }
  for (size_t i = 0; i < n; ++i) fit(i, nested[i]);
  for (size_t i = 0; i < n; ++i) fit(i, flat[i]);
  for (size_t i = 0; i < n; ++i) {
    const size_t rest = flat[i].size() - head_size[i];
    if (done[i] || head_size[i] <= kMinHead || rest + kMinHead + kElided.size() > width) continue;
    const size_t room = width - rest - kElided.size();
    fit(i, flat[i].substr(0, std::min(room, head_size[i])) + std::string(kElided) +
               flat[i].substr(head_size[i]));
  }

  // Form 6, and any two names that still read the same.
  std::set<size_t> with_id;
  for (size_t i = 0; i < n; ++i) {
    if (!done[i]) with_id.insert(i);
  }
  std::map<std::string, std::vector<size_t>> by_shown;
  for (size_t i = 0; i < n; ++i) {
    if (done[i]) by_shown[shown[i]].push_back(i);
  }
  for (const auto& [text, members] : by_shown) {
    if (members.size() > 1) with_id.insert(members.begin(), members.end());
  }
  for (const size_t i : with_id) {
    if (n == 1) {
      shown[i] = CutEnd(flat[i], width);
      continue;
    }
    const std::string id = fmt::format("K{}", i + 1);
    shown[i] = CutEnd(id + " " + flat[i], width);
    std::string full = nested[i].size() < trees[i].str.size() ? nested[i] : trees[i].str;
    if (flat[i].size() < full.size()) full = flat[i];
    result.legend.push_back({id, CutEnd(full, kLegendMax)});
  }
  for (size_t i = 0; i < names.size(); ++i) result.names[i] = shown[of[i]];
  return result;
}

std::vector<std::string> KernelNameLegendLines(const ShortKernelNames& short_names) {
  std::vector<std::string> out;
  for (const KernelNameLegendEntry& e : short_names.legend) {
    out.push_back(fmt::format("{}  {}", e.id, e.name));
  }
  return out;
}

}  // namespace cuflight::report

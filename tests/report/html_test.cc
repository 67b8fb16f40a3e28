// The HTML report on hand-written logs: the page is well-formed, self-contained, has the four
// charts, escapes names from the logs and reviews a crashed process; the timeline joins
// kernel_time to kernel events and is capped as documented.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cuflight/logread/log_reader.h"
#include "cuflight/report/build_report.h"
#include "cuflight/report/render_html.h"
#include "cuflight/report/run_report.h"
#include "cuflight/report/time_bins.h"
#include "cuflight/report/timeline.h"
#include "html_text.h"
#include "report_test_events.h"
#include "temp_dir.h"

namespace cuflight::report {
namespace {

namespace fs = std::filesystem;
using schema::Resource;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace cuflight::report::testing;  // NOLINT(build/namespaces)

using test_support::TempDir;

constexpr int64_t kStart = 1763708400000000000;  // 2025-11-21T07:00:00Z
constexpr int64_t kSecond = 1000000000;

// The kernel name the escaping tests use, and how HTML must spell it.
constexpr const char* kNastyName = "evil<&\"'>(char const*)";
constexpr const char* kNastyEscaped = "evil&lt;&amp;&quot;&#39;&gt;(char const*)";

KernelSpec Gemm(uint64_t stream = 0) {
  KernelSpec k;
  k.name = "_Z4gemmPf";
  k.demangled = "gemm(float*)";
  k.block = {256, 1, 1};
  k.regs = 64;
  k.stream = stream;
  k.occupancy = Fields(6, 8, 64, Resource::kRegisters);  // 75%
  return k;
}

KernelSpec Reduce(uint64_t stream = 0) {
  KernelSpec k;
  k.name = "_Z6reducePf";
  k.demangled = "reduce(float*)";
  k.block = {128, 1, 1};
  k.regs = 16;
  k.dyn_smem = 48 * 1024;
  k.stream = stream;
  k.occupancy = Fields(3, 4, 64, Resource::kSharedMem);  // 18.75%
  return k;
}

KernelSpec Nasty() {
  KernelSpec k;
  k.name = "_Z4evilPKc";
  k.demangled = kNastyName;
  k.block = {64, 1, 1};
  k.regs = 32;
  k.occupancy = Fields(16, 2, 64, Resource::kBlocks);  // 50%
  return k;
}

schema::OwnedKernelTimeEvent Timed(int32_t pid, uint64_t seq, uint64_t correlation_id,
                                   uint64_t start_ns, uint64_t end_ns, uint64_t stream = 0) {
  schema::OwnedKernelTimeEvent e;
  e.header = {static_cast<int64_t>(end_ns) + 1000, pid, seq};
  e.correlation_id = correlation_id;
  e.stream = stream;
  e.start_ns = start_ns;
  e.end_ns = end_ns;
  e.duration_ns = end_ns - start_ns;
  return e;
}

schema::OwnedDeviceEvent DeviceAt(int32_t pid, uint64_t seq, int64_t ts_ns) {
  schema::OwnedDeviceEvent e = Device(pid, seq, 0, "NVIDIA A100");
  e.header.ts_ns = ts_ns;
  return e;
}

schema::OwnedProcessStartEvent StartOn(int32_t pid, int64_t start, std::string exe,
                                       std::string host) {
  schema::OwnedProcessStartEvent e = Start(pid, 0, start, std::move(exe));
  e.hostname = std::move(host);
  return e;
}

// pid 100 on node1, ended normally: gemm corr 1..3 on stream 0, launched at +1 s, +2 s, +3 s and
// run on the GPU from launch + 10 us for 100, 200, 300 us; reduce corr 4 on stream 0x10 at +4 s,
// timed 1 ms from +4.5 s; reduce corr 5 on stream 0x10 at +5 s, untimed.
std::string NormalProcess() {
  constexpr int32_t pid = 100;
  std::string s = Line(StartOn(pid, kStart, "/opt/app/bin/trainer", "node1")) +
                  Line(DeviceAt(pid, 1, kStart + 1000));
  uint64_t seq = 2;
  for (uint64_t i = 1; i <= 3; ++i) {
    const int64_t ts = kStart + static_cast<int64_t>(i) * kSecond;
    s += Line(Kernel(pid, seq++, ts, i, Gemm()));
    const auto start = static_cast<uint64_t>(ts + 10000);
    s += Line(Timed(pid, seq++, i, start, start + i * 100000));
  }
  s += Line(Kernel(pid, seq++, kStart + 4 * kSecond, 4, Reduce(0x10)));
  const auto rstart = static_cast<uint64_t>(kStart + 4 * kSecond + kSecond / 2);
  s += Line(Timed(pid, seq++, 4, rstart, rstart + 1000000, 0x10));
  s += Line(Kernel(pid, seq++, kStart + 5 * kSecond, 5, Reduce(0x10)));
  schema::OwnedProcessEndEvent end = End(pid, seq++, 0);
  end.header.ts_ns = kStart + 5 * kSecond + 1000;
  s += Line(end);
  return s;
}

// pid 200 on node2, crashed: gemm corr 1 timed (its correlation ids repeat pid 100's: the join
// is per process), then the nasty kernel corr 2 at +7 s, never finished, then SIGSEGV at +8 s.
std::string CrashedProcess() {
  constexpr int32_t pid = 200;
  const int64_t start = kStart + 6 * kSecond;
  std::string s = Line(StartOn(pid, start, "/opt/app/bin/infer", "node2")) +
                  Line(DeviceAt(pid, 1, start + 500));
  s += Line(Kernel(pid, 2, kStart + 6 * kSecond + 1000, 1, Gemm()));
  const auto gstart = static_cast<uint64_t>(kStart + 6 * kSecond + 5000);
  s += Line(Timed(pid, 3, 1, gstart, gstart + 50000));
  s += Line(Kernel(pid, 4, kStart + 7 * kSecond, 2, Nasty()));
  schema::OwnedProcessCrashEvent crash;
  crash.header = {kStart + 8 * kSecond, pid, 5};
  crash.signal = 11;
  crash.signal_name = "SIGSEGV";
  crash.code = 1;
  crash.addr = 0x10;
  crash.tid = pid;
  s += Line(crash);
  return s;
}

bool Build(const fs::path& dir, const ReportOptions& options, Report* report) {
  ReportOptions o = options;
  o.paths = {dir.string()};
  o.keep_launches = true;  // as RunHtmlReport builds it, for the timeline
  std::string error;
  if (!CheckReportOptions(o, &error)) {
    ADD_FAILURE() << error;
    return false;
  }
  std::vector<fs::path> files;
  if (!logread::ExpandLogPaths(o.paths, &files, &error) ||
      !BuildReport(o, files, report, &error)) {
    ADD_FAILURE() << error;
    return false;
  }
  return true;
}

std::string Page(const fs::path& dir, const ReportOptions& options = {},
                 const HtmlOptions& html = {}) {
  Report report;
  if (!Build(dir, options, &report)) return "";
  std::ostringstream out;
  std::string error;
  EXPECT_TRUE(RenderHtml(report, options, html, out, &error)) << error;
  return out.str();
}

// A small checker of the HTML this renderer emits: every '<' opens a tag, comment or doctype;
// every element but the void ones is closed in order (or self-closed, as SVG elements may be);
// attribute values are double-quoted; '&' starts a character reference; <script> and <style>
// hold raw text up to their end tag. Returns "" when well-formed, else what is wrong and where.
std::string CheckWellFormed(const std::string& page) {
  static const std::set<std::string> kVoid = {"meta", "br", "link", "img", "input", "hr", "col"};
  static const std::regex kEntity(R"(^&(#[0-9]+|#x[0-9a-fA-F]+|[a-zA-Z][a-zA-Z0-9]*);)");
  std::vector<std::string> open;
  size_t i = 0;
  auto where = [&](size_t at) {
    return " at byte " + std::to_string(at) + ": '" + page.substr(at, 60) + "'";
  };
  auto check_entities = [&](size_t from, size_t to) -> std::string {
    for (size_t k = from; k < to; ++k) {
      if (page[k] == '>') return "raw '>' in text" + where(k);
      if (page[k] != '&') continue;
      const std::string rest = page.substr(k, std::min<size_t>(12, to - k));
      if (!std::regex_search(rest, kEntity)) return "bare '&'" + where(k);
    }
    return "";
  };
  while (i < page.size()) {
    const size_t lt = page.find('<', i);
    const size_t text_end = lt == std::string::npos ? page.size() : lt;
    if (std::string e = check_entities(i, text_end); !e.empty()) return e;
    if (lt == std::string::npos) break;
    if (page.compare(lt, 4, "<!--") == 0) {
      const size_t end = page.find("-->", lt);
      if (end == std::string::npos) return "unclosed comment" + where(lt);
      i = end + 3;
      continue;
    }
    if (page.compare(lt, 2, "<!") == 0) {
      i = page.find('>', lt) + 1;
      continue;
    }
    const bool closing = page.compare(lt, 2, "</") == 0;
    size_t k = lt + (closing ? 2 : 1);
    const size_t name_start = k;
    while (k < page.size() && (std::isalnum(static_cast<unsigned char>(page[k])) != 0 ||
                               page[k] == '-')) {
      ++k;
    }
    const std::string name = page.substr(name_start, k - name_start);
    if (name.empty()) return "'<' that opens no tag" + where(lt);
    // Attributes: name="value" pairs; a value holds no '<', '>' or '"'.
    bool self_closing = false;
    while (true) {
      while (k < page.size() && std::isspace(static_cast<unsigned char>(page[k])) != 0) ++k;
      if (k >= page.size()) return "unterminated tag" + where(lt);
      if (page[k] == '>') break;
      if (page.compare(k, 2, "/>") == 0) {
        self_closing = true;
        ++k;
        break;
      }
      if (closing) return "attribute in an end tag" + where(lt);
      const size_t attr = k;
      while (k < page.size() && page[k] != '=' && page[k] != '>' &&
             std::isspace(static_cast<unsigned char>(page[k])) == 0) {
        ++k;
      }
      if (k == attr || page[k] != '=' || page[k + 1] != '"') {
        return "attribute without a double-quoted value" + where(attr);
      }
      const size_t value = k + 2;
      const size_t quote = page.find('"', value);
      if (quote == std::string::npos) return "unterminated attribute" + where(attr);
      if (page.find('<', value) < quote) return "'<' in an attribute value" + where(attr);
      if (std::string e = check_entities(value, quote); !e.empty()) return e;
      k = quote + 1;
    }
    i = k + 1;
    if (closing) {
      if (open.empty() || open.back() != name) {
        return "</" + name + "> closes <" + (open.empty() ? "nothing" : open.back()) + ">" +
               where(lt);
      }
      open.pop_back();
      continue;
    }
    if (self_closing || kVoid.contains(name)) continue;
    if (name == "script" || name == "style") {
      const size_t end = page.find("</" + name + ">", i);
      if (end == std::string::npos) return "unclosed <" + name + ">" + where(lt);
      i = end + name.size() + 3;
      continue;
    }
    open.push_back(name);
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  return "";
}

// The <svg> element with `id`, from its start tag to its end tag; "" when absent.
std::string SvgById(const std::string& page, const std::string& id) {
  const size_t start = page.find("<svg id=\"" + id + "\"");
  if (start == std::string::npos) return "";
  const size_t end = page.find("</svg>", start);
  if (end == std::string::npos) return "";
  return page.substr(start, end + 6 - start);
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

// The section with `id`, from its start tag to its end tag.
std::string Section(const std::string& page, const std::string& id) {
  const size_t start = page.find("<section id=\"" + id + "\">");
  if (start == std::string::npos) return "";
  return page.substr(start, page.find("</section>", start) - start);
}

TEST(HtmlChecker, RejectsWhatItShould) {
  EXPECT_EQ(CheckWellFormed("<p>a &amp; b</p>"), "");
  EXPECT_EQ(CheckWellFormed("<svg><rect x=\"1\"/></svg>"), "");
  EXPECT_THAT(CheckWellFormed("<p>a & b</p>"), HasSubstr("bare '&'"));
  EXPECT_THAT(CheckWellFormed("<p><b></p></b>"), HasSubstr("closes <b>"));
  EXPECT_THAT(CheckWellFormed("<p>1 < 2</p>"), HasSubstr("opens no tag"));
  EXPECT_THAT(CheckWellFormed("<div>"), HasSubstr("unclosed <div>"));
  EXPECT_THAT(CheckWellFormed("<td title=\"a\"b\">x</td>"), Not(""));
}

TEST(HtmlText, EscapeCoversMarkupQuotesAndBadBytes) {
  EXPECT_EQ(html::Escape(kNastyName), kNastyEscaped);
  EXPECT_EQ(html::Escape("tab\tok"), "tab\tok");
  // A control byte and a cut multi-byte character (the first two bytes of U+20AC) become U+FFFD.
  EXPECT_EQ(html::Escape(std::string("a\x01z")), "a\xEF\xBF\xBDz");
  EXPECT_EQ(html::Escape(std::string("x\xE2\x82")), "x\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(html::Escape("\xE2\x82\xAC"), "\xE2\x82\xAC");
  EXPECT_EQ(html::FormatUtc(kStart), "2025-11-21 07:00:00 UTC");
  EXPECT_EQ(html::FormatCount(1234567), "1,234,567");
}

TEST(HtmlPage, WellFormedSelfContainedWithFourCharts) {
  TempDir dir;
  WriteFile(dir.path() / "a.jsonl", NormalProcess());
  WriteFile(dir.path() / "b.jsonl", CrashedProcess());
  const std::string page = Page(dir.path());
  ASSERT_FALSE(page.empty());
  EXPECT_EQ(CheckWellFormed(page), "");
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  for (const char* id : {kHtmlOccupancyChartId, kHtmlLimiterChartId, kHtmlTopKernelsChartId,
                         kHtmlTimelineChartId}) {
    const std::string svg = SvgById(page, id);
    EXPECT_THAT(svg, HasSubstr("<rect")) << id;
  }
  // Nothing to fetch: the only URL is the SVG namespace name, which is never fetched.
  std::string rest = page;
  for (const std::string ns = "http://www.w3.org/2000/svg";;) {
    const size_t at = rest.find(ns);
    if (at == std::string::npos) break;
    rest.erase(at, ns.size());
  }
  EXPECT_THAT(rest, Not(HasSubstr("http://")));
  EXPECT_THAT(rest, Not(HasSubstr("https://")));
  EXPECT_THAT(rest, Not(HasSubstr(" src=")));
  EXPECT_THAT(rest, Not(HasSubstr("<link")));
  EXPECT_THAT(rest, Not(HasSubstr("@import")));
  EXPECT_THAT(rest, Not(HasSubstr("url(http")));
  EXPECT_THAT(page, HasSubstr("Content-Security-Policy"));
  // Title, date range, hosts.
  EXPECT_THAT(page, HasSubstr("<h1>cuflight report</h1>"));
  // The first event at kStart, the last (pid 200's crash) 8 s later; to the millisecond, the date
  // once.
  EXPECT_THAT(page, HasSubstr("2025-11-21 07:00:00.000 to 07:00:08.000 UTC (8.00s)"));
  EXPECT_THAT(page, HasSubstr("hosts: node1, node2"));
}

TEST(HtmlPage, EscapesNamesFromTheLogs) {
  TempDir dir;
  WriteFile(dir.path() / "b.jsonl", CrashedProcess());
  const std::string page = Page(dir.path());
  EXPECT_EQ(CheckWellFormed(page), "");
  EXPECT_THAT(page, Not(HasSubstr(kNastyName)));
  EXPECT_THAT(page, Not(HasSubstr("evil<")));
  // In the kernel table, the review section and the charts' tooltips.
  EXPECT_GE(Count(page, kNastyEscaped), 3u);
  EXPECT_THAT(Section(page, "kernels"), HasSubstr(kNastyEscaped));
  EXPECT_THAT(Section(page, "review"), HasSubstr(kNastyEscaped));
  EXPECT_THAT(SvgById(page, kHtmlTimelineChartId), HasSubstr(kNastyEscaped));
}

TEST(HtmlPage, ReviewShowsTheCrashedProcessAndItsUntimedKernel) {
  TempDir dir;
  WriteFile(dir.path() / "a.jsonl", NormalProcess());
  WriteFile(dir.path() / "b.jsonl", CrashedProcess());
  const std::string page = Page(dir.path());
  const std::string review = Section(page, "review");
  EXPECT_THAT(review, HasSubstr("pid 200 infer on node2"));
  EXPECT_THAT(review, HasSubstr("<span class=\"ending\">crash</span>"));
  EXPECT_THAT(review, HasSubstr("crash: SIGSEGV (signal 11, code 1) in thread 200 at 0x10"));
  // gemm finished in 50 us; whether the nasty kernel did is unknown: CUPTI's records are not
  // flushed from a crash.
  EXPECT_THAT(review, HasSubstr("yes 50.0us"));
  EXPECT_THAT(review, HasSubstr("<td class=\"v muted\">unknown</td>"));
  EXPECT_THAT(review, Not(HasSubstr(">NO<")));
  EXPECT_THAT(review, Not(HasSubstr("pid 100")));  // ended normally
  // The timeline marks where it crashed.
  EXPECT_THAT(SvgById(page, kHtmlTimelineChartId), HasSubstr(">crash SIGSEGV</text>"));
}

// A process hung at the end of its log: a stall event naming its spinning kernel; and a crashed
// one. The stalled process is reviewed first, marked, with what its streams wait on.
TEST(HtmlPage, ReviewMarksTheStalledProcessFirstWithWhatItWaitsOn) {
  TempDir dir;
  constexpr int32_t pid = 300;
  std::string s = Line(StartOn(pid, kStart, "/opt/app/bin/hang", "node3")) +
                  Line(DeviceAt(pid, 1, kStart + 500));
  s += Line(Kernel(pid, 2, kStart + 1000, 7, Gemm()));
  schema::OwnedStallEvent stall;
  stall.header = {kStart + 11 * kSecond, pid, 3};
  stall.stall_ms = 10000;
  stall.stalled_ms = 10000;
  stall.streams_stalled = 1;
  schema::OwnedStallStream& stream = stall.streams.emplace_back();
  stream.stream = 0x10;
  stream.waiting_ms = 10000;
  stream.unfinished = 1;
  schema::OwnedStallLaunch& l = stream.launches.emplace_back();
  l.correlation_id = 7;
  l.name = "_Z4spinPVi";
  l.demangled = "spin<evil>(int volatile*)";
  l.grid = {1, 1, 1};
  l.block = {32, 1, 1};
  l.occupancy = 0.015625;
  l.age_ms = 10000;
  s += Line(stall);
  WriteFile(dir.path() / "a.jsonl", s);
  WriteFile(dir.path() / "b.jsonl", CrashedProcess());
  const std::string page = Page(dir.path());
  EXPECT_EQ(CheckWellFormed(page), "");
  const std::string review = Section(page, "review");
  const size_t hung = review.find("pid 300 hang on node3");
  const size_t crashed = review.find("pid 200 infer on node2");
  ASSERT_NE(hung, std::string::npos) << review;
  ASSERT_NE(crashed, std::string::npos) << review;
  EXPECT_LT(hung, crashed);
  EXPECT_THAT(review, HasSubstr("<div class=\"proc stall\" id=\"review-300-"));
  EXPECT_THAT(review, HasSubstr("<span class=\"stalled\">stalled</span>"));
  EXPECT_THAT(review, HasSubstr("Stalled now, as last reported: <span class=\"v\">10.0 s</span> "
                                "into the stall"));
  EXPECT_THAT(review, HasSubstr("spin&lt;evil&gt;(int volatile*)"));
  EXPECT_THAT(review, Not(HasSubstr("spin<evil>")));
  EXPECT_THAT(Section(page, "summary"), HasSubstr("stalled at the end of the log"));
}

// Eight ranks of one job crashed alike after a failed launch each: the page opens with the
// findings (before the summary), the ranks are one block in the review with the other seven one
// click away, and the processes table gives the ending's detail a row of its own.
TEST(HtmlPage, FindingsFirstAndRanksThatFailedAlikeInOneBlock) {
  TempDir dir;
  for (int32_t rank = 0; rank < 8; ++rank) {
    const int32_t pid = 700 + rank;
    schema::OwnedProcessStartEvent start = StartOn(pid, kStart, "/opt/app/bin/train", "node1");
    start.attribution = {{"job", "42"}, {"rank", std::to_string(rank)}};
    std::string s = Line(start) + Line(DeviceAt(pid, 1, kStart + 500));
    s += Line(Kernel(pid, 2, kStart + 1000, 1, Gemm()));
    schema::OwnedKernelTimeEvent time = KernelTime(pid, 3, 1, 50000);
    time.header.ts_ns = kStart + 2000;
    s += Line(time);
    schema::OwnedApiErrorEvent e =
        ApiError(pid, 4, "cuLaunchKernel", "CUDA_ERROR_INVALID_VALUE", 1, {1});
    e.header.ts_ns = kStart + kSecond / 4;
    e.message = "invalid argument";
    s += Line(e);
    schema::OwnedProcessCrashEvent crash;
    // Rank 5 first, at 07:00:00.300; the others at 07:00:00.400 + rank ms.
    crash.header = {kStart + (rank == 5 ? 300 : 400 + rank) * (kSecond / 1000), pid, 5};
    crash.signal = 11;
    crash.signal_name = "SIGSEGV";
    crash.tid = pid;
    s += Line(crash);
    WriteFile(dir.path() / ("r" + std::to_string(rank) + ".jsonl"), s);
  }
  const std::string page = Page(dir.path());
  EXPECT_EQ(CheckWellFormed(page), "");
  // The run's span to the millisecond: kStart to the last crash, rank 7's at 07:00:00.407.
  EXPECT_THAT(page, HasSubstr("2025-11-21 07:00:00.000 to 07:00:00.407 UTC (407ms)"));
  const size_t findings = page.find("<section id=\"findings\">");
  ASSERT_NE(findings, std::string::npos);
  EXPECT_LT(findings, page.find("<section id=\"summary\">"));
  const std::string f = Section(page, "findings");
  EXPECT_THAT(f, HasSubstr("<span class=\"bad\">8 processes</span>: crash: SIGSEGV (signal 11, "
                           "code 0); its last CUDA call failed: cuLaunchKernel returned "
                           "CUDA_ERROR_INVALID_VALUE (1): invalid argument"));
  EXPECT_THAT(f, HasSubstr("the first to fail: pid 705 train (job 42, rank 5) on node1, at "
                           "07:00:00.300 UTC"));
  EXPECT_THAT(f, HasSubstr("\u00d7 7 more, the same: pids 700-704, 706-707 (ranks 0-4, 6-7)"));
  EXPECT_THAT(f, HasSubstr("<span class=\"bad\">8 failed launches in 8 processes</span>"));
  EXPECT_THAT(f, HasSubstr("<code>cuLaunchKernel returned CUDA_ERROR_INVALID_VALUE (1)</code>: 8 "
                           "in 8 processes; the first: pid 700 train (job 42, rank 0) on node1 at "
                           "07:00:00.250 UTC, seq 4, device 0, stream 0: invalid argument"));
  EXPECT_THAT(f, HasSubstr("id=\"findings-kernels\""));
  // The review: rank 5 in full, the seven others inside one <details>, each in full there.
  const std::string review = Section(page, "review");
  const size_t details = review.find("<details class=\"more-procs\"><summary>\u00d7 7 more, the "
                                     "same: pids 700-704, 706-707 (ranks 0-4, 6-7)</summary>");
  ASSERT_NE(details, std::string::npos) << review;
  EXPECT_LT(review.find("id=\"review-705-"), details);
  for (int32_t pid : {700, 701, 702, 703, 704, 706, 707}) {
    EXPECT_GT(review.find("id=\"review-" + std::to_string(pid) + "-"), details) << pid;
  }
  // Launch tables by SEQ and CORR.
  EXPECT_THAT(review, HasSubstr("<th class=\"n\">SEQ</th><th class=\"n\" title=\"correlation "
                                "id, as the stall table names a launch\">CORR</th>"));
  // The processes table: the ending's name in its column, its detail in a row under it.
  const std::string processes = Section(page, "processes");
  EXPECT_THAT(processes, HasSubstr("<td class=\"v bad\" data-v=\"crash\">crash</td></tr>"
                                   "<tr class=\"detail\"><td colspan=\"11\">crash: SIGSEGV "
                                   "(signal 11, code 0) in thread 705"));
}

// The stall table names each launch by its correlation id and, when the stream's last launches
// hold it, by the seq the launch tables use.
TEST(HtmlPage, StallTableHasCorrAndSeq) {
  TempDir dir;
  constexpr int32_t pid = 300;
  std::string s = Line(StartOn(pid, kStart, "/opt/app/bin/hang", "node3")) +
                  Line(DeviceAt(pid, 1, kStart + 500));
  s += Line(Kernel(pid, 2, kStart + 1000, 7, Gemm(0x10)));
  schema::OwnedStallEvent stall;
  stall.header = {kStart + 11 * kSecond, pid, 3};
  stall.stall_ms = 10000;
  stall.stalled_ms = 10000;
  stall.streams_stalled = 1;
  schema::OwnedStallStream& stream = stall.streams.emplace_back();
  stream.stream = 0x10;
  stream.waiting_ms = 10000;
  stream.unfinished = 2;
  for (const uint64_t corr : {7u, 99u}) {  // 99: not among the stream's launches in the log
    schema::OwnedStallLaunch& l = stream.launches.emplace_back();
    l.correlation_id = corr;
    l.demangled = "spin(int volatile*)";
    l.age_ms = 10000;
  }
  s += Line(stall);
  WriteFile(dir.path() / "a.jsonl", s);
  const std::string review = Section(Page(dir.path()), "review");
  EXPECT_THAT(review, HasSubstr("<th class=\"n\">CORR</th><th class=\"n\" title=\"the launch's "
                                "seq in the stream tables below\">SEQ</th>"));
  // corr 7 is the kernel event of seq 2; corr 99 has none.
  EXPECT_THAT(review, HasSubstr("<tr><td class=\"n\">7</td><td class=\"n\">2</td><td "
                                "class=\"n\">10.0 s</td>"));
  EXPECT_THAT(review, HasSubstr("<tr><td class=\"n\">99</td><td class=\"n muted\">-</td>"));
}

TEST(HtmlPage, KernelTableHasTheTerminalColumns) {
  TempDir dir;
  WriteFile(dir.path() / "a.jsonl", NormalProcess());
  const std::string kernels = Section(Page(dir.path()), "kernels");
  for (const char* column : {"LAUNCHES", "TOTAL", "MEAN", "P50", "P99", "OCC", "LIMITER", "BLOCK",
                             "REGS", "SMEM", "WAVES", "SPILL", "KERNEL"}) {
    EXPECT_THAT(kernels, HasSubstr(std::string(">") + column + "</th>")) << column;
  }
  // gemm: 3 launches of 100 + 200 + 300 us = 600 us, mean 200 us, p50 200 us, p99 300 us, 75%.
  EXPECT_THAT(kernels, HasSubstr("<td class=\"n\" data-v=\"600000\">600us</td>"));
  EXPECT_THAT(kernels, HasSubstr("<td class=\"n\" data-v=\"300000\">300us</td>"));
  EXPECT_THAT(kernels, HasSubstr(">75%</td><td>regs</td>"));
  // reduce: 48 KiB smem, 19% (3 x 4 / 64 = 18.75%) limited by shared memory, with its advice.
  EXPECT_THAT(kernels, HasSubstr(">19%</td><td>smem</td>"));
  EXPECT_THAT(kernels, HasSubstr("48 KiB"));
  EXPECT_THAT(kernels, HasSubstr("<tr class=\"advice\">"));
}

TEST(HtmlPage, ProcessTableShowsLostTimingRecords) {
  TempDir dir;
  WriteFile(dir.path() / "a.jsonl", NormalProcess());  // none lost
  schema::OwnedProcessEndEvent end = End(300, 1, 0);
  end.timing_dropped = 6;
  WriteFile(dir.path() / "b.jsonl",
            Line(StartOn(300, kStart, "/opt/app/bin/other", "node3")) + Line(end));
  const std::string processes = Section(Page(dir.path()), "processes");
  EXPECT_THAT(processes, HasSubstr(">DROPPED</th><th class=\"n\" title=\"kernel timing records "
                                   "lost\">TIMING LOST</th><th>ENDING</th>"));
  // DROPPED then TIMING LOST: 0 and 6 (a warning) for pid 300, 0 and 0 for pid 100.
  EXPECT_THAT(processes, HasSubstr("<td class=\"n\" data-v=\"0\">0</td>"
                                   "<td class=\"n warn\" data-v=\"6\">6</td>"));
  EXPECT_THAT(processes, HasSubstr("<td class=\"n\" data-v=\"0\">0</td>"
                                   "<td class=\"n\" data-v=\"0\">0</td><td class="));
}

TEST(HtmlPage, RetargetTableWhenAsked) {
  TempDir dir;
  WriteFile(dir.path() / "a.jsonl", NormalProcess());
  ReportOptions o;
  o.retarget = "h100";
  const std::string page = Page(dir.path(), o);
  EXPECT_EQ(CheckWellFormed(page), "");
  const std::string section = Section(page, "retarget");
  EXPECT_THAT(section, HasSubstr("NEW OCC"));
  EXPECT_EQ(Count(section, "<tbody>"), 2u);  // gemm and reduce
  EXPECT_THAT(Section(Page(dir.path()), "retarget"), "");
}

TEST(HtmlPage, ChartsWeighByGpuTime) {
  TempDir dir;
  WriteFile(dir.path() / "a.jsonl", NormalProcess());
  const std::string page = Page(dir.path());
  // Timed: gemm 600 us (registers, 75% -> bucket 70-80%) and reduce 1 ms (shared_mem, 18.75% ->
  // 10-20%) of 1.6 ms in all: 38% and 63%.
  const std::string occ = SvgById(page, kHtmlOccupancyChartId);
  EXPECT_THAT(occ, HasSubstr("occupancy 70-80%, limited by registers: 600us (38% of all)"));
  EXPECT_THAT(occ, HasSubstr("occupancy 10-20%, limited by shared_mem: 1.00ms (63% of all)"));
  const std::string lim = SvgById(page, kHtmlLimiterChartId);
  EXPECT_THAT(lim, HasSubstr("registers: 600us (38% of all) in 1 kernel signature"));
  EXPECT_THAT(lim, HasSubstr("shared_mem: 1.00ms (63% of all) in 1 kernel signature"));
  EXPECT_THAT(lim, HasSubstr("warps: 0ns (0% of all) in 0 kernel signatures"));
  // Top kernels: reduce (1 ms) above gemm (600 us).
  const std::string top = SvgById(page, kHtmlTopKernelsChartId);
  const size_t reduce = top.find(">reduce(float*)</text>");
  const size_t gemm = top.find(">gemm(float*)</text>");
  ASSERT_NE(reduce, std::string::npos) << top;
  ASSERT_NE(gemm, std::string::npos);
  EXPECT_LT(reduce, gemm);
  EXPECT_THAT(top, HasSubstr(">19% smem</text>"));
  EXPECT_THAT(top, HasSubstr(">75% regs</text>"));
}

// The occupancy the page shows is the theoretical one (ncu's "achieved" is measured); a kernel at
// 100% is limited by nothing: "none" in the table and the charts.
TEST(HtmlPage, OccupancyIsTheoreticalAndFullOccupancyIsNotLimited) {
  TempDir dir;
  KernelSpec full = Gemm();
  full.name = "_Z4fullv";
  full.demangled = "full()";
  full.occupancy = Fields(8, 8, 64, Resource::kWarps);  // 64 of 64 warps
  std::string s = Line(Start(300, 0, kStart)) + Line(Device(300, 1, 0, "GPU"));
  s +=
      Line(Kernel(300, 2, kStart + 1000, 1, full)) + Line(Kernel(300, 3, kStart + 2000, 2, Gemm()));
  WriteFile(dir.path() / "c.jsonl", s);
  const std::string page = Page(dir.path());
  EXPECT_EQ(CheckWellFormed(page), "");
  EXPECT_THAT(page, Not(HasSubstr("achieved")));
  const std::string occ = SvgById(page, kHtmlOccupancyChartId);
  EXPECT_THAT(occ, HasSubstr("aria-label=\"Kernel launches by theoretical occupancy\""));
  EXPECT_THAT(occ, HasSubstr(">theoretical occupancy, % (a 100% launch counts in 90-100)<"));
  EXPECT_THAT(occ, HasSubstr("occupancy 100%, no resource limits it: 1 launch (50% of all)"));
  EXPECT_THAT(occ, Not(HasSubstr("limited by warps")));
  const std::string lim = SvgById(page, kHtmlLimiterChartId);
  EXPECT_THAT(lim, HasSubstr("none (full occupancy): 1 launch (50% of all) in 1 kernel signature"));
  EXPECT_THAT(lim, HasSubstr("warps: 0 launches (0% of all) in 0 kernel signatures"));
  EXPECT_THAT(SvgById(page, kHtmlTopKernelsChartId), HasSubstr(">100%</text>"));
  EXPECT_THAT(Section(page, "kernels"), HasSubstr("<td>none</td>"));
}

TEST(HtmlPage, UntimedLogsWeighByLaunches) {
  TempDir dir;
  std::string s = Line(Start(300, 0, kStart)) + Line(Device(300, 1, 0, "GPU"));
  for (uint64_t i = 1; i <= 3; ++i) {
    s += Line(Kernel(300, 1 + i, kStart + static_cast<int64_t>(i) * 1000, i, Gemm()));
  }
  WriteFile(dir.path() / "c.jsonl", s);
  const std::string page = Page(dir.path());
  EXPECT_EQ(CheckWellFormed(page), "");
  EXPECT_THAT(SvgById(page, kHtmlOccupancyChartId),
              HasSubstr("occupancy 70-80%, limited by registers: 3 launches (100% of all)"));
  EXPECT_THAT(page, HasSubstr("No launch was timed"));
  EXPECT_THAT(SvgById(page, kHtmlTimelineChartId), HasSubstr("class=\"k untimed\""));
}

TEST(HtmlPage, NoLaunchesStillDrawsEveryChart) {
  TempDir dir;
  WriteFile(dir.path() / "d.jsonl", Line(Start(400, 0, kStart)) + Line(End(400, 1, 0)));
  const std::string page = Page(dir.path());
  EXPECT_EQ(CheckWellFormed(page), "");
  for (const char* id : {kHtmlOccupancyChartId, kHtmlLimiterChartId, kHtmlTopKernelsChartId,
                         kHtmlTimelineChartId}) {
    EXPECT_THAT(SvgById(page, id), HasSubstr("<text")) << id;
  }
  EXPECT_THAT(page, HasSubstr("No kernel launches in these logs."));
}

TEST(Timeline, JoinsKernelTimePerProcessAndPlacesUntimedAtLaunch) {
  TempDir dir;
  WriteFile(dir.path() / "a.jsonl", NormalProcess());
  WriteFile(dir.path() / "b.jsonl", CrashedProcess());
  Report report;
  ASSERT_TRUE(Build(dir.path(), {}, &report));
  Timeline t;
  BuildTimeline(report, &t);
  EXPECT_EQ(t.launches, 7u);
  EXPECT_EQ(t.timed, 5u);
  ASSERT_EQ(t.lanes.size(), 3u);  // pid 100 stream 0, pid 100 stream 0x10, pid 200 stream 0
  const TimelineLane& g = t.lanes[0];
  EXPECT_EQ(report.processes[g.process].key.pid, 100);
  EXPECT_EQ(g.stream, 0u);
  ASSERT_EQ(g.slices.size(), 3u);
  EXPECT_EQ(g.slices[1].start_ns, kStart + 2 * kSecond + 10000);
  EXPECT_EQ(g.slices[1].end_ns, kStart + 2 * kSecond + 10000 + 200000);
  EXPECT_EQ(g.slices[1].timed, 1u);
  EXPECT_EQ(g.slices[1].correlation_id, 2u);
  const TimelineLane& r = t.lanes[1];
  EXPECT_EQ(r.stream, 0x10u);
  ASSERT_EQ(r.slices.size(), 2u);
  EXPECT_EQ(r.slices[0].start_ns, kStart + 4 * kSecond + kSecond / 2);
  EXPECT_EQ(r.slices[0].end_ns, kStart + 4 * kSecond + kSecond / 2 + 1000000);
  EXPECT_EQ(r.slices[1].start_ns, kStart + 5 * kSecond);  // untimed: at its launch
  EXPECT_EQ(r.slices[1].end_ns, kStart + 5 * kSecond);
  EXPECT_EQ(r.slices[1].timed, 0u);
  const TimelineLane& c = t.lanes[2];
  EXPECT_EQ(report.processes[c.process].key.pid, 200);
  ASSERT_EQ(c.slices.size(), 2u);
  // pid 200's corr 1 joins its own kernel_time, not pid 100's.
  EXPECT_EQ(c.slices[0].start_ns, kStart + 6 * kSecond + 5000);
  EXPECT_EQ(c.slices[0].end_ns, kStart + 6 * kSecond + 55000);
  EXPECT_EQ(c.slices[1].timed, 0u);
  EXPECT_EQ(report.signatures[c.slices[1].signature].demangled, kNastyName);
  EXPECT_EQ(t.begin_ns, kStart + 1 * kSecond + 10000);
  EXPECT_EQ(t.end_ns, kStart + 7 * kSecond);
}

// Kernels sharing a correlation id (testing::SharedCorrelationLines): each node of each graph
// replay is its own slice with its own GPU span, and each device of the cooperative launch too.
TEST(Timeline, EveryGraphNodeAndDeviceOfOneCorrelationIdIsItsOwnSlice) {
  TempDir dir;
  std::string text;
  for (const auto& [seq, line] : SharedCorrelationLines(300, kStart)) text += line;
  WriteFile(dir.path() / "graphs.jsonl", text);
  Report report;
  ASSERT_TRUE(Build(dir.path(), {}, &report));
  Timeline t;
  BuildTimeline(report, &t);
  EXPECT_EQ(t.launches, 15u);
  EXPECT_EQ(t.timed, 15u);
  // Lanes by (device, stream): (0, 0) plain, (0, 0x20) the graph, (0, 0x30) and (1, 0x31) coop.
  ASSERT_EQ(t.lanes.size(), 4u);
  const TimelineLane& graph = t.lanes[1];
  EXPECT_EQ(graph.device, 0);
  EXPECT_EQ(graph.stream, 0x20u);
  ASSERT_EQ(graph.slices.size(), 12u);
  // Replay r starts at kStart + 1 s + r * 10 ms; its nodes run back to back for 1, 2 and 3 ms.
  const char* names[] = {"node_a()", "node_b()", "node_c()"};
  const int64_t offset[] = {0, 1000000, 3000000};  // after the nodes before it: 0, 1, 1 + 2 ms
  for (size_t i = 0; i < 12; ++i) {
    const size_t replay = i / 3;
    const size_t node = i % 3;
    const int64_t start = kStart + kSecond + static_cast<int64_t>(replay) * 10000000 + offset[node];
    const TimelineSlice& s = graph.slices[i];
    EXPECT_EQ(s.timed, 1u) << i;
    EXPECT_EQ(s.correlation_id, 101 + replay) << i;
    EXPECT_EQ(s.start_ns, start) << i;
    EXPECT_EQ(s.end_ns - s.start_ns, static_cast<int64_t>(node + 1) * 1000000) << i;
    EXPECT_EQ(report.signatures[s.signature].demangled, names[node]) << i;
  }
  const TimelineLane& coop0 = t.lanes[2];
  const TimelineLane& coop1 = t.lanes[3];
  EXPECT_EQ(coop0.device, 0);
  EXPECT_EQ(coop1.device, 1);
  ASSERT_EQ(coop0.slices.size(), 1u);
  ASSERT_EQ(coop1.slices.size(), 1u);
  EXPECT_EQ(coop0.slices[0].end_ns - coop0.slices[0].start_ns, 10000);
  EXPECT_EQ(coop1.slices[0].end_ns - coop1.slices[0].start_ns, 30000);
  ASSERT_EQ(t.lanes[0].slices.size(), 1u);
  EXPECT_EQ(t.lanes[0].slices[0].end_ns - t.lanes[0].slices[0].start_ns, 7000);
}

TEST(Timeline, CountsALaunchReadTwiceOnce) {
  // The same process's events in two files (a spill file and the collector's log after a
  // reconnect hold the same seqs): the kernel table counts each launch once, so does the
  // timeline.
  TempDir dir;
  WriteFile(dir.path() / "a.jsonl", NormalProcess());
  WriteFile(dir.path() / "a-again.jsonl", NormalProcess());
  Report report;
  ASSERT_TRUE(Build(dir.path(), {}, &report));
  EXPECT_GT(report.duplicate_events, 0u);
  Timeline t;
  BuildTimeline(report, &t);
  EXPECT_EQ(t.launches, 5u);  // NormalProcess: 5 launches (3 on stream 0, 2 on stream 0x10)
  EXPECT_EQ(t.launches, report.launches);
  ASSERT_EQ(t.lanes.size(), 2u);
  EXPECT_EQ(t.lanes[0].slices.size(), 3u);
  EXPECT_EQ(t.lanes[1].slices.size(), 2u);
}

TEST(Timeline, FollowsTheReportFilters) {
  TempDir dir;
  WriteFile(dir.path() / "a.jsonl", NormalProcess());
  WriteFile(dir.path() / "b.jsonl", CrashedProcess());
  ReportOptions o;
  o.kernel_regex = "gemm";
  o.until_ns = kStart + 2 * kSecond;
  Report report;
  ASSERT_TRUE(Build(dir.path(), o, &report));
  Timeline t;
  BuildTimeline(report, &t);
  // gemm launched at or before +2 s: corr 1 and 2 of pid 100.
  EXPECT_EQ(t.launches, 2u);
  ASSERT_EQ(t.lanes.size(), 1u);
  EXPECT_EQ(t.lanes[0].slices.size(), 2u);
}

// pid 500: `streams` streams of `per_stream` gemm launches each, 1 us apart, each timed 500 ns.
std::string BusyProcess(int streams, int per_stream) {
  constexpr int32_t pid = 500;
  std::string s = Line(Start(pid, 0, kStart)) + Line(Device(pid, 1, 0, "GPU"));
  uint64_t seq = 2;
  uint64_t corr = 1;
  for (int st = 0; st < streams; ++st) {
    for (int i = 0; i < per_stream; ++i) {
      const int64_t ts = kStart + static_cast<int64_t>(i) * 1000;
      s += Line(Kernel(pid, seq++, ts, corr, Gemm(static_cast<uint64_t>(st) + 1)));
      s += Line(Timed(pid, seq++, corr, static_cast<uint64_t>(ts), static_cast<uint64_t>(ts) + 500,
                      static_cast<uint64_t>(st) + 1));
      ++corr;
    }
  }
  return s;
}

TEST(Timeline, ReductionMergesCloseLaunchesToFitTheCap) {
  TempDir dir;
  WriteFile(dir.path() / "e.jsonl", BusyProcess(2, 1500));
  Report report;
  ASSERT_TRUE(Build(dir.path(), {}, &report));
  Timeline t;
  BuildTimeline(report, &t);
  ASSERT_EQ(t.lanes.size(), 2u);
  const TimelineReduction r = ReduceTimeline(report, 10, 100, 1000, &t);
  EXPECT_TRUE(r.merged);
  EXPECT_LE(r.slices, 100u);
  uint64_t launches = 0;
  size_t slices = 0;
  for (const TimelineLane& lane : t.lanes) {
    slices += lane.slices.size();
    for (const TimelineSlice& s : lane.slices) launches += s.launches;
  }
  EXPECT_EQ(slices, r.slices);
  EXPECT_EQ(launches, 3000u);  // merged, none lost
  // Launches are 500 ns apart end to start; merging over a gap that size or more.
  EXPECT_GT(r.merge_gap_ns, 500);
}

TEST(Timeline, ReductionKeepsReviewedThenBusiestLanes) {
  TempDir dir;
  // pid 500: stream 1 with 30 launches, stream 2 with 30; crashed pid 200: 2 launches.
  WriteFile(dir.path() / "e.jsonl", BusyProcess(2, 30));
  WriteFile(dir.path() / "b.jsonl", CrashedProcess());
  Report report;
  ASSERT_TRUE(Build(dir.path(), {}, &report));
  Timeline t;
  BuildTimeline(report, &t);
  ASSERT_EQ(t.lanes.size(), 3u);
  const TimelineReduction r = ReduceTimeline(report, 2, 4000, 1000, &t);
  EXPECT_EQ(r.lanes_left_out, 1u);
  EXPECT_EQ(r.launches_left_out, 30u);
  EXPECT_FALSE(r.merged);
  ASSERT_EQ(t.lanes.size(), 2u);
  EXPECT_EQ(report.processes[t.lanes[0].process].key.pid, 200);  // in the original order
  EXPECT_EQ(report.processes[t.lanes[1].process].key.pid, 500);
  EXPECT_EQ(t.lanes[1].stream, 1u);
}

TEST(HtmlPage, CappedTimelineSaysSo) {
  TempDir dir;
  WriteFile(dir.path() / "e.jsonl", BusyProcess(3, 400));
  HtmlOptions html;
  html.max_timeline_slices = 50;
  html.max_timeline_lanes = 2;
  const std::string page = Page(dir.path(), {}, html);
  EXPECT_EQ(CheckWellFormed(page), "");
  EXPECT_THAT(page, HasSubstr("id=\"timeline-capped\""));
  EXPECT_THAT(page, HasSubstr("left out: 1 lane with 400 launches"));
  const std::string svg = SvgById(page, kHtmlTimelineChartId);
  EXPECT_LE(Count(svg, "<rect class=\"k"), 50u);
  EXPECT_GE(Count(svg, "<rect class=\"k"), 2u);
  EXPECT_THAT(svg, HasSubstr("launches merged"));
}

// pid 600, one stream, 30 ms: for 10 ms a 1 us kernel every 2 us (the GPU busy half the time),
// 10 ms idle, then 10 ms of 1 us kernels back to back (busy all the time): 15,000 launches.
std::string HalfIdleFull() {
  constexpr int32_t pid = 600;
  std::string s = Line(Start(pid, 0, kStart)) + Line(Device(pid, 1, 0, "GPU"));
  uint64_t seq = 2;
  uint64_t corr = 1;
  auto launch = [&](int64_t at) {
    s += Line(Kernel(pid, seq++, at, corr, Gemm()));
    s += Line(Timed(pid, seq++, corr, static_cast<uint64_t>(at), static_cast<uint64_t>(at) + 1000));
    ++corr;
  };
  for (int64_t t = 0; t < 10'000'000; t += 2000) launch(kStart + t);
  for (int64_t t = 20'000'000; t < 30'000'000; t += 1000) launch(kStart + t);
  return s;
}

// The busy shares (percent) the timeline's density bars give in their titles.
std::vector<int> BusyShares(const std::string& svg) {
  std::vector<int> out;
  static const std::regex kBusy("GPU busy ([0-9]+)%");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), kBusy); it != std::sregex_iterator();
       ++it) {
    out.push_back(std::stoi((*it)[1]));
  }
  return out;
}

// More launches than shapes: each lane becomes equal bins whose bar height is the GPU's busy
// share, the same picture whether every launch was kept or only counted into the lane's bins.
// By hand: the timeline spans 30 ms; 930 bins (one per pixel) would be 32,259 ns wide; the
// lane's own bins (time_bins.h) are 32,768 ns (the power of two above 30 ms / 1,024), and a drawn
// bin is never narrower than those. About 305 bins in the first 10 ms at 50 % busy, 305 in the
// last 10 ms at 100 %, and none in the 10 ms between.
TEST(Timeline, DensityBarsShowTheBusyShareAtAnySize) {
  TempDir dir;
  WriteFile(dir.path() / "d.jsonl", HalfIdleFull());
  for (const size_t kept : {size_t{100000}, size_t{100}}) {
    ReportOptions o;
    o.max_kept_launches = kept;
    Report report;
    ASSERT_TRUE(Build(dir.path(), o, &report));
    EXPECT_EQ(report.launches, 15000u);
    EXPECT_EQ(report.kept_launches_complete, kept == 100000) << kept;
    ASSERT_EQ(report.lanes.size(), 1u);
    EXPECT_EQ(report.lanes[0].launches, 15000u);
    EXPECT_EQ(report.lanes[0].bin_ns, 32768);
    EXPECT_EQ(report.lanes[0].bins.size(), TimeBins::kMaxBins);
    const std::string page = Page(dir.path(), o);
    EXPECT_EQ(CheckWellFormed(page), "");
    EXPECT_NE(page.find("id=\"timeline-capped\""), std::string::npos);
    EXPECT_NE(page.find(kept == 100000 ? "counted in bins of 32.3us" : "counted in bins of 32.8us"),
              std::string::npos)
        << kept;
    const std::string svg = SvgById(page, kHtmlTimelineChartId);
    const size_t bars = Count(svg, "<rect class=\"k bin");
    // Not two shapes: a bar per bin of the busy 20 ms, none in the idle 10 ms between.
    EXPECT_GE(bars, 600u) << kept;
    EXPECT_LE(bars, 630u) << kept;
    const std::vector<int> busy = BusyShares(svg);
    EXPECT_EQ(busy.size(), bars);
    const auto near = [&](int lo, int hi) {
      return std::count_if(busy.begin(), busy.end(), [&](int b) { return b >= lo && b <= hi; });
    };
    EXPECT_GE(near(47, 53), 295) << kept;   // the first 10 ms
    EXPECT_GE(near(97, 100), 295) << kept;  // the last 10 ms
    EXPECT_LE(near(0, 46), 4) << kept;      // at most the region edges
  }
}

TEST(RunHtmlReport, WritesTheFileAndSaysSo) {
  TempDir dir;
  WriteFile(dir.path() / "logs" / "a.jsonl", NormalProcess());
  ReportOptions o;
  o.paths = {(dir.path() / "logs").string()};
  const fs::path file = dir.path() / "report.html";
  std::ostringstream out, err;
  ASSERT_EQ(RunHtmlReport(o, file.string(), out, err), kReportOk) << err.str();
  EXPECT_EQ(err.str(), "cuflight report: wrote " + file.string() +
                           " (1 process, 5 launches, 2 kernel signatures)\n");
  EXPECT_EQ(out.str(), "");
  std::ifstream in(file);
  std::ostringstream read;
  read << in.rdbuf();  // not istreambuf_iterator: g++ -O3 -Wnull-dereference false positive
  const std::string page = read.str();
  EXPECT_EQ(CheckWellFormed(page), "");
  EXPECT_THAT(page, HasSubstr(kHtmlTimelineChartId));
  // No temporary file is left beside it.
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) entries += e.path() != file ? 1 : 0;
  EXPECT_EQ(entries, 1u);  // logs/
}

TEST(RunHtmlReport, BadInputIsOneLineAndExitTwo) {
  TempDir dir;
  ReportOptions o;
  o.paths = {(dir.path() / "missing").string()};
  std::ostringstream out, err;
  EXPECT_EQ(RunHtmlReport(o, (dir.path() / "r.html").string(), out, err), kReportUsage);
  EXPECT_EQ(Count(err.str(), "\n"), 1u);
  EXPECT_THAT(err.str(), HasSubstr("cuflight report: "));
  EXPECT_FALSE(fs::exists(dir.path() / "r.html"));

  WriteFile(dir.path() / "a.jsonl", NormalProcess());
  o.paths = {dir.path().string()};
  std::ostringstream out2, err2;
  EXPECT_EQ(RunHtmlReport(o, (dir.path() / "no-such-dir" / "r.html").string(), out2, err2),
            kReportUsage);
  EXPECT_THAT(err2.str(), HasSubstr("cannot write"));
  EXPECT_EQ(Count(err2.str(), "\n"), 1u);
}

}  // namespace
}  // namespace cuflight::report

#include "cuflight/logread/progress_line.h"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <utility>

namespace cuflight::logread {
namespace {

std::string Bytes(uint64_t n) {
  const double v = static_cast<double>(n);
  if (n >= (uint64_t{1} << 30)) return fmt::format("{:.1f} GB", v / (1 << 30));
  if (n >= (uint64_t{1} << 20)) return fmt::format("{:.0f} MB", v / (1 << 20));
  return fmt::format("{:.0f} KB", v / (1 << 10));
}

// "2.3 M", "41 k", "950".
std::string Count(double n) {
  if (n >= 1e6) return fmt::format("{:.1f} M", n / 1e6);
  if (n >= 1e3) return fmt::format("{:.0f} k", n / 1e3);
  return fmt::format("{:.0f}", n);
}

}  // namespace

ProgressLine::ProgressLine(std::string prefix, std::ostream& err, double delay_s)
    : prefix_(std::move(prefix)),
      err_(err),
      delay_s_(delay_s),
      active_(&err == &std::cerr && ::isatty(STDERR_FILENO) == 1) {}

std::function<void(const ReadProgress&)> ProgressLine::Callback() {
  if (!active_) return {};
  return [this](const ReadProgress& p) { Update(p); };
}

std::string ProgressLine::Text(const std::string& prefix, const ReadProgress& p) {
  // Files, not bytes, measure the way: a zstd segment's bytes on disk say little of its lines.
  const double rate = p.seconds > 0 ? static_cast<double>(p.events) / p.seconds : 0;
  return fmt::format("{}: reading file {} of {} ({} in all), {} events ({}/s), {:.0f} s", prefix,
                     std::min(p.files_done + 1, p.files), p.files, Bytes(p.bytes),
                     Count(static_cast<double>(p.events)), Count(rate), p.seconds);
}

void ProgressLine::Update(const ReadProgress& p) {
  if (!active_ || p.seconds < delay_s_ || p.files_done == p.files) return;
  const std::string text = Text(prefix_, p);
  err_ << '\r' << text;
  if (text.size() < drawn_) err_ << std::string(drawn_ - text.size(), ' ');
  err_.flush();
  drawn_ = std::max(drawn_, text.size());
}

void ProgressLine::Done() {
  if (drawn_ == 0) return;
  err_ << '\r' << std::string(drawn_, ' ') << '\r';
  err_.flush();
  drawn_ = 0;
}

}  // namespace cuflight::logread

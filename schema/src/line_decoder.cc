// LineDecoder: the validator's fast path, writing the event as it checks the line, for kernel
// and kernel_time lines in the encoder's layout; the general path, filling the event from its
// one pass, for every other line.
#include "cuflight/schema/line_decoder.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "validator_internal.h"

namespace cuflight::schema {

OwnedKernelEvent& LineDecoder::KernelOf(OwnedEvent* event) {
  if (auto* held = std::get_if<OwnedKernelEvent>(event)) return *held;
  OwnedKernelEvent& e = event->emplace<OwnedKernelEvent>();
  if (!spare_.empty()) {
    e.api.swap(spare_.back().api);
    e.name.swap(spare_.back().name);
    e.demangled.swap(spare_.back().demangled);
    spare_.pop_back();
  }
  return e;
}

void LineDecoder::PutAside(OwnedEvent* event) {
  auto* kernel = std::get_if<OwnedKernelEvent>(event);
  if (kernel == nullptr || spare_.size() >= kMaxSpare) return;
  spare_.emplace_back();
  spare_.back().api.swap(kernel->api);
  spare_.back().name.swap(kernel->name);
  spare_.back().demangled.swap(kernel->demangled);
}

// The kernel alternative of *event, reset to its defaults. Its string buffers are kept: those of
// the kernel event *event held, or a set put aside when another type replaced a kernel event in
// a result (so results reused for lines of all types in any order stop allocating).
OwnedKernelEvent& LineDecoder::ResetKernel(OwnedEvent* event) {
  OwnedKernelEvent& held = KernelOf(event);
  std::string api = std::move(held.api);
  std::string name = std::move(held.name);
  std::string demangled = std::move(held.demangled);
  held = OwnedKernelEvent{};
  held.api = std::move(api);
  held.name = std::move(name);
  held.demangled = std::move(demangled);
  return held;
}

// ResetKernelTime and ResetLaunch copy a constant: the value-initialised temporary of
// `*held = OwnedLaunchEvent{}` was zeroed with `rep stos`, whose start-up cost was most of the
// time of the reset (perf on a report of launches, docs/performance.md); a copy from a constant
// is a few 16-byte moves. The constant is reached through Opaque, so that a constant of zeros
// (OwnedKernelTimeEvent's) is not turned back into a memset, hence `rep stos`.
namespace {
template <class T>
const T* Opaque(const T* p) {
  asm("" : "+r"(p));  // the compiler no longer knows what p points to
  return p;
}
}  // namespace

OwnedKernelTimeEvent& LineDecoder::ResetKernelTime(OwnedEvent* event) {
  static constexpr OwnedKernelTimeEvent kEmpty{};
  if (auto* held = std::get_if<OwnedKernelTimeEvent>(event)) {
    *held = *Opaque(&kEmpty);
    return *held;
  }
  PutAside(event);
  return event->emplace<OwnedKernelTimeEvent>();
}

OwnedLaunchEvent& LineDecoder::ResetLaunch(OwnedEvent* event) {
  static constexpr OwnedLaunchEvent kEmpty{};
  if (auto* held = std::get_if<OwnedLaunchEvent>(event)) {
    *held = *Opaque(&kEmpty);
    return *held;
  }
  PutAside(event);
  return event->emplace<OwnedLaunchEvent>();
}

Reason LineDecoder::ReadFast(DecodeResult* result) {
  last_type_ = EventTypeName(info_.type);
  result->reason = Reason::kOk;
  result->message.clear();
  // Member by member: the walk has just stored them one at a time, and the 16-byte load a whole
  // Header's copy makes of ts_ns and pid cannot take its bytes from two stores still in flight
  // (a store-forwarding stall, the hottest instruction here; perf, docs/performance.md).
  const Header& from = info_.header;
  Header& to = result->header.emplace();
  to.ts_ns = from.ts_ns;
  to.pid = from.pid;
  to.seq = from.seq;
  ++fast_lines_;
  return Reason::kOk;
}

Reason LineDecoder::Decode(std::string_view line, DecodeResult* result) noexcept {
  last_type_ = {};
  // A kernel, kernel_time or launch line in the encoder's layout: the validator's fast path checks it and
  // writes its members into the event, in one pass.
  if (line.size() >= 40 && (line[9] == 'k' || line[9] == 'l')) {
    try {
      bool read;
      if (line[9] == 'l') {
        read = internal::DecodeFastPath(line, &info_, &ResetLaunch(&result->event));
      } else if (line[15] == '"') {
        OwnedKernelEvent& e = ResetKernel(&result->event);
        read = internal::DecodeFastPath(line, &info_, &e);
      } else {
        read = internal::DecodeFastPath(line, &info_, &ResetKernelTime(&result->event));
      }
      if (read) return ReadFast(result);
    } catch (...) {  // std::bad_alloc from a string: the general path says what it says
    }
  }
  ++general_lines_;
  try {
    PutAside(&result->event);  // a kernel event's strings wait for the next kernel line
    result->reason = internal::DecodeGeneralPath(line, &info_, &error_, &result->event);
    if (result->ok()) {
      result->message.clear();
    } else {
      result->message.assign(error_.message());
    }
  } catch (...) {  // std::bad_alloc
    result->reason = Reason::kInternalError;
    result->message = "out of memory";  // fits the small-string buffer: no allocation
  }
  if (info_.header_valid) {
    result->header = info_.header;
  } else {
    result->header.reset();
  }
  last_type_ = info_.type_known ? EventTypeName(info_.type) : info_.type_text;
  return result->reason;
}

}  // namespace cuflight::schema

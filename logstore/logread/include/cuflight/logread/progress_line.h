// A progress line for long reads: what ReadLogFiles reports, on a terminal, rewritten in place.
#ifndef CUFLIGHT_LOGREAD_PROGRESS_LINE_H_
#define CUFLIGHT_LOGREAD_PROGRESS_LINE_H_

#include <functional>
#include <ostream>
#include <string>

#include "cuflight/logread/log_reader.h"

namespace cuflight::logread {

// Shows "<prefix>: reading file 4 of 17 (1.1 GB in all), 2.3 M events (1.9 M/s), 3 s" on `err`,
// rewritten in place with '\r', when `err` is std::cerr and standard error is a terminal, and
// only once the read has taken more than `delay_s` seconds: a short read prints nothing. Done()
// clears the line. Everything on the calling thread.
class ProgressLine {
 public:
  ProgressLine(std::string prefix, std::ostream& err, double delay_s = 1.0);
  ~ProgressLine() { Done(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // For ReadOptions::on_progress; empty when the line would never be shown.
  std::function<void(const ReadProgress&)> Callback();

  void Update(const ReadProgress& p);
  // Erases the line if one was drawn.
  void Done();

  // The text of one update, without '\r' (for the tests).
  static std::string Text(const std::string& prefix, const ReadProgress& p);

 private:
  std::string prefix_;
  std::ostream& err_;
  double delay_s_;
  bool active_;
  size_t drawn_ = 0;  // length of the line on the terminal; 0: none
};

}  // namespace cuflight::logread

#endif  // CUFLIGHT_LOGREAD_PROGRESS_LINE_H_

#pragma once
// defines: Deadline, send_all, recv_all — blocking socket reads and writes that give up at a
//          deadline, for the TCP store's client and server (dist/tcp_store*.cpp).
//
// A peer that is frozen (SIGSTOP), cut off or simply silent must never block us forever: every
// read and write waits in poll() for at most the time left before its deadline.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <optional>

namespace sg::dist {

// A point in time to give up at; `never()` waits for as long as it takes (a peer that closes the
// connection still ends the wait).
class Deadline {
public:
  using Clock = std::chrono::steady_clock;
  static Deadline never() { return Deadline(std::nullopt); }
  // `wait` is capped at a year, so that no sum of timeouts overflows the clock.
  static Deadline after(std::chrono::milliseconds wait) {
    return Deadline(Clock::now() + std::min(wait, std::chrono::milliseconds(int64_t{365} * 24 * 3600 * 1000)));
  }
  // Milliseconds left, for poll(): -1 for never, 0 once passed.
  int poll_timeout_ms() const;

private:
  explicit Deadline(std::optional<Clock::time_point> at) : at_(at) {}
  std::optional<Clock::time_point> at_;
};

enum class IoResult { ok, closed, timed_out };

// Writes all `size` bytes (without SIGPIPE). `closed` covers every socket error.
IoResult send_all(int fd, const void* data, size_t size, Deadline deadline);
// Reads exactly `size` bytes.
IoResult recv_all(int fd, void* data, size_t size, Deadline deadline);

}  // namespace sg::dist

#include "dist/socket_io.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>

namespace sg::dist {

int Deadline::poll_timeout_ms() const {
  if (!at_) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(*at_ - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, INT_MAX));
}

namespace {

// Waits until `fd` is ready for `events`; false at the deadline.
bool wait_ready(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd polled{fd, events, 0};
    const int ready = ::poll(&polled, 1, deadline.poll_timeout_ms());
    if (ready > 0) return true;  // ready, hung up or failed: the read or write that follows tells which
    if (ready == 0) return false;
    if (errno != EINTR) return true;  // the same: let the read or write report it
  }
}

}  // namespace

IoResult send_all(int fd, const void* data, size_t size, Deadline deadline) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    if (!wait_ready(fd, POLLOUT, deadline)) return IoResult::timed_out;
    const ssize_t sent = ::send(fd, bytes, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (sent <= 0) return IoResult::closed;
    bytes += sent;
    size -= static_cast<size_t>(sent);
  }
  return IoResult::ok;
}

IoResult recv_all(int fd, void* data, size_t size, Deadline deadline) {
  char* bytes = static_cast<char*>(data);
  while (size > 0) {
    if (!wait_ready(fd, POLLIN, deadline)) return IoResult::timed_out;
    const ssize_t got = ::recv(fd, bytes, size, MSG_DONTWAIT);
    if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (got <= 0) return IoResult::closed;
    bytes += got;
    size -= static_cast<size_t>(got);
  }
  return IoResult::ok;
}

}  // namespace sg::dist

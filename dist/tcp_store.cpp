// The client half of dist::TcpStore; the server is dist/tcp_store_server.cpp and the bytes on
// the wire are Note [The store's wire format] in dist/store_protocol.h.
#include "dist/tcp_store.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "dist/environment.h"
#include "dist/store_protocol.h"
#include "dist/tcp_store_server.h"

namespace sg::dist {

using namespace store_protocol;

namespace {

std::string errno_text() { return std::strerror(errno); }

std::vector<char> request_for(Command command, const std::string& key) {
  std::vector<char> request{static_cast<char>(command)};
  append_bytes(request, key.data(), key.size());
  return request;
}

// Connects without blocking past the deadline (a SYN to a host that drops it would otherwise
// wait minutes). The socket stays non-blocking: socket_io waits in poll() anyway.
int connect_before(const addrinfo& address, Deadline deadline, std::string& error) {
  const int fd = ::socket(address.ai_family, address.ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, address.ai_protocol);
  if (fd < 0) {
    error = errno_text();
    return -1;
  }
  if (::connect(fd, address.ai_addr, address.ai_addrlen) != 0) {
    int status = errno;
    if (status == EINPROGRESS) {
      pollfd polled{fd, POLLOUT, 0};
      socklen_t length = sizeof status;
      if (::poll(&polled, 1, deadline.poll_timeout_ms()) <= 0) {
        status = ETIMEDOUT;
      } else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &status, &length) != 0) {
        status = errno;
      }
    }
    if (status != 0) {
      error = std::strerror(status);
      ::close(fd);
      return -1;
    }
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

}  // namespace

std::string TcpStore::local_address() const {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  char host[NI_MAXHOST] = "";
  SG_CHECK(::getsockname(socket_, reinterpret_cast<sockaddr*>(&address), &length) == 0 &&
               ::getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, host, sizeof host, nullptr, 0,
                             NI_NUMERICHOST) == 0,
           "TcpStore: cannot tell this end's address of the connection to ", address_, ": ", std::strerror(errno));
  return host;
}

TcpStore::TcpStore(const std::string& host, int port, bool host_server, std::chrono::milliseconds timeout,
                   const std::string& token, const TcpStoreLimits& limits)
    : address_(host + ":" + std::to_string(port)),
      timeout_(timeout),
      limits_(limits) {
  SG_CHECK(token.size() <= limits.max_key_bytes, "TcpStore: SG_STORE_TOKEN is ", token.size(), " bytes long; at most ",
           limits.max_key_bytes, " are accepted");
  if (host_server) server_ = std::make_unique<TcpStoreServer>(host, port, token, limits);
  connect_and_greet(host, port, token);
}

// Rank 0 may not be up yet, and a server at its connection limit closes new connections at
// once: retry both every 50 ms until the timeout. A wrong token is final.
void TcpStore::connect_and_greet(const std::string& host, int port, const std::string& token) {
  const AddressList addresses = resolve(host, port);
  const Deadline deadline = Deadline::after(timeout_);
  const std::vector<char> hello = request_for(kHello, token);
  std::string last_error;
  bool refused = false;
  for (;;) {
    for (addrinfo* a = addresses.get(); a != nullptr && socket_ < 0 && !refused; a = a->ai_next) {
      const int fd = connect_before(*a, deadline, last_error);
      if (fd < 0) continue;
      uint8_t welcome = 0;
      if (send_all(fd, hello.data(), hello.size(), deadline) == IoResult::ok &&
          recv_all(fd, &welcome, 1, deadline) == IoResult::ok) {
        if (welcome == 1) {
          socket_ = fd;
          break;
        }
        refused = true;
      } else {
        last_error = "the store closed the connection before answering (too many connections?)";
      }
      ::close(fd);
    }
    if (socket_ >= 0 || refused || deadline.poll_timeout_ms() == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  SG_CHECK(!refused, "TcpStore: the store of rank 0 at ", address_,
           " refused this process's SG_STORE_TOKEN: "
           "every process of a job must have the same token (sgrun gives its workers one per job; on several "
           "nodes, set the same SG_STORE_TOKEN on each)");
  // A name that rank 0's machine maps to loopback (loopback_master_warning) looks, from here, like
  // a store that is not running.
  const bool name = !is_numeric_address(host);
  SG_CHECK(socket_ >= 0, "TcpStore: could not connect to the store of rank 0 at ", address_, " within ",
           timeout_.count(), " ms (", last_error,
           "). Is rank 0 running, and MASTER_ADDR/MASTER_PORT the same on every rank?",
           name ? detail::concat(" On rank 0's machine, does '", host,
                                 "' resolve to the address this machine reaches it at? The store listens only there "
                                 "(Debian and Ubuntu map a machine's own name to 127.0.1.1)")
                : "");
}

TcpStore::~TcpStore() {
  // An answer left unread in the socket would make close() reset the connection rather than end
  // it; a store that does not answer within a moment is not waited for.
  if (socket_ >= 0 && broken_.empty() && !unanswered_set_.empty()) {
    uint8_t status = 0;
    recv_all(socket_, &status, 1, Deadline::after(std::chrono::milliseconds(100)));
  }
  if (socket_ >= 0) ::close(socket_);
  server_.reset();  // after our own connection is closed
}

void TcpStore::fail(IoResult result, const char* when, const std::string& key, std::chrono::milliseconds waited) {
  broken_ =
      result == IoResult::timed_out
          ? detail::concat("the store at ", address_, " did not answer within ", waited.count(), " ms (", when,
                           " key '", key, "'); rank 0, which hosts it, may be frozen (stopped), overloaded or cut off")
          : detail::concat("lost the connection to the store at ", address_, " (", when, " key '", key,
                           "'); rank 0, which hosts it, has probably exited");
  ::shutdown(socket_, SHUT_RDWR);
  SG_FAIL("TcpStore: ", broken_);
}

// Note [Marks that do not wait]
// Before every collective the communication thread writes "started/<rank>" (dist/collective_report.h),
// so that after a failure the other ranks can tell how far this one got. Waiting for the store's
// answer put a round trip through the store's thread on rank 0 in front of every collective: 50-60
// microseconds on the 2 vCPUs of docs/performance.md, a third of a small all-reduce's time.
// set_without_waiting sends the request and leaves the one-byte answer in the socket; the next
// request on the connection reads it first (by then it has long arrived), so at most one answer
// is ever unread and the server never has replies piling up for a client that does not read them.
void TcpStore::collect_unanswered_set() {
  if (unanswered_set_.empty()) return;
  const std::string key = std::move(unanswered_set_);
  unanswered_set_.clear();
  uint8_t status = 0;
  if (const IoResult got = recv_all(socket_, &status, 1, Deadline::after(timeout_)); got != IoResult::ok)
    fail(got, "waiting for the reply about", key, timeout_);
  check_set_taken(status, key);
}

std::vector<char> TcpStore::call(const std::vector<char>& request, const std::string& key,
                                 std::chrono::milliseconds server_wait) {
  std::lock_guard<std::mutex> lock(mutex_);
  check_usable(key);
  collect_unanswered_set();
  const Deadline deadline = Deadline::after(server_wait + timeout_);
  uint8_t status = 0;
  if (const IoResult sent = send_all(socket_, request.data(), request.size(), deadline); sent != IoResult::ok)
    fail(sent, "sending the request for", key, server_wait + timeout_);
  if (const IoResult got = recv_all(socket_, &status, 1, deadline); got != IoResult::ok)
    fail(got, "waiting for the reply about", key, server_wait + timeout_);
  std::vector<char> reply{static_cast<char>(status)};
  const auto command = static_cast<uint8_t>(request[0]);
  if (command == kGet && status == 1) {
    std::vector<char> value;
    const ReadBytes read = recv_bytes(socket_, value, limits_.max_value_bytes, deadline);
    if (read != ReadBytes::ok)
      fail(read == ReadBytes::timed_out ? IoResult::timed_out : IoResult::closed, "reading", key,
           server_wait + timeout_);
    reply.insert(reply.end(), value.begin(), value.end());
  } else if (command == kAdd) {
    int64_t total = 0;
    if (const IoResult got = recv_all(socket_, &total, sizeof total, deadline); got != IoResult::ok)
      fail(got, "reading", key, server_wait + timeout_);
    append(reply, total);
  }
  return reply;
}

namespace {
void check_key(const std::string& key, const TcpStoreLimits& limits, const std::string& address) {
  SG_CHECK(key.size() <= limits.max_key_bytes, "TcpStore: key '", key.substr(0, 64), "...' is ", key.size(),
           " bytes long; the store at ", address, " takes keys of at most ", limits.max_key_bytes, " bytes");
}
}  // namespace

std::vector<char> TcpStore::set_request(const std::string& key, const std::vector<char>& value) const {
  check_key(key, limits_, address_);
  SG_CHECK(value.size() <= limits_.max_value_bytes, "TcpStore: the value for key '", key, "' is ", value.size(),
           " bytes; the store at ", address_, " takes values of at most ", limits_.max_value_bytes, " bytes");
  std::vector<char> request = request_for(kSet, key);
  append_bytes(request, value.data(), value.size());
  return request;
}

void TcpStore::check_set_taken(uint8_t status, const std::string& key) const {
  SG_CHECK(status == 1, "TcpStore: the store at ", address_, " refused key '", key, "': it already holds its limit of ",
           limits_.max_held_bytes, " bytes");
}

void TcpStore::check_usable(const std::string& key) const {
  SG_CHECK(broken_.empty(), "TcpStore: the connection to the store at ", address_, " is unusable (request for key '",
           key, "'): ", broken_);
}

void TcpStore::set(const std::string& key, const std::vector<char>& value) {
  check_set_taken(static_cast<uint8_t>(call(set_request(key, value), key)[0]), key);
}

// Note [Marks that do not wait]
void TcpStore::set_without_waiting(const std::string& key, const std::vector<char>& value) {
  const std::vector<char> request = set_request(key, value);
  std::lock_guard<std::mutex> lock(mutex_);
  check_usable(key);
  collect_unanswered_set();
  if (const IoResult sent = send_all(socket_, request.data(), request.size(), Deadline::after(timeout_));
      sent != IoResult::ok)
    fail(sent, "sending the request for", key, timeout_);
  unanswered_set_ = key;
}

std::vector<char> TcpStore::get(const std::string& key) {
  check_key(key, limits_, address_);
  std::vector<char> request = request_for(kGet, key);
  append(request, static_cast<int64_t>(timeout_.count()));
  std::vector<char> reply = call(request, key, timeout_);
  SG_CHECK(reply[0] == 1, "TcpStore: key '", key, "' did not appear in the store at ", address_, " within ",
           timeout_.count(), " ms");
  return std::vector<char>(reply.begin() + 1, reply.end());
}

void TcpStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void TcpStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const std::string& key : keys) {
    check_key(key, limits_, address_);
    const auto left =
        std::max(std::chrono::milliseconds(0),
                 std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()));
    std::vector<char> request = request_for(kGet, key);
    append(request, static_cast<int64_t>(left.count()));
    SG_CHECK(call(request, key, left)[0] == 1, "TcpStore: key '", key, "' did not appear in the store at ", address_,
             " within ", timeout.count(), " ms");
  }
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  check_key(key, limits_, address_);
  std::vector<char> request = request_for(kAdd, key);
  append(request, delta);
  const std::vector<char> reply = call(request, key);
  const auto status = static_cast<uint8_t>(reply[0]);
  SG_CHECK(status != kAddNotInteger, "TcpStore: add on key '", key, "' in the store at ", address_,
           ", which holds a value that is not an integer (add counts; set stores bytes)");
  SG_CHECK(status != kAddOverflow, "TcpStore: add of ", delta, " on key '", key, "' in the store at ", address_,
           " would overflow a 64-bit integer");
  SG_CHECK(status == kAddDone, "TcpStore: the store at ", address_, " refused a new key '", key,
           "': it already holds its limit of ", limits_.max_held_bytes, " bytes");
  int64_t total = 0;
  std::memcpy(&total, reply.data() + 1, sizeof total);
  return total;
}

bool TcpStore::delete_key(const std::string& key) {
  check_key(key, limits_, address_);
  return call(request_for(kDelete, key), key)[0] == 1;
}

void TcpStore::register_rank(int rank) { call(request_for(kRank, std::to_string(rank)), "rank"); }

bool TcpStore::check(const std::vector<std::string>& keys) {
  for (const std::string& key : keys) {
    check_key(key, limits_, address_);
    if (call(request_for(kCheck, key), key)[0] != 1) return false;
  }
  return true;
}

}  // namespace sg::dist

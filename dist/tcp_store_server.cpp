// Note [Departure marks]
// A client that said RANK is a rank. When its connection closes — the process exited, crashed
// or was killed, which closes every socket it held — the server sets "departed/<rank>". After a
// failed collective that tells a rank that died (departed) from one that is alive but elsewhere.
#include "dist/tcp_store_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "dist/store_protocol.h"

namespace sg::dist {

using namespace store_protocol;

namespace {

std::string errno_text() { return std::strerror(errno); }

// Half the descriptors this process may open: the other half stays for Gloo's pairs, data files
// and checkpoints, so a flood of connections cannot starve the training itself.
int default_max_connections() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 4096;
  return static_cast<int>(std::clamp<rlim_t>(limit.rlim_cur / 2, 16, 65536));
}

std::string peer_name(const sockaddr_storage& address) {
  char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";
  ::getnameinfo(reinterpret_cast<const sockaddr*>(&address), sizeof address, host, sizeof host, port, sizeof port,
                NI_NUMERICHOST | NI_NUMERICSERV);
  return std::string(host) + ":" + port;
}

// Compares in time independent of where the strings differ, so the answer's timing does not
// reveal how much of a guessed token was right.
bool same_token(const std::string& a, const std::string& b) {
  unsigned char difference = a.size() != b.size();
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i)
    difference |= static_cast<unsigned char>((i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0));
  return difference == 0;
}

// Reads and drops `size` bytes (a value the store has no room for), in small pieces.
bool discard(int fd, uint32_t size) {
  char buffer[65536];
  while (size > 0) {
    const uint32_t piece = std::min<uint32_t>(size, sizeof buffer);
    if (recv_all(fd, buffer, piece, Deadline::never()) != IoResult::ok) return false;
    size -= piece;
  }
  return true;
}

// Every key or value the store holds costs its bytes plus this much bookkeeping.
constexpr int64_t kEntryOverhead = 64;

}  // namespace

TcpStoreServer::TcpStoreServer(const std::string& host, int port, std::string token, const TcpStoreLimits& limits)
    : token_(std::move(token)),
      limits_(limits) {
  const AddressList addresses = resolve(host, port);
  std::string reason;
  for (addrinfo* a = addresses.get(); a != nullptr && listen_fd_ < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // a restarted group reuses the port
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
      listen_fd_ = fd;
    } else {
      reason = errno_text();
      ::close(fd);
    }
  }
  SG_CHECK(listen_fd_ >= 0, "TcpStore: rank 0 cannot serve the store on port ", port, " of ", host, ": ", reason,
           " (another run on this port? pick another MASTER_PORT, or use sgrun --standalone; MASTER_ADDR must be "
           "an address of rank 0's machine, which the store listens on)");
  // Non-blocking: a client that hangs up between poll and accept must not block the loop.
  ::fcntl(listen_fd_, F_SETFL, ::fcntl(listen_fd_, F_GETFL) | O_NONBLOCK);
  int wake[2];
  SG_CHECK(::pipe2(wake, O_CLOEXEC) == 0, "TcpStore: pipe2 failed: ", errno_text());
  wake_read_fd_ = wake[0];
  wake_write_fd_ = wake[1];
  accept_thread_ = std::thread([this] { accept_loop(); });
}

TcpStoreServer::~TcpStoreServer() {
  {
    // Under the lock, so a serving thread between checking the flag and waiting cannot miss it.
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  [[maybe_unused]] const ssize_t ignored = ::write(wake_write_fd_, "x", 1);
  accept_thread_.join();
  {
    std::lock_guard<std::mutex> lock(connections_mutex_);
    for (Connection& connection : connections_)
      if (connection.fd >= 0) ::shutdown(connection.fd, SHUT_RDWR);  // wakes threads blocked in a read
  }
  changed_.notify_all();  // and those waiting for a key
  for (Connection& connection : connections_) connection.thread.join();
  for (const int fd : {listen_fd_, wake_read_fd_, wake_write_fd_}) ::close(fd);
}

void TcpStoreServer::accept_loop() {
  const int max_connections = limits_.max_connections > 0 ? limits_.max_connections : default_max_connections();
  for (;;) {
    pollfd polled[2] = {{listen_fd_, POLLIN, 0}, {wake_read_fd_, POLLIN, 0}};
    ::poll(polled, 2, 1000);             // wakes at least every second to reap finished connections
    if (polled[1].revents != 0) return;  // the destructor
    reap_finished_connections();
    if ((polled[0].revents & POLLIN) == 0) continue;
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length, SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors or memory: the pending connection stays queued and poll would report it
      // again at once; wait a little instead of spinning.
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    std::lock_guard<std::mutex> lock(connections_mutex_);
    if (static_cast<int>(connections_.size()) >= max_connections) {
      ::close(fd);  // accepted only to be closed: a full backlog would keep the ranks out too
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    try {
      Connection& connection = connections_.emplace_back(fd, peer_name(address));
      connection.thread = std::thread([this, &connection] { serve(connection); });
    } catch (const std::exception&) {  // no memory or no thread to be had: drop this client, keep the others
      ::close(fd);
      if (!connections_.empty() && connections_.back().fd == fd && !connections_.back().thread.joinable())
        connections_.pop_back();
    }
  }
}

void TcpStoreServer::reap_finished_connections() {
  std::lock_guard<std::mutex> lock(connections_mutex_);
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (!it->finished) {
      ++it;
      continue;
    }
    it->thread.join();  // returns at once: `finished` is the thread's last act
    it = connections_.erase(it);
  }
}

void TcpStoreServer::serve(Connection& connection) {
  int rank = -1;  // set by RANK
  try {
    serve_requests(connection, rank);
  } catch (const std::exception&) {
    // Out of memory, say: this client is dropped, the store and its other clients carry on.
  }
  if (rank >= 0) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const std::string key = "departed/" + std::to_string(rank);
      if (values_.emplace(key, std::vector<char>{'1'}).second) held_bytes_ += kEntryOverhead + key.size() + 1;
    }
    changed_.notify_all();  // Note [Departure marks]
  }
  {
    std::lock_guard<std::mutex> lock(connections_mutex_);
    ::close(connection.fd);
    connection.fd = -1;
  }
  connection.finished = true;
}

bool TcpStoreServer::charge(int64_t bytes) {
  if (held_bytes_ + bytes > static_cast<int64_t>(limits_.max_held_bytes)) return false;
  held_bytes_ += bytes;
  return true;
}

void TcpStoreServer::report_refusal(const Connection& connection, const char* why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (refusals_reported_ >= 3) return;  // a flood of strangers must not flood the log too
  if (++refusals_reported_ == 3) why = "(further refusals are not reported)";
  std::fprintf(stderr, "TcpStore: refused a connection from %s: %s\n", connection.peer.c_str(), why);
}

// Answers the client's requests until it closes the connection or breaks the protocol.
void TcpStoreServer::serve_requests(Connection& connection, int& rank) {
  const int fd = connection.fd;
  const Deadline handshake = Deadline::after(limits_.handshake_timeout);
  bool greeted = false;
  for (;;) {
    const Deadline deadline = greeted ? Deadline::never() : handshake;
    uint8_t command = 0;
    std::vector<char> key_bytes;
    if (recv_all(fd, &command, 1, deadline) != IoResult::ok ||
        recv_bytes(fd, key_bytes, limits_.max_key_bytes, deadline) != ReadBytes::ok)
      return;
    const std::string key(key_bytes.begin(), key_bytes.end());
    const int64_t entry_bytes = kEntryOverhead + static_cast<int64_t>(key.size());
    std::vector<char> reply;
    if (!greeted) {
      if (command != kHello) return report_refusal(connection, "it did not start with HELLO");
      const bool welcome = same_token(key, token_);
      reply.push_back(welcome ? 1 : 0);
      if (!welcome) {
        send_all(fd, reply.data(), reply.size(), handshake);
        return report_refusal(connection, "wrong SG_STORE_TOKEN");
      }
      greeted = true;
    } else if (command == kSet) {
      uint32_t size = 0;
      if (recv_all(fd, &size, sizeof size, deadline) != IoResult::ok || size > limits_.max_value_bytes) return;
      // Charged before the bytes arrive, so values in flight count against the limit too. The
      // value it replaces is released only once the new one is stored, but counts as room now.
      bool room;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        const auto replaced = values_.find(key);
        const int64_t freed =
            replaced == values_.end() ? 0 : entry_bytes + static_cast<int64_t>(replaced->second.size());
        room = held_bytes_ + entry_bytes + size - freed <= static_cast<int64_t>(limits_.max_held_bytes);
        if (room) held_bytes_ += entry_bytes + size;
      }
      if (!room) {
        if (!discard(fd, size)) return;
        reply.push_back(0);
      } else {
        std::vector<char> value;
        bool received = false;
        try {
          value.resize(size);
          received = size == 0 || recv_all(fd, value.data(), size, deadline) == IoResult::ok;
        } catch (...) {}
        std::lock_guard<std::mutex> lock(mutex_);
        if (!received) {
          held_bytes_ -= entry_bytes + size;
          return;
        }
        const auto [slot, inserted] = values_.try_emplace(key);
        if (!inserted) held_bytes_ -= entry_bytes + static_cast<int64_t>(slot->second.size());
        slot->second = std::move(value);
        reply.push_back(1);
      }
      changed_.notify_all();
    } else if (command == kGet) {
      int64_t timeout_ms = 0;
      if (recv_all(fd, &timeout_ms, sizeof timeout_ms, deadline) != IoResult::ok) return;
      timeout_ms = std::clamp<int64_t>(timeout_ms, 0, limits_.max_get_wait.count());
      std::unique_lock<std::mutex> lock(mutex_);
      const bool found = changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] {
        return stopping_ || values_.count(key) > 0;
      }) && values_.count(key) > 0;
      // Shutting down: hang up rather than answer "not found", which the client would report
      // as a timeout; a closed connection reads as "rank 0 has probably exited".
      if (stopping_) return;
      reply.push_back(found ? 1 : 0);
      if (found) append_bytes(reply, values_[key].data(), values_[key].size());
    } else if (command == kAdd) {
      int64_t delta = 0;
      if (recv_all(fd, &delta, sizeof delta, deadline) != IoResult::ok) return;
      int64_t total = 0;
      AddStatus status = kAddDone;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        auto slot = values_.find(key);
        if (slot == values_.end()) {
          if (charge(entry_bytes)) {
            slot = values_.emplace(key, std::vector<char>{}).first;
          } else {
            status = kAddStoreFull;
          }
        } else {
          const std::vector<char>& stored = slot->second;
          const auto parsed = std::from_chars(stored.data(), stored.data() + stored.size(), total);
          if (!stored.empty() && (parsed.ec != std::errc() || parsed.ptr != stored.data() + stored.size()))
            status = kAddNotInteger;  // left alone for the client to report
        }
        if (status == kAddDone && __builtin_add_overflow(total, delta, &total)) status = kAddOverflow;
        if (status == kAddDone) {
          const std::string text = std::to_string(total);
          held_bytes_ += static_cast<int64_t>(text.size()) - static_cast<int64_t>(slot->second.size());
          slot->second.assign(text.begin(), text.end());
        }
      }
      changed_.notify_all();
      reply.push_back(status);
      append(reply, total);
    } else if (command == kCheck) {
      std::lock_guard<std::mutex> lock(mutex_);
      reply.push_back(values_.count(key) > 0 ? 1 : 0);
    } else if (command == kDelete) {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto found = values_.find(key);
      reply.push_back(found != values_.end() ? 1 : 0);
      if (found != values_.end()) {
        held_bytes_ -= entry_bytes + static_cast<int64_t>(found->second.size());
        values_.erase(found);
      }
    } else if (command == kRank) {
      if (std::from_chars(key.data(), key.data() + key.size(), rank).ec != std::errc() || rank < 0) return;
      reply.push_back(1);
    } else {
      return;  // not our protocol: drop the connection
    }
    if (send_all(fd, reply.data(), reply.size(), Deadline::never()) != IoResult::ok) return;
  }
}

}  // namespace sg::dist

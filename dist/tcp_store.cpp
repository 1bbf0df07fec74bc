// Note [The store's wire format]
// A request is one byte of command, the key (u32 length + bytes), then:
//   SET   the value (u32 length + bytes)          reply: nothing but a status byte
//   GET   a timeout in ms (i64)                   reply: status, then the value if found
//   ADD   the delta (i64)                         reply: status (0: the key holds no integer),
//                                                        then the new value (i64)
//   CHECK nothing                                 reply: status (1 present, 0 absent)
//   HELLO nothing; the key is the client's rank   reply: status
// Integers are in host byte order: the ranks of one job run the same binary on the same
// kind of machine. GET blocks in the server (on a condition variable) rather than polling, so
// rendezvous costs one round trip per key.
//
// Note [Departure marks]
// A client that said HELLO is a rank. When its connection closes — the process exited, crashed
// or was killed, which closes every socket it held — the server sets "departed/<rank>". After a
// failed collective that tells a rank that died (departed) from one that is alive but elsewhere.
#include "dist/tcp_store.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <map>
#include <thread>

#include "core/error.h"

namespace sg::dist {

namespace {

enum Command : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kCheck = 4, kHello = 5 };

bool send_all(int fd, const void* data, size_t size) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t sent = ::send(fd, bytes, size, MSG_NOSIGNAL);
    if (sent <= 0) return false;
    bytes += sent;
    size -= static_cast<size_t>(sent);
  }
  return true;
}

bool recv_all(int fd, void* data, size_t size) {
  char* bytes = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t got = ::recv(fd, bytes, size, 0);
    if (got <= 0) return false;
    bytes += got;
    size -= static_cast<size_t>(got);
  }
  return true;
}

template <typename T>
void append(std::vector<char>& out, const T& value) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}

void append_bytes(std::vector<char>& out, const char* data, size_t size) {
  append(out, static_cast<uint32_t>(size));
  const size_t at = out.size();
  out.resize(at + size);
  if (size > 0) std::memcpy(out.data() + at, data, size);
}

bool recv_bytes(int fd, std::vector<char>& out) {
  uint32_t size = 0;
  if (!recv_all(fd, &size, sizeof size)) return false;
  out.resize(size);
  return size == 0 || recv_all(fd, out.data(), size);
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

// One thread accepts connections; each client gets a thread that serves its requests in order.
class TcpStore::Server {
public:
  explicit Server(int port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    SG_CHECK(listen_fd_ >= 0, "TcpStore: socket() failed: ", errno_text());
    const int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // a restarted group reuses the port
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    address.sin_port = htons(static_cast<uint16_t>(port));
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(listen_fd_, 128) != 0) {
      const std::string reason = errno_text();
      ::close(listen_fd_);
      SG_CHECK(false, "TcpStore: rank 0 cannot serve the store on port ", port, ": ", reason,
               " (another run on this port? pick another MASTER_PORT, or use sgrun --standalone)");
    }
    accept_thread_ = std::thread([this] { accept_loop(); });
  }

  ~Server() {
    {
      // Under the lock, so a client thread between checking the flag and waiting cannot miss it.
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    ::shutdown(listen_fd_, SHUT_RDWR);
    accept_thread_.join();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (int fd : client_fds_) ::shutdown(fd, SHUT_RDWR);  // wakes threads blocked in recv
    }
    changed_.notify_all();  // and those waiting for a key
    for (std::thread& t : client_threads_) t.join();
    for (int fd : client_fds_) ::close(fd);
    ::close(listen_fd_);
  }

private:
  void accept_loop() {
    while (!stopping_) {
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;  // shutdown (then stopping_) or a transient error
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      std::lock_guard<std::mutex> lock(mutex_);
      client_fds_.push_back(fd);
      client_threads_.emplace_back([this, fd] { serve(fd); });
    }
  }

  void serve(int fd) {
    int rank = -1;  // set by HELLO
    serve_requests(fd, rank);
    if (rank < 0) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      values_["departed/" + std::to_string(rank)] = {'1'};  // Note [Departure marks]
    }
    changed_.notify_all();
  }

  // Answers `fd`'s requests until it closes the connection (or breaks the protocol).
  void serve_requests(int fd, int& rank) {
    for (;;) {
      uint8_t command = 0;
      std::vector<char> key_bytes;
      if (!recv_all(fd, &command, 1) || !recv_bytes(fd, key_bytes)) return;  // client gone
      const std::string key(key_bytes.begin(), key_bytes.end());
      std::vector<char> reply;
      if (command == kSet) {
        std::vector<char> value;
        if (!recv_bytes(fd, value)) return;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          values_[key] = std::move(value);
        }
        changed_.notify_all();
        reply.push_back(1);
      } else if (command == kGet) {
        int64_t timeout_ms = 0;
        if (!recv_all(fd, &timeout_ms, sizeof timeout_ms)) return;
        std::unique_lock<std::mutex> lock(mutex_);
        const bool found = changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                                             [&] { return stopping_ || values_.count(key) > 0; }) &&
                           values_.count(key) > 0;
        // Shutting down: hang up rather than answer "not found", which the client would report
        // as a timeout; a closed connection reads as "rank 0 has probably exited".
        if (stopping_) return;
        reply.push_back(found ? 1 : 0);
        if (found) append_bytes(reply, values_[key].data(), values_[key].size());
      } else if (command == kAdd) {
        int64_t delta = 0;
        if (!recv_all(fd, &delta, sizeof delta)) return;
        int64_t total = 0;
        bool is_integer = true;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          std::vector<char>& stored = values_[key];
          if (!stored.empty()) {
            const char* end = stored.data() + stored.size();
            const auto parsed = std::from_chars(stored.data(), end, total);
            is_integer = parsed.ec == std::errc() && parsed.ptr == end;
          }
          if (is_integer) {  // else leave the value alone and let the client report it
            total += delta;
            const std::string text = std::to_string(total);
            stored.assign(text.begin(), text.end());
          }
        }
        changed_.notify_all();
        reply.push_back(is_integer ? 1 : 0);
        append(reply, total);
      } else if (command == kCheck) {
        std::lock_guard<std::mutex> lock(mutex_);
        reply.push_back(values_.count(key) > 0 ? 1 : 0);
      } else if (command == kHello) {
        if (std::from_chars(key.data(), key.data() + key.size(), rank).ec != std::errc()) return;  // not our protocol
        reply.push_back(1);
      } else {
        return;  // not our protocol: drop the connection
      }
      if (!send_all(fd, reply.data(), reply.size())) return;
    }
  }

  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::vector<char>> values_;
  std::vector<int> client_fds_;
  std::vector<std::thread> client_threads_;
};

TcpStore::TcpStore(const std::string& host, int port, bool host_server, std::chrono::milliseconds timeout)
    : address_(host + ":" + std::to_string(port)), timeout_(timeout) {
  if (host_server) server_ = std::make_unique<Server>(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addresses = nullptr;
  const int resolved = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &addresses);
  SG_CHECK(resolved == 0, "TcpStore: cannot resolve MASTER_ADDR '", host, "': ", ::gai_strerror(resolved));
  // Rank 0 may not be up yet: retry every 50 ms until the timeout.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last_error;
  while (socket_ < 0) {
    for (addrinfo* a = addresses; a != nullptr && socket_ < 0; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        socket_ = fd;
      } else {
        last_error = errno_text();
        ::close(fd);
      }
    }
    if (socket_ >= 0 || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::freeaddrinfo(addresses);
  SG_CHECK(socket_ >= 0, "TcpStore: could not connect to the store of rank 0 at ", address_, " within ",
           timeout.count(), " ms (", last_error, "). Is rank 0 running, and MASTER_ADDR/MASTER_PORT the same on every rank?");
  const int one = 1;
  ::setsockopt(socket_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

TcpStore::~TcpStore() {
  if (socket_ >= 0) ::close(socket_);
  server_.reset();  // after our own connection is closed
}

std::vector<char> TcpStore::call(const std::vector<char>& request, const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint8_t status = 0;
  SG_CHECK(send_all(socket_, request.data(), request.size()) && recv_all(socket_, &status, 1),
           "TcpStore: lost the connection to the store at ", address_, " (request for key '", key,
           "'); rank 0, which hosts it, has probably exited");
  std::vector<char> reply{static_cast<char>(status)};
  const uint8_t command = static_cast<uint8_t>(request[0]);
  bool ok = true;
  if (command == kGet && status == 1) {
    std::vector<char> value;
    ok = recv_bytes(socket_, value);
    reply.insert(reply.end(), value.begin(), value.end());
  } else if (command == kAdd) {
    int64_t total = 0;
    ok = recv_all(socket_, &total, sizeof total);
    append(reply, total);
  }
  SG_CHECK(ok, "TcpStore: lost the connection to the store at ", address_, " while reading key '", key, "'");
  return reply;
}

namespace {
std::vector<char> request_for(Command command, const std::string& key) {
  std::vector<char> request{static_cast<char>(command)};
  append_bytes(request, key.data(), key.size());
  return request;
}
}  // namespace

void TcpStore::set(const std::string& key, const std::vector<char>& value) {
  std::vector<char> request = request_for(kSet, key);
  append_bytes(request, value.data(), value.size());
  call(request, key);
}

std::vector<char> TcpStore::get(const std::string& key) {
  std::vector<char> request = request_for(kGet, key);
  append(request, static_cast<int64_t>(timeout_.count()));
  std::vector<char> reply = call(request, key);
  SG_CHECK(reply[0] == 1, "TcpStore: key '", key, "' did not appear in the store at ", address_, " within ",
           timeout_.count(), " ms");
  return std::vector<char>(reply.begin() + 1, reply.end());
}

void TcpStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void TcpStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const std::string& key : keys) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    std::vector<char> request = request_for(kGet, key);
    append(request, static_cast<int64_t>(std::max<int64_t>(0, left.count())));
    SG_CHECK(call(request, key)[0] == 1, "TcpStore: key '", key, "' did not appear in the store at ", address_,
             " within ", timeout.count(), " ms");
  }
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  std::vector<char> request = request_for(kAdd, key);
  append(request, delta);
  const std::vector<char> reply = call(request, key);
  SG_CHECK(reply[0] == 1, "TcpStore: add on key '", key, "' in the store at ", address_,
           ", which holds a value that is not an integer (add counts; set stores bytes)");
  int64_t total = 0;
  std::memcpy(&total, reply.data() + 1, sizeof total);
  return total;
}

void TcpStore::register_rank(int rank) { call(request_for(kHello, std::to_string(rank)), "hello"); }

bool TcpStore::check(const std::vector<std::string>& keys) {
  for (const std::string& key : keys)
    if (call(request_for(kCheck, key), key)[0] != 1) return false;
  return true;
}

}  // namespace sg::dist

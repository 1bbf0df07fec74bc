// Fuzz target: the TCP store's server (dist/tcp_store_server.cpp) on the bytes a client can send.
// One server runs for the whole session on a loopback port; each input is one connection. Unless
// the first byte is odd, the connection first says HELLO with the right token, so the fuzzer spends
// its time on the requests an authenticated peer can make rather than on the handshake. The limits
// are small so that what a stream of inputs stores stays bounded and a GET never blocks for long.
// A finding is a crash, a sanitizer report or a leak in the server; refusing is its right.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "dist/socket_io.h"
#include "dist/store_protocol.h"
#include "dist/tcp_store.h"
#include "dist/tcp_store_server.h"

namespace {

constexpr char kToken[] = "fuzz-token";

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0)
    std::abort();
  ::close(fd);
  return ntohs(address.sin_port);
}

struct Server {
  int port = free_loopback_port();
  sg::dist::TcpStoreServer server{"127.0.0.1", port, kToken, [] {
                                    sg::dist::TcpStoreLimits limits;
                                    limits.max_key_bytes = 256;
                                    limits.max_value_bytes = 4096;
                                    limits.max_held_bytes = 1 << 20;
                                    limits.max_connections = 16;
                                    limits.handshake_timeout = std::chrono::milliseconds(50);
                                    limits.max_get_wait = std::chrono::milliseconds(5);
                                    return limits;
                                  }()};
};

// A connection to the server. It is closed with a reset rather than a FIN (SO_LINGER 0), so the
// hundreds of thousands of connections of a run leave no TIME_WAIT entries to exhaust the local
// ports. A connect that fails is retried for a second (the server may be at its connection limit
// while it reaps) before the harness gives up, saying why.
int connect_to(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int attempt = 0;; ++attempt) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) std::abort();
    const linger reset = {1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) return fd;
    const int error = errno;
    ::close(fd);
    if (attempt == 100) {
      std::fprintf(stderr, "fuzz_store: cannot connect to the store: %s\n", std::strerror(error));
      std::abort();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sg::dist;
  static Server server;
  if (size == 0) return 0;
  std::vector<char> message;
  if (data[0] % 2 == 0) {
    store_protocol::append(message, static_cast<uint8_t>(store_protocol::kHello));
    store_protocol::append_bytes(message, kToken, sizeof kToken - 1);
  }
  message.insert(message.end(), data + 1, data + size);

  const int fd = connect_to(server.port);
  const Deadline deadline = Deadline::after(std::chrono::milliseconds(200));
  (void)send_all(fd, message.data(), message.size(), deadline);
  ::shutdown(fd, SHUT_WR);  // no more requests: the server must answer what it can and hang up
  char reply[4096];
  while (recv_all(fd, reply, 1, deadline) == IoResult::ok) {}
  ::close(fd);
  return 0;
}

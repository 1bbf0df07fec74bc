#pragma once
// defines: dist::TcpStoreServer — the server half of dist::TcpStore, run inside rank 0: one
//          thread accepts connections, and each client gets a thread that answers its requests
//          in order (Note [The store's wire format] in dist/store_protocol.h, Note [The store
//          faces the network] in dist/tcp_store.h).
#include <atomic>
#include <condition_variable>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dist/tcp_store.h"

namespace sg::dist {

class TcpStoreServer {
public:
  // Listens on host:port; throws naming both when it cannot.
  TcpStoreServer(const std::string& host, int port, std::string token, const TcpStoreLimits& limits);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

private:
  struct Connection {
    Connection(int fd, std::string peer) : fd(fd), peer(std::move(peer)) {}
    int fd;
    std::string peer;  // "address:port", for the refusal message
    std::thread thread;
    std::atomic<bool> finished{false};
  };

  void accept_loop();
  void reap_finished_connections();
  void serve(Connection& connection);
  void serve_requests(Connection& connection, int& rank);
  // Adds `bytes` to what the store holds; false (and nothing added) past max_held_bytes.
  bool charge(int64_t bytes);
  void report_refusal(const Connection& connection, const char* why);

  const std::string token_;
  const TcpStoreLimits limits_;
  int listen_fd_ = -1;
  int wake_read_fd_ = -1, wake_write_fd_ = -1;  // the destructor wakes the accept loop through it
  std::thread accept_thread_;

  std::mutex connections_mutex_;
  std::list<Connection> connections_;  // a list: each serving thread holds a reference to its entry

  std::mutex mutex_;  // guards everything below
  bool stopping_ = false;
  std::condition_variable changed_;
  std::map<std::string, std::vector<char>> values_;
  int64_t held_bytes_ = 0;
  int refusals_reported_ = 0;
};

}  // namespace sg::dist

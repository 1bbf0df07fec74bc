#pragma once
// defines: dist::TcpStore — the small key-value store the ranks meet at (rendezvous). Rank 0
//          hosts it on MASTER_ADDR:MASTER_PORT; every rank (rank 0 too) is a client. Gloo uses it
//          to exchange the ranks' addresses when it connects them (gloo::rendezvous::Store), and
//          we use it to count arrivals and to tell, after a failure, how far each rank got and
//          which ranks are gone.
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

namespace sg::dist {

class TcpStore : public gloo::rendezvous::Store {
public:
  // With `host_server`, first starts the server on `port` (all interfaces). Then connects to
  // host:port, retrying until `timeout` (rank 0 may start last). Every blocking call below waits
  // at most `timeout` and then throws an sg::Error naming the key and the address.
  TcpStore(const std::string& host, int port, bool host_server, std::chrono::milliseconds timeout);
  ~TcpStore() override;
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  void set(const std::string& key, const std::vector<char>& value) override;
  // Waits until `key` exists, then returns its value.
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
  // Adds `delta` to the integer stored at `key` (0 when absent) and returns the new value; atomic
  // across clients, so it counts arrivals.
  int64_t add(const std::string& key, int64_t delta);
  // Whether every key exists now (no waiting).
  bool check(const std::vector<std::string>& keys);
  // Tells the server that this connection is rank `rank`: when it closes (this process ends,
  // however it ends), the server sets "departed/<rank>" (Note [Departure marks]).
  void register_rank(int rank);

  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  const std::string& address() const { return address_; }  // "host:port", for messages

private:
  class Server;
  // Sends one request and reads the reply under the connection's lock.
  std::vector<char> call(const std::vector<char>& request, const std::string& key);

  std::unique_ptr<Server> server_;
  std::string address_;
  int socket_ = -1;
  std::mutex mutex_;
  std::chrono::milliseconds timeout_;
};

}  // namespace sg::dist

#pragma once
// defines: dist::TcpStore — the small key-value store the ranks meet at (rendezvous). Rank 0
//          hosts it on MASTER_ADDR:MASTER_PORT; every rank (rank 0 too) is a client. Gloo uses it
//          to exchange the ranks' addresses when it connects them (through an adapter to its
//          rendezvous Store in dist/process_group_gloo.cpp), and we use it to count arrivals and to tell, after a
//          failure, how far each rank got and which ranks are gone. dist::TcpStoreLimits — what the server accepts from
//          a client.
//
// Note [The store faces the network]
// Anyone who reaches MASTER_ADDR:MASTER_PORT can talk to the store, so the server trusts nothing
// it reads: it listens on MASTER_ADDR only (loopback under `sgrun --standalone`), a client must
// first present the job's token (SG_STORE_TOKEN, which sgrun makes per job), keys, values and
// the bytes held are capped before anything is allocated, connections are counted and closed
// when their client hangs up, and no failure of one connection reaches the others. The client
// trusts the server no more: every call waits at most the store's timeout, so a rank 0 that
// froze (SIGSTOP, a hung machine) is an error on the other ranks, not a hang.
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dist/socket_io.h"

namespace sg::dist {

class TcpStoreServer;

struct TcpStoreLimits {
  size_t max_key_bytes = 4096;
  size_t max_value_bytes = size_t{64} << 20;
  size_t max_held_bytes = size_t{512} << 20;  // keys and values stored, and values being received
  int max_connections = 0;                    // 0: half this process's file descriptor limit
  // A connection that has not said HELLO (with the right token) by then is closed.
  std::chrono::milliseconds handshake_timeout{10000};
  // A GET waits at most this long in the server, whatever the client asked.
  std::chrono::milliseconds max_get_wait{std::chrono::hours(7 * 24)};
};

class TcpStore {
public:
  // With `host_server`, first starts the server on host:port (`host` must be an address of this
  // machine; the server listens there only). Then connects to host:port, retrying until
  // `timeout` (rank 0 may start last), and presents `token`, which must equal the server's.
  // Every call below waits at most `timeout` (plus, for a get, the time the server is asked to
  // wait) and then throws an sg::Error naming the key and the address; after such a failure
  // the connection is unusable and every later call throws.
  TcpStore(const std::string& host, int port, bool host_server, std::chrono::milliseconds timeout,
           const std::string& token = "", const TcpStoreLimits& limits = {});
  ~TcpStore();
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  void set(const std::string& key, const std::vector<char>& value);
  // set without waiting for the store's answer: the request goes out now, and the answer is read
  // (and a refusal thrown) at the next call on this connection. The server handles one
  // connection's requests in order, so anything this rank asks later sees the key set. For marks
  // written before every collective (Note [Marks that do not wait] in dist/tcp_store.cpp).
  void set_without_waiting(const std::string& key, const std::vector<char>& value);
  // Waits until `key` exists, then returns its value.
  std::vector<char> get(const std::string& key);
  void wait(const std::vector<std::string>& keys);  // until every key exists
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout);
  // Adds `delta` to the integer stored at `key` (0 when absent) and returns the new value; atomic
  // across clients, so it counts arrivals.
  int64_t add(const std::string& key, int64_t delta);
  // Whether every key exists now (no waiting).
  bool check(const std::vector<std::string>& keys);
  // Removes `key` and frees its bytes; false when there was no such key (PyTorch's delete_key).
  bool delete_key(const std::string& key);
  // Tells the server that this connection is rank `rank`: when it closes (this process ends,
  // however it ends), the server sets "departed/<rank>" (Note [Departure marks] in
  // dist/tcp_store_server.cpp).
  void register_rank(int rank);

  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  const std::string& address() const { return address_; }  // "host:port", for messages
  // This end of the connection to the store, as a numeric address ("10.0.0.2"): the address of the
  // interface that routes to MASTER_ADDR, so one the other ranks can reach (Note [The address Gloo
  // binds] in dist/process_group_gloo.cpp).
  std::string local_address() const;

private:
  void connect_and_greet(const std::string& host, int port, const std::string& token);
  // Sends one request and reads its reply under the connection's lock; `server_wait` is how long
  // the server may hold the reply back (a get's wait).
  std::vector<char> call(const std::vector<char>& request, const std::string& key,
                         std::chrono::milliseconds server_wait = std::chrono::milliseconds(0));
  // Under the lock: marks the connection unusable (a reply that came late would be read as the
  // answer to the next request) and throws an sg::Error that says what failed, `when` doing what
  // about `key`, after waiting `waited`.
  [[noreturn]] void fail(IoResult result, const char* when, const std::string& key, std::chrono::milliseconds waited);
  // Under the lock: reads the answer to the last set_without_waiting, if it is still unread.
  void collect_unanswered_set();
  // The request that sets `key` to `value`, once both are checked against the limits.
  std::vector<char> set_request(const std::string& key, const std::vector<char>& value) const;
  // Throws unless `status`, the answer to a set of `key`, says the store took it.
  void check_set_taken(uint8_t status, const std::string& key) const;
  // Under the lock: throws, naming `key`, once the connection is unusable.
  void check_usable(const std::string& key) const;

  std::unique_ptr<TcpStoreServer> server_;
  std::string address_;
  int socket_ = -1;
  std::mutex mutex_;
  std::string broken_;          // why the connection is unusable; empty while it works
  std::string unanswered_set_;  // the key of a set_without_waiting whose answer is unread, or empty
  std::chrono::milliseconds timeout_;
  TcpStoreLimits limits_;
};

}  // namespace sg::dist

#pragma once
// defines: the TCP store's wire format (commands, reply codes) and the reads both sides share.
//          Internal to dist/tcp_store.cpp (the client) and dist/tcp_store_server.cpp.
//
// Note [The store's wire format]
// A request is one byte of command, the key (u32 length + bytes), then:
//   HELLO the key is the job's token               reply: status (1 welcome, 0 wrong token)
//   RANK  nothing; the key is the client's rank    reply: status
//   SET   the value (u32 length + bytes)           reply: status (1 stored, 0 refused: store full)
//   GET   a timeout in ms (i64)                    reply: status, then the value if found
//   ADD   the delta (i64)                          reply: status (1 done, 0 the key holds no
//                                                         integer, 2 it would overflow, 3 store
//                                                         full), then the new value (i64)
//   CHECK nothing                                  reply: status (1 present, 0 absent)
//   DELETE nothing                                 reply: status (1 deleted, 0 there was no such key)
// HELLO must be a connection's first request, within the handshake timeout. Integers are in host
// byte order: the ranks of one job run the same binary on the same kind of machine. GET blocks
// in the server (on a condition variable) rather than polling, so rendezvous costs one round
// trip per key. A request the server cannot accept — an unknown command, a key or value over the
// limits (TcpStoreLimits), anything before HELLO — closes the connection without a reply: it is
// not one of our clients, or one that is broken.
#include <netdb.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dist/socket_io.h"

namespace sg::dist::store_protocol {

enum Command : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kCheck = 4, kRank = 5, kHello = 6, kDelete = 7 };
enum AddStatus : uint8_t { kAddNotInteger = 0, kAddDone = 1, kAddOverflow = 2, kAddStoreFull = 3 };

// The TCP addresses of host:port (MASTER_ADDR and MASTER_PORT), for the server to listen on and the
// clients to connect to; throws naming MASTER_ADDR when it cannot be resolved.
using AddressList = std::unique_ptr<addrinfo, void (*)(addrinfo*)>;
AddressList resolve(const std::string& host, int port);

// Reads a u32 length and that many bytes into `out`. A length over `max_size` fails before
// anything is allocated, and `out` grows only as the bytes arrive, so a peer that claims 4 GB
// and sends nothing costs nothing.
enum class ReadBytes { ok, closed, timed_out, too_long };
ReadBytes recv_bytes(int fd, std::vector<char>& out, size_t max_size, Deadline deadline);

// Appends a fixed-size integer, or a u32 length and the bytes.
template <typename T>
void append(std::vector<char>& out, const T& value) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}
void append_bytes(std::vector<char>& out, const char* data, size_t size);

}  // namespace sg::dist::store_protocol

#include "dist/store_protocol.h"

#include <algorithm>

#include "core/error.h"

namespace sg::dist::store_protocol {

AddressList resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* addresses = nullptr;
  const int resolved = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &addresses);
  SG_CHECK(resolved == 0, "TcpStore: cannot resolve MASTER_ADDR '", host, "': ", ::gai_strerror(resolved));
  return AddressList(addresses, ::freeaddrinfo);
}

void append_bytes(std::vector<char>& out, const char* data, size_t size) {
  append(out, static_cast<uint32_t>(size));
  out.insert(out.end(), data, data + size);
}

ReadBytes recv_bytes(int fd, std::vector<char>& out, size_t max_size, Deadline deadline) {
  const auto failed = [](IoResult result) {
    return result == IoResult::closed ? ReadBytes::closed : ReadBytes::timed_out;
  };
  uint32_t size = 0;
  if (const IoResult result = recv_all(fd, &size, sizeof size, deadline); result != IoResult::ok) return failed(result);
  if (size > max_size) return ReadBytes::too_long;
  constexpr size_t kChunk = size_t{1} << 20;
  out.clear();
  while (out.size() < size) {
    const size_t at = out.size();
    out.resize(at + std::min<size_t>(size - at, kChunk));
    if (const IoResult result = recv_all(fd, out.data() + at, out.size() - at, deadline); result != IoResult::ok)
      return failed(result);
  }
  return ReadBytes::ok;
}

}  // namespace sg::dist::store_protocol

#include "log/crc32c.h"

#include <crcutil/generic_crc.h>
#if defined(__x86_64__)
#include <crcutil/crc32c_sse4.h>
#endif

namespace sg::data {

// Note [CRC-32C from crcutil]
// TFRecord framing checksums every record with CRC-32C. Three ways were on the table: a
// hand-written table CRC (a second copy of what every CRC library holds), the SSE4.2 crc32
// instruction through _mm_crc32_u64 plus a cpuid check and a table fallback (all ours to get
// right and keep), or crcutil, Google's CRC library, which Debian packages (libcrcutil-dev) and
// which has both halves: Crc32cSSE4 runs the crc32 instruction on three interleaved streams (the
// instruction's latency is 3 cycles, its throughput one per cycle), and GenericCrc is a portable
// table-driven CRC for any polynomial. crcutil is used. Its SSE4.2 class executes crc32
// unconditionally and exists only on x86-64, so its own IsSSE42Available() (cpuid) picks the
// class once per process. This file is compiled with -mcrc32 (CMakeLists.txt) only because
// crcutil's header defines the intrinsics inline; no code here runs them unchecked.
namespace {

constexpr uint64_t kCastagnoliPolynomial = 0x82f63b78;  // reflected; crcutil's Crc32cSSE4 fixes the same one
constexpr uint32_t kMaskDelta = 0xa282ead8;             // TFRecord's mask constant

using PortableCrc = crcutil::GenericCrc<crcutil::uint64, crcutil::uint64, crcutil::uint64, 4>;

// "canonical": the register starts at ~0 and the result is inverted, as CRC-32C is defined.
const PortableCrc& portable_crc() {
  static const PortableCrc crc(kCastagnoliPolynomial, 32, /*canonical=*/true);
  return crc;
}

#if defined(__x86_64__)
// Null on a CPU without SSE4.2. cpuid is asked once: in a virtual machine it traps to the host.
const crcutil::Crc32cSSE4* instruction_crc() {
  static const bool available = crcutil::Crc32cSSE4::IsSSE42Available();
  if (!available) return nullptr;
  static const crcutil::Crc32cSSE4 crc(/*canonical=*/true);
  return &crc;
}
#endif

}  // namespace

uint32_t crc32c_portable(const void* data, size_t size) {
  return static_cast<uint32_t>(portable_crc().CrcDefault(data, size, 0));
}

bool crc32c_uses_crc32_instruction() {
#if defined(__x86_64__)
  return instruction_crc() != nullptr;
#else
  return false;
#endif
}

uint32_t crc32c(const void* data, size_t size) {
#if defined(__x86_64__)
  if (const crcutil::Crc32cSSE4* crc = instruction_crc()) return static_cast<uint32_t>(crc->CrcDefault(data, size, 0));
#endif
  return crc32c_portable(data, size);
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}

}  // namespace sg::data

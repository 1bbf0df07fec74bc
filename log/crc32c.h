#pragma once
// defines: crc32c, masked_crc32c — the CRC-32C (Castagnoli) checksum that frames TensorBoard's
//          event files (TFRecords), computed by crcutil (Debian's libcrcutil-dev).
#include <cstddef>
#include <cstdint>

namespace sg::data {

// CRC-32C of `size` bytes, as iSCSI (RFC 3720) and TFRecord define it:
// crc32c("123456789", 9) == 0xE3069283. Runs on the CPU's crc32 instruction when it has SSE4.2,
// on crcutil's table-driven CRC otherwise (Note [CRC-32C from crcutil] in crc32c.cpp).
uint32_t crc32c(const void* data, size_t size);
// The table-driven path crc32c() takes on a CPU without SSE4.2; public so that a test on a
// machine with SSE4.2 still checks the path other machines run.
uint32_t crc32c_portable(const void* data, size_t size);
// Whether crc32c() runs on the crc32 instruction on this machine.
bool crc32c_uses_crc32_instruction();

// The checksum as a TFRecord stores it: rotated right by 15 bits plus 0xa282ead8, because a
// CRC computed over data that itself holds CRCs (a record of records) is weak.
uint32_t masked_crc32c(const void* data, size_t size);

}  // namespace sg::data

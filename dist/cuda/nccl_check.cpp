#include "dist/cuda/nccl_check.h"

#include "core/error.h"

namespace sg::dist::detail {

void throw_nccl_error(ncclResult_t result, const char* call, const char* file, int line) {
  // ncclGetLastError(nullptr): the last error NCCL logged in this process, usually the cause
  // (a peer's address, a failed connection) that the result code alone does not tell.
  const char* last = ncclGetLastError(nullptr);
  SG_FAIL("NCCL error ", ncclGetErrorString(result), " in ", call, " at ", file, ":", line,
          last && *last ? ::sg::detail::concat(": ", last) : std::string());
}

}  // namespace sg::dist::detail

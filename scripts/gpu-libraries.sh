# Sourced by scripts/gpu-bundle.sh and scripts/gpu-check.sh: the shared libraries the GPU machines have, which the
# bundle leaves out and the check finds on the machine. Everything else the binaries load is carried.
#   is_c_runtime SONAME       glibc and the C++ runtime: every machine with a compiler (nvcc needs one) has them
#   is_cuda_library SONAME    the driver and CUDA's libraries: the toolkit's, or PyTorch's CUDA wheels'
is_c_runtime() {
  case "$1" in
    linux-vdso.so.*|ld-linux-x86-64.so.*|libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*) return 0 ;;
    libstdc++.so.*|libgcc_s.so.*) return 0 ;;
  esac
  return 1
}
is_cuda_library() {
  case "$1" in
    libcuda.so.*|libcudart.so.*|libcublas.so.*|libcublasLt.so.*|libcudnn*.so.*|libnccl.so.*|libnvrtc*.so.*) return 0 ;;
  esac
  return 1
}

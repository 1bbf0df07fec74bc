# SG_CUDA=AUTO turns the CUDA backend on when nvcc is found (check_language, never a hard
# project(LANGUAGES CUDA), which fails on machines without nvcc; check_language finds nvcc only
# through PATH, $CUDACXX or CMAKE_CUDA_COMPILER, hence the default path below). The backend's sources
# are the runtime in core/cuda_runtime/, the kernels in core/cuda/ (*.cu and *.cpp) and dist/'s NCCL
# process group; a CPU-only build compiles core/cuda_runtime/no_cuda.cpp instead, which answers "not
# available" (core/cuda_runtime/runtime.h).
set(SG_CUDA_ENABLED OFF)
if(NOT SG_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc AND NOT DEFINED ENV{CUDACXX})
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(SG_CUDA_ENABLED ON)
  elseif(SG_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SG_CUDA=ON but no CUDA compiler was found (set CUDACXX or put nvcc on PATH)")
  endif()
endif()

if(SG_CUDA_ENABLED)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "80;90")  # 'native' fails without a GPU; CUDA 13 rejects < 75
  endif()
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)  # else CMake links the static and the shared runtime
  enable_language(CUDA)
  # C++20 as the .cpp files: .cu files include core headers (defaulted operator==, ...). CMake
  # 3.25 knows no nvcc flag for C++20 (CUDA20 has no compile option there), so it is named here.
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
  # cuDNN and NCCL ship no CMake config file, so they are found by header and library name next
  # to the toolkit's.
  find_path(SG_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} REQUIRED)
  find_library(SG_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
  find_path(SG_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} REQUIRED)
  find_library(SG_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
  message(STATUS "syncgrad: CUDA backend on (${CMAKE_CUDA_COMPILER}, architectures ${CMAKE_CUDA_ARCHITECTURES}; "
                 "cuDNN ${SG_CUDNN_LIBRARY}, NCCL ${SG_NCCL_LIBRARY})")
else()
  message(STATUS "syncgrad: CUDA off (SG_CUDA=${SG_CUDA}); CPU-only build")
endif()

# Adds the backend to the library target: sources, the SG_WITH_CUDA switch (public, since
# core/device.h reads it), the CUDA libraries. Never CUDA::cuda_driver: a binary linked to
# libcuda refuses to start on machines without a driver.
function(sg_add_cuda_backend target)
  file(GLOB cuda_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/core/cuda_runtime/*.cpp
       ${PROJECT_SOURCE_DIR}/core/cuda/*.cu ${PROJECT_SOURCE_DIR}/core/cuda/*.cpp
       ${PROJECT_SOURCE_DIR}/dist/cuda/*.cpp ${PROJECT_SOURCE_DIR}/dist/cuda/*.cu)
  set(cpu_only ${PROJECT_SOURCE_DIR}/core/cuda_runtime/no_cuda.cpp)
  set(always ${PROJECT_SOURCE_DIR}/core/cuda_runtime/block_cache.cpp)
  list(REMOVE_ITEM cuda_sources ${cpu_only} ${always})
  target_sources(${target} PRIVATE ${always})
  if(NOT SG_CUDA_ENABLED)
    target_sources(${target} PRIVATE ${cpu_only})
    target_compile_definitions(${target} PUBLIC SG_WITH_CUDA=0)
    return()
  endif()
  target_sources(${target} PRIVATE ${cuda_sources})
  target_compile_definitions(${target} PUBLIC SG_WITH_CUDA=1)
  target_include_directories(${target} PRIVATE ${SG_CUDNN_INCLUDE_DIR} ${SG_NCCL_INCLUDE_DIR})
  # cuBLAS is not linked but opened on the first GPU matmul (Note [cuBLAS is opened on first use]
  # in core/cuda/cublas.cpp): its headers are enough here, plus where to find it at run time.
  target_link_libraries(${target} PUBLIC CUDA::cudart PRIVATE ${SG_CUDNN_LIBRARY} ${SG_NCCL_LIBRARY} ${CMAKE_DL_LIBS})
  set_property(SOURCE ${PROJECT_SOURCE_DIR}/core/cuda/cublas.cpp APPEND PROPERTY COMPILE_DEFINITIONS
               SG_CUBLAS_SONAME="libcublas.so.${CUDAToolkit_VERSION_MAJOR}" SG_CUBLAS_DIR="${CUDAToolkit_LIBRARY_DIR}")
  # nvcc: the host compiler gets the same warnings; device lambdas for the elementwise kernels.
  # The .cu files include no Eigen header, so they need not share the C++ files' -march.
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:--extended-lambda --expt-relaxed-constexpr -Xcompiler=-Wall,-Wextra>)
endfunction()

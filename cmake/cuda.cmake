# SG_CUDA=AUTO turns CUDA on when nvcc is found (BUILD-NOTES: check_language, never a hard
# project(LANGUAGES CUDA), which fails on machines without nvcc). core/cuda/ holds the CUDA
# sources; the CUDA backend arrives with its own issue, so for now this only finds the toolkit
# and reports what it would build for.
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
  message(STATUS "syncgrad: CUDA compiler ${CMAKE_CUDA_COMPILER} found (SG_CUDA=${SG_CUDA}); "
                 "CUDA kernels are not part of this version yet, the build is CPU-only")
else()
  message(STATUS "syncgrad: CUDA off (SG_CUDA=${SG_CUDA}); CPU-only build")
endif()

# Enables CUDA when nvcc is usable (COMMFUSE_CUDA=AUTO) or required (ON); sets
# COMMFUSE_HAVE_CUDA. Kernels are built for sm_90 (H100/H200) as machine code plus
# compute_90 PTX, which the driver compiles for newer GPUs; COMMFUSE_CUDA_ARCHITECTURES
# overrides (e.g. "80;90").
include(CheckLanguage)
find_program(COMMFUSE_NVCC_ON_PATH nvcc)
if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND NOT COMMFUSE_NVCC_ON_PATH
   AND EXISTS /usr/local/cuda/bin/nvcc)
  # The toolkit's default place, not on PATH in a plain shell. Through CUDACXX, so that
  # check_language still tries it and AUTO turns CUDA off if it does not work.
  set(ENV{CUDACXX} /usr/local/cuda/bin/nvcc)
endif()
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  set(COMMFUSE_CUDA_ARCHITECTURES "90" CACHE STRING "CUDA architectures to build for")
  set(CMAKE_CUDA_ARCHITECTURES ${COMMFUSE_CUDA_ARCHITECTURES})
  # C++17: CMake 3.25 does not know that nvcc 13 supports C++20; the .cu files need no more.
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  set(COMMFUSE_HAVE_CUDA ON)
  message(STATUS "commfuse: CUDA backend on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
elseif(COMMFUSE_CUDA STREQUAL "ON")
  message(FATAL_ERROR "COMMFUSE_CUDA=ON but no working CUDA compiler (nvcc) was found")
else()
  message(STATUS "commfuse: CUDA backend off (no nvcc found)")
endif()

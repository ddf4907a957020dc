# ---- CUDA backend (kernels/cuda/): included from the root CMakeLists.txt when CONVTUNE_HAVE_CUDA ----
# Builds the CUDA algorithms and the CUDA DeviceOps as their own shared library,
# libconvtune_cuda.so, which links libconvtune (the Algorithm base classes, conv::Error, the CPU
# error models it shares) plus the CUDA runtime, cuBLAS, cuFFT and cuDNN. libconvtune itself
# links none of them: it dlopen()s the plugin from its own directory at run time
# (src/device/device_ops.cpp), so one build serves machines with and without CUDA.

# Ampere and Hopper by default; -DCMAKE_CUDA_ARCHITECTURES=90 (scripts/gpu-check.sh) overrides.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
  set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures to compile for")
endif()
enable_language(CUDA)
# CUDA 12.9 and later ship no libnvToolsExt (NVTX 3 is header-only), and CMake 3.25's
# FindCUDAToolkit (Debian 12) then fails marking the missing CUDA::nvToolsExt target deprecated,
# which it does only for projects requiring CMake >= 3.25. We link no NVTX, so the module runs
# as for an older project; later CMake releases check that the target exists.
set(convtune_min_cmake ${CMAKE_MINIMUM_REQUIRED_VERSION})
set(CMAKE_MINIMUM_REQUIRED_VERSION 3.24)
find_package(CUDAToolkit REQUIRED)
set(CMAKE_MINIMUM_REQUIRED_VERSION ${convtune_min_cmake})

find_library(CONVTUNE_CUDNN_LIBRARY NAMES cudnn
             HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
             PATH_SUFFIXES lib lib64 REQUIRED)
find_path(CONVTUNE_CUDNN_INCLUDE_DIR NAMES cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} REQUIRED)
message(STATUS "convtune: cuDNN ${CONVTUNE_CUDNN_LIBRARY}, CUDA architectures "
               "${CMAKE_CUDA_ARCHITECTURES}")

add_library(convtune_cuda SHARED
  kernels/cuda/plugin.cpp
  kernels/cuda/runtime.cpp
  kernels/cuda/cudnn.cpp
  kernels/cuda/direct.cu
  kernels/cuda/im2col_gemm.cu
  kernels/cuda/implicit_gemm.cu
  kernels/cuda/winograd.cu
  kernels/cuda/fft.cu
)
# No SONAME version: libconvtune opens exactly "libconvtune_cuda.so" next to itself and checks
# the plugin's convtune version (kernels/cuda/plugin.cpp) before using it.
set_target_properties(convtune_cuda PROPERTIES
  OUTPUT_NAME convtune_cuda
  CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON
  CUDA_RUNTIME_LIBRARY Shared
  LIBRARY_OUTPUT_DIRECTORY $<TARGET_FILE_DIR:convtune>
  # Installed next to libconvtune: finds it (and the CUDA toolkit's libraries) by RPATH.
  INSTALL_RPATH "$ORIGIN"
  INSTALL_RPATH_USE_LINK_PATH ON)
target_include_directories(convtune_cuda
  PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/include ${CMAKE_CURRENT_SOURCE_DIR}/src/core
          ${CMAKE_CURRENT_SOURCE_DIR}/src/device ${CMAKE_CURRENT_SOURCE_DIR}/kernels)
target_include_directories(convtune_cuda SYSTEM PRIVATE ${CONVTUNE_CUDNN_INCLUDE_DIR})
target_compile_definitions(convtune_cuda PRIVATE CONVTUNE_HAVE_CUDA
                                                 CONVTUNE_VERSION="${PROJECT_VERSION}")
# nvcc does not take the library's -Wall -Wextra; the C++ sources do.
target_compile_options(convtune_cuda PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>)
target_link_libraries(convtune_cuda PRIVATE convtune CUDA::cudart CUDA::cublas CUDA::cufft
                                            ${CONVTUNE_CUDNN_LIBRARY})
# OPTIONAL: an install after `scripts/run.sh`, which builds only the library and the CLI, goes
# ahead without the plugin (the library then runs CPU-only) instead of failing.
install(TARGETS convtune_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} OPTIONAL)

# ---- CUDA backend (kernels/cuda/): included from the root CMakeLists.txt when CONVTUNE_HAVE_CUDA ----
# Adds the CUDA algorithms and the CUDA DeviceOps to the convtune library and links the CUDA
# runtime, cuBLAS and cuDNN. Included (not add_subdirectory) because enable_language(CUDA) must run
# in the directory that defines the convtune target.

# Ampere and Hopper by default; -DCMAKE_CUDA_ARCHITECTURES=90 (scripts/gpu-check.sh) overrides.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
  set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures to compile for")
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)

find_library(CONVTUNE_CUDNN_LIBRARY NAMES cudnn
             HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
             PATH_SUFFIXES lib lib64 REQUIRED)
find_path(CONVTUNE_CUDNN_INCLUDE_DIR NAMES cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} REQUIRED)
message(STATUS "convtune: cuDNN ${CONVTUNE_CUDNN_LIBRARY}, CUDA architectures "
               "${CMAKE_CUDA_ARCHITECTURES}")

# The CUDA sources get their own object library so that they have their own compile options
# (nvcc does not take the library's -Wall -Wextra) and end up inside libconvtune.
add_library(convtune_cuda OBJECT
  kernels/cuda/runtime.cpp
  kernels/cuda/cudnn.cpp
  kernels/cuda/direct.cu
  kernels/cuda/im2col_gemm.cu
)
set_target_properties(convtune_cuda PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON
                                               CUDA_RUNTIME_LIBRARY Shared)
target_include_directories(convtune_cuda
  PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/include ${CMAKE_CURRENT_SOURCE_DIR}/src
          ${CMAKE_CURRENT_SOURCE_DIR}/kernels)
target_include_directories(convtune_cuda SYSTEM PRIVATE ${CONVTUNE_CUDNN_INCLUDE_DIR})
target_compile_definitions(convtune_cuda PRIVATE CONVTUNE_HAVE_CUDA
                                                 CONVTUNE_VERSION="${PROJECT_VERSION}")
target_compile_options(convtune_cuda PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>)
target_link_libraries(convtune_cuda PRIVATE CUDA::cudart CUDA::cublas)

target_compile_definitions(convtune PRIVATE CONVTUNE_HAVE_CUDA)
# convtune was defined before CUDA was enabled, so it did not pick up these defaults.
set_target_properties(convtune PROPERTIES CUDA_RUNTIME_LIBRARY Shared
                                          CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}")
target_sources(convtune PRIVATE $<TARGET_OBJECTS:convtune_cuda>)
target_link_libraries(convtune PRIVATE CUDA::cudart CUDA::cublas ${CONVTUNE_CUDNN_LIBRARY})

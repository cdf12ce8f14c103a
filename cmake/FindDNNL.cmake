# Finds oneDNN from its header and library, without its CMake package config.
#
# Why: Debian's libdnnl-dev is built with the OpenCL GPU runtime, so its
# dnnl-config.cmake calls find_package(OpenCL REQUIRED) and configure stops on any
# machine without ocl-icd-opencl-dev (only a Recommends of libdnnl-dev). commfuse uses
# the CPU engine only and never includes dnnl_ocl.h, so it needs neither OpenCL's
# headers nor its loader library at build time (libdnnl itself links libOpenCL.so.1,
# which its own package depends on).
#
# Defines DNNL::dnnl (imported) and DNNL_FOUND, DNNL_VERSION, DNNL_INCLUDE_DIR,
# DNNL_LIBRARY. Honours DNNL_ROOT / CMAKE_PREFIX_PATH for a oneDNN outside /usr.
find_path(DNNL_INCLUDE_DIR NAMES oneapi/dnnl/dnnl.hpp HINTS ${DNNL_ROOT} ENV DNNL_ROOT
          PATH_SUFFIXES include)
find_library(DNNL_LIBRARY NAMES dnnl HINTS ${DNNL_ROOT} ENV DNNL_ROOT PATH_SUFFIXES lib lib64)

if(DNNL_INCLUDE_DIR)
  foreach(_part MAJOR MINOR PATCH)
    file(STRINGS "${DNNL_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h" _line
         REGEX "^#define DNNL_VERSION_${_part} ")
    string(REGEX REPLACE "^#define DNNL_VERSION_${_part} +([0-9]+).*" "\\1" _v_${_part} "${_line}")
  endforeach()
  set(DNNL_VERSION "${_v_MAJOR}.${_v_MINOR}.${_v_PATCH}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(DNNL REQUIRED_VARS DNNL_LIBRARY DNNL_INCLUDE_DIR
                                  VERSION_VAR DNNL_VERSION)
if(DNNL_FOUND AND NOT TARGET DNNL::dnnl)
  add_library(DNNL::dnnl UNKNOWN IMPORTED)
  set_target_properties(DNNL::dnnl PROPERTIES IMPORTED_LOCATION "${DNNL_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${DNNL_INCLUDE_DIR}")
endif()
mark_as_advanced(DNNL_INCLUDE_DIR DNNL_LIBRARY)

# Own code builds warning-free; third-party headers are included as SYSTEM.
function(commfuse_warnings target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:C,CXX>:-Wall -Wextra -Werror>
                         # nvcc: its own warnings and the host compiler's, all as errors.
                         $<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings -Xcompiler=-Wall,-Wextra>)
  if(COMMFUSE_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC's -Wmaybe-uninitialized misfires on sanitizer-instrumented code (e.g. inside
    # libstdc++'s <regex>); the release build keeps the warning.
    target_compile_options(${target} PRIVATE -Wno-maybe-uninitialized)
  endif()
endfunction()

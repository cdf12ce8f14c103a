# Own code builds warning-free; third-party headers are included as SYSTEM.
function(commfuse_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror)
endfunction()

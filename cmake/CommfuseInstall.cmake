include(CMakePackageConfigHelpers)

install(TARGETS commfuse EXPORT commfuseTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS commfuse_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/commfuse DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(COMMFUSE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/commfuse)
install(EXPORT commfuseTargets NAMESPACE commfuse:: DESTINATION ${COMMFUSE_CMAKE_DIR})
configure_package_config_file(cmake/commfuseConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/commfuseConfig.cmake INSTALL_DESTINATION ${COMMFUSE_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/commfuseConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/commfuseConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/commfuseConfigVersion.cmake
        DESTINATION ${COMMFUSE_CMAKE_DIR})

# The .pc file finds the prefix from its own directory, so it stays right when
# `cmake --install --prefix P` installs somewhere other than the configured prefix.
file(RELATIVE_PATH COMMFUSE_PC_TO_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" COMMFUSE_PC_TO_PREFIX "${COMMFUSE_PC_TO_PREFIX}")
configure_file(cmake/commfuse.pc.in ${CMAKE_CURRENT_BINARY_DIR}/commfuse.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/commfuse.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

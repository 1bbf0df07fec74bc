# `cmake --install` puts the library, the headers (under include/syncgrad/, keeping core/,
# autograd/, ...) and an exported config, so other projects can `find_package(syncgrad)` and
# link `syncgrad::syncgrad`.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS syncgrad EXPORT syncgradTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES syncgrad.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/syncgrad)
foreach(dir core autograd nn optim amp models data log dist launch train)
  install(DIRECTORY ${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/syncgrad/${dir}
          FILES_MATCHING PATTERN "*.h")
endforeach()
install(EXPORT syncgradTargets NAMESPACE syncgrad:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/syncgrad)
configure_package_config_file(cmake/syncgradConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/syncgradConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/syncgrad)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/syncgradConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/syncgradConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/syncgradConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/syncgrad)

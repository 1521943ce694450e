# Installation and packaging.
#
#   cmake --install build/release --prefix /opt/te
#     bin/taskengine, the public headers (include/taskengine,
#     include/taskengine_client), the static libraries with a CMake package
#     (find_package(taskengine) -> taskengine::engine, taskengine::client) and
#     pkg-config files (taskengine.pc, taskengine-client.pc), the systemd unit,
#     a default configuration under etc/taskengine and the docs.
#   scripts/package.sh
#     configures build/package with -DCMAKE_INSTALL_PREFIX=/usr
#     -DCMAKE_INSTALL_SYSCONFDIR=/etc and runs CPack:
#     taskengine_<version>_<arch>.deb with the same files, a service user and
#     the unit enabled on install (packaging/debian/).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(TE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/taskengine)

# The embedding library: the engine and what it links (storage backends,
# core). Exported as taskengine::<name>.
set(TE_EXPORTED te_core te_storage te_storage_open te_engine)
if(TARGET te_storage_postgres)
  list(APPEND TE_EXPORTED te_storage_postgres)
  set(TE_WITH_POSTGRES ON)
else()
  set(TE_WITH_POSTGRES OFF)
endif()
if(TARGET te_storage_mariadb)
  list(APPEND TE_EXPORTED te_storage_mariadb)
  set(TE_WITH_MARIADB ON)
else()
  set(TE_WITH_MARIADB OFF)
endif()
list(APPEND TE_EXPORTED te_transport)
if(TARGET te_transport_redis)
  # te_platform: its writes block SIGPIPE (platform/sigpipe.h).
  list(APPEND TE_EXPORTED te_transport_redis te_platform)
  set(TE_WITH_REDIS ON)
else()
  set(TE_WITH_REDIS OFF)
endif()
foreach(t ${TE_EXPORTED})
  string(REPLACE "te_" "" short ${t})
  set_target_properties(${t} PROPERTIES EXPORT_NAME ${short} OUTPUT_NAME taskengine_${short})
endforeach()
set_target_properties(taskengine_client PROPERTIES EXPORT_NAME client)

install(TARGETS taskengine RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT server)
install(TARGETS ${TE_EXPORTED} taskengine_client EXPORT taskengineTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/taskengine
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/clients/cpp/include/taskengine_client
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(EXPORT taskengineTargets NAMESPACE taskengine:: DESTINATION ${TE_CMAKE_DIR}
  COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/taskengineConfig.cmake.in
  ${PROJECT_BINARY_DIR}/taskengineConfig.cmake INSTALL_DESTINATION ${TE_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/taskengineConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/taskengineConfig.cmake
  ${PROJECT_BINARY_DIR}/taskengineConfigVersion.cmake
  DESTINATION ${TE_CMAKE_DIR} COMPONENT dev)

# pkg-config: static archives, so every library is in Libs. Relocatable: the
# prefix is found from where the .pc file is installed.
file(RELATIVE_PATH TE_PC_TO_PREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
set(TE_PC_LIBS "-ltaskengine_engine -ltaskengine_storage_open")
set(TE_PC_REQUIRES "sqlite3 libsodium spdlog")
if(TE_WITH_POSTGRES)
  string(APPEND TE_PC_LIBS " -ltaskengine_storage_postgres")
  string(APPEND TE_PC_REQUIRES " libpq")
endif()
if(TE_WITH_MARIADB)
  string(APPEND TE_PC_LIBS " -ltaskengine_storage_mariadb")
  string(APPEND TE_PC_REQUIRES " libmariadb")
endif()
if(TE_WITH_REDIS)
  string(REPLACE "-ltaskengine_engine" "-ltaskengine_engine -ltaskengine_transport_redis -ltaskengine_platform" TE_PC_LIBS
    "${TE_PC_LIBS}")
  string(APPEND TE_PC_REQUIRES " hiredis")
endif()
string(APPEND TE_PC_LIBS " -ltaskengine_transport -ltaskengine_storage -ltaskengine_core -ldate-tz -pthread")
configure_file(${PROJECT_SOURCE_DIR}/cmake/taskengine.pc.in ${PROJECT_BINARY_DIR}/taskengine.pc @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/taskengine-client.pc.in
  ${PROJECT_BINARY_DIR}/taskengine-client.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/taskengine.pc ${PROJECT_BINARY_DIR}/taskengine-client.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# The service: systemd unit, default configuration (kept on upgrade: a
# conffile of the .deb), docs.
install(FILES ${PROJECT_SOURCE_DIR}/packaging/taskengine.service
  DESTINATION lib/systemd/system COMPONENT server)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/taskengine.toml
  DESTINATION ${CMAKE_INSTALL_SYSCONFDIR}/taskengine COMPONENT server)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/openapi.json
  DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT server)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}
  COMPONENT server FILES_MATCHING PATTERN "*.md")

set(CPACK_PACKAGE_NAME taskengine)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "taskengine maintainers <taskengine@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "Durable background-job engine: REST API, scheduler, sweeper and worker pool")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${PROJECT_SOURCE_DIR}/packaging/debian/postinst
  ${PROJECT_SOURCE_DIR}/packaging/debian/prerm
  ${PROJECT_SOURCE_DIR}/packaging/debian/postrm
  ${PROJECT_SOURCE_DIR}/packaging/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)

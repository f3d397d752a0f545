# The CMake package (`cmake --install`): find_package(msa) gives msa::msa (the public API, the reference and
# the oracle, comparators included) and msa::tool (the `msa` executable). Headers keep their in-tree paths
# ("msa/msa.h", "oracle/compare.h", "reference/reference.h") under include/msa-oracle/.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(MSA_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/msa-oracle)
set(MSA_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/msa)
add_library(msa_package INTERFACE)
target_link_libraries(msa_package INTERFACE msa_oracle msa_registry msa_reference msa_core)
target_compile_features(msa_package INTERFACE cxx_std_20)
# The canonical primitives in reference/canonical.h are inline: a consumer compiling them must not contract.
target_compile_options(msa_package INTERFACE -ffp-contract=off)
set_target_properties(msa_package PROPERTIES EXPORT_NAME msa)
add_library(msa::msa ALIAS msa_package)
set_target_properties(msa PROPERTIES EXPORT_NAME tool)
install(TARGETS msa_package msa_oracle msa_registry msa_simd msa_reference msa_core msa EXPORT msaTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${MSA_INSTALL_INCLUDEDIR})
if(MSA_HAVE_CUDA)  # the CUDA backend (gpu/), linked into msa_registry; consumers find CUDAToolkit (msaConfig)
  install(TARGETS msa_gpu msa_gpu_plan EXPORT msaTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(FILES ${PROJECT_SOURCE_DIR}/gpu/gpu_backend.h DESTINATION ${MSA_INSTALL_INCLUDEDIR}/gpu)
endif()
install(EXPORT msaTargets NAMESPACE msa:: DESTINATION ${MSA_INSTALL_CMAKEDIR})
foreach(msa_dir include/msa oracle reference)
  file(GLOB msa_headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${msa_dir}/*.h)
  get_filename_component(msa_name ${msa_dir} NAME)
  install(FILES ${msa_headers} DESTINATION ${MSA_INSTALL_INCLUDEDIR}/${msa_name})
endforeach()
configure_package_config_file(cmake/msaConfig.cmake.in ${PROJECT_BINARY_DIR}/msaConfig.cmake
                              INSTALL_DESTINATION ${MSA_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/msaConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/msaConfig.cmake ${PROJECT_BINARY_DIR}/msaConfigVersion.cmake
        DESTINATION ${MSA_INSTALL_CMAKEDIR})

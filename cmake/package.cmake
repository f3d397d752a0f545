# The CMake package (`cmake --install`). find_package(msa) gives:
#   msa::io      safetensors, SHA-256, the file contract (Problem and Outputs as files) and atomic writes;
#   msa::oracle  the judge: problem generation, the case list, comparators, the selection contract, properties,
#                golden suites (links msa::io and the backend registry);
#   msa::msa     the public API (msa/msa.h) with the backend registry, the FP64 reference and the compiled backends;
#                it also links msa::oracle, so consumers written against it before the split keep building;
#   msa::tool    the `msa` executable.
# The tool's studies (recall, explain, cost, their PNG and gnuplot figures) are built into the executable only: no
# library of theirs is installed. Headers keep their in-tree paths ("msa/msa.h", "io/file_contract.h",
# "oracle/compare.h", "reference/reference.h") under include/msa-oracle/.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(MSA_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/msa-oracle)
set(MSA_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/msa)
add_library(msa_package INTERFACE)
target_link_libraries(msa_package INTERFACE msa_registry msa_reference msa_core msa_oracle)
set_target_properties(msa_package PROPERTIES EXPORT_NAME msa)
add_library(msa::msa ALIAS msa_package)
set_target_properties(msa_io PROPERTIES EXPORT_NAME io)
set_target_properties(msa_oracle PROPERTIES EXPORT_NAME oracle)
set_target_properties(msa PROPERTIES EXPORT_NAME tool)
foreach(msa_target msa_package msa_io msa_oracle)
  target_compile_features(${msa_target} INTERFACE cxx_std_20)
endforeach()
# The canonical primitives in reference/canonical.h are inline: a consumer compiling them must not contract.
foreach(msa_target msa_package msa_oracle)
  target_compile_options(${msa_target} INTERFACE $<INSTALL_INTERFACE:-ffp-contract=off>)
endforeach()
install(TARGETS msa_package msa_oracle msa_io msa_registry msa_reference msa_core msa EXPORT msaTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${MSA_INSTALL_INCLUDEDIR})
if(MSA_HAVE_SIMD)  # the SIMD backend (simd/), linked into msa_registry
  install(TARGETS msa_simd EXPORT msaTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
if(MSA_HAVE_CUDA)  # the CUDA backend (gpu/), linked into msa_registry; consumers find CUDAToolkit (msaConfig)
  install(TARGETS msa_gpu msa_gpu_plan EXPORT msaTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(FILES ${PROJECT_SOURCE_DIR}/gpu/gpu_backend.h DESTINATION ${MSA_INSTALL_INCLUDEDIR}/gpu)
endif()
install(EXPORT msaTargets NAMESPACE msa:: DESTINATION ${MSA_INSTALL_CMAKEDIR})
# The headers of the exported libraries only (tools/msa/ is not a library of the package).
foreach(msa_dir include/msa io oracle reference)
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

# Embeds the CUDA kernel sources (src/helios/kernels/*.cu, and the *.cuh headers they include)
# into flare_helios as strings, so the programs compile their kernels with NVRTC without a source
# tree. CUDA builds only.
if(FLARE_HAVE_CUDA)
  file(GLOB FLARE_KERNEL_FILES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/helios/kernels/*.cu
       ${PROJECT_SOURCE_DIR}/src/helios/kernels/*.cuh)
  set(FLARE_KERNELS_CPP ${PROJECT_BINARY_DIR}/generated/helios/embedded_kernels.cpp)
  string(REPLACE ";" "|" FLARE_KERNEL_FILES_ARG "${FLARE_KERNEL_FILES}")
  add_custom_command(OUTPUT ${FLARE_KERNELS_CPP}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/generated/helios
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${FLARE_KERNELS_CPP} -DSOURCES=${FLARE_KERNEL_FILES_ARG}
            -P ${PROJECT_SOURCE_DIR}/cmake/FlareEmbedKernels.cmake
    DEPENDS ${FLARE_KERNEL_FILES} ${PROJECT_SOURCE_DIR}/cmake/FlareEmbedKernels.cmake
    COMMENT "Embedding CUDA kernel sources" VERBATIM)
  target_sources(flare_helios PRIVATE ${FLARE_KERNELS_CPP})
endif()

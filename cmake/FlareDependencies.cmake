# Third-party dependencies, all from Debian packages (scripts/setup installs them) plus the
# CUDA toolkit headers. Libraries are linked statically where Debian ships an archive, so the
# binaries run unchanged on a GPU machine that lacks these packages. CUDA libraries (driver,
# NVML, NVRTC, cuBLASLt) are opened at run time, so the programs start without a GPU.
find_package(Threads REQUIRED)

function(flare_find_static_library var)
  find_library(${var} NAMES ${ARGN} REQUIRED)
endfunction()

set(CMAKE_FIND_LIBRARY_SUFFIXES_SAVED ${CMAKE_FIND_LIBRARY_SUFFIXES})
set(CMAKE_FIND_LIBRARY_SUFFIXES .a)
flare_find_static_library(FLARE_LIB_CRYPTO crypto)
flare_find_static_library(FLARE_LIB_ZSTD zstd)
flare_find_static_library(FLARE_LIB_PCRE2 pcre2-8)
flare_find_static_library(FLARE_LIB_UTF8PROC utf8proc)
flare_find_static_library(FLARE_LIB_PROTOBUF protobuf)
set(CMAKE_FIND_LIBRARY_SUFFIXES ${CMAKE_FIND_LIBRARY_SUFFIXES_SAVED})

find_path(FLARE_TOMLPP_INCLUDE toml++/toml.h REQUIRED)
find_path(FLARE_CLI11_INCLUDE CLI/CLI.hpp REQUIRED)
find_path(FLARE_FMT_INCLUDE fmt/format.h REQUIRED)
find_path(FLARE_JSON_INCLUDE nlohmann/json.hpp REQUIRED)
find_path(FLARE_BOOST_INCLUDE boost/beast.hpp REQUIRED)
find_path(FLARE_PCRE2_INCLUDE pcre2.h REQUIRED)
find_path(FLARE_UTF8PROC_INCLUDE utf8proc.h REQUIRED)
find_path(FLARE_ZSTD_INCLUDE zstd.h REQUIRED)
find_path(FLARE_CURL_INCLUDE curl/curl.h REQUIRED)  # libcurl4-openssl-dev; the library is opened at run time
find_program(FLARE_PROTOC protoc REQUIRED)

# fmt in header-only mode: Debian ships only the shared library, which a GPU host may lack.
add_library(flare_deps_common INTERFACE)
target_include_directories(flare_deps_common SYSTEM INTERFACE ${FLARE_CLI11_INCLUDE}
  ${FLARE_FMT_INCLUDE} ${FLARE_JSON_INCLUDE} ${FLARE_TOMLPP_INCLUDE})
target_compile_definitions(flare_deps_common INTERFACE FMT_HEADER_ONLY=1 TOML_EXCEPTIONS=1)
target_link_libraries(flare_deps_common INTERFACE ${FLARE_LIB_CRYPTO} Threads::Threads ${CMAKE_DL_LIBS})

# The signed package manifest (proto/*.proto), compiled by protoc into the build tree.
file(GLOB FLARE_PROTO_FILES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/proto/*.proto)
set(FLARE_PROTO_SOURCES "")
foreach(proto ${FLARE_PROTO_FILES})
  get_filename_component(stem ${proto} NAME_WE)
  set(out_cc ${PROJECT_BINARY_DIR}/generated/proto/${stem}.pb.cc)
  set(out_h ${PROJECT_BINARY_DIR}/generated/proto/${stem}.pb.h)
  add_custom_command(OUTPUT ${out_cc} ${out_h}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/generated/proto
    COMMAND ${FLARE_PROTOC} --proto_path=${PROJECT_SOURCE_DIR}/proto
            --cpp_out=${PROJECT_BINARY_DIR}/generated/proto ${proto}
    DEPENDS ${proto} VERBATIM)
  list(APPEND FLARE_PROTO_SOURCES ${out_cc})
endforeach()
if(FLARE_PROTO_SOURCES)
  add_library(flare_proto STATIC ${FLARE_PROTO_SOURCES})
  target_include_directories(flare_proto PUBLIC ${PROJECT_BINARY_DIR}/generated)
  target_link_libraries(flare_proto PUBLIC ${FLARE_LIB_PROTOBUF} Threads::Threads)
  target_compile_options(flare_proto PRIVATE -w)
else()
  add_library(flare_proto INTERFACE)
endif()

add_library(flare_deps_package INTERFACE)
target_include_directories(flare_deps_package SYSTEM INTERFACE ${FLARE_ZSTD_INCLUDE})
target_link_libraries(flare_deps_package INTERFACE flare_proto ${FLARE_LIB_ZSTD} ${FLARE_LIB_CRYPTO})

add_library(flare_deps_text INTERFACE)
target_include_directories(flare_deps_text SYSTEM INTERFACE ${FLARE_PCRE2_INCLUDE} ${FLARE_UTF8PROC_INCLUDE})
target_compile_definitions(flare_deps_text INTERFACE PCRE2_CODE_UNIT_WIDTH=8 PCRE2_STATIC=1 UTF8PROC_STATIC=1)
target_link_libraries(flare_deps_text INTERFACE ${FLARE_LIB_PCRE2} ${FLARE_LIB_UTF8PROC})

add_library(flare_deps_server INTERFACE)
target_include_directories(flare_deps_server SYSTEM INTERFACE ${FLARE_BOOST_INCLUDE})
target_compile_definitions(flare_deps_server INTERFACE BOOST_ASIO_NO_DEPRECATED=1)

# Hub downloads: libcurl's headers at build time; libcurl.so.4 is opened at run time (src/hub/curl_library.cpp),
# so the programs start on a machine without it.
add_library(flare_deps_hub INTERFACE)
target_include_directories(flare_deps_hub SYSTEM INTERFACE ${FLARE_CURL_INCLUDE})
target_link_libraries(flare_deps_hub INTERFACE ${FLARE_LIB_CRYPTO} ${CMAKE_DL_LIBS})

add_library(flare_deps_cli INTERFACE)
target_include_directories(flare_deps_cli SYSTEM INTERFACE ${FLARE_CLI11_INCLUDE})

# CUDA: headers only at build time (kernels compile through NVRTC at preparation time).
set(FLARE_CUDA_ROOT "/usr/local/cuda" CACHE PATH "CUDA toolkit root (headers for the CUDA backend)")
add_library(flare_deps_helios INTERFACE)
if(EXISTS ${FLARE_CUDA_ROOT}/include/cuda.h)
  set(FLARE_HAVE_CUDA ON)
  target_include_directories(flare_deps_helios SYSTEM INTERFACE ${FLARE_CUDA_ROOT}/include)
  target_compile_definitions(flare_deps_helios INTERFACE FLARE_HAVE_CUDA=1)
  message(STATUS "Flare: CUDA backend enabled (headers from ${FLARE_CUDA_ROOT})")
else()
  set(FLARE_HAVE_CUDA OFF)
  message(STATUS "Flare: no CUDA toolkit at ${FLARE_CUDA_ROOT}; building the CPU backend only")
endif()

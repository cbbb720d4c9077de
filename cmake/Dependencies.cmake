# Every dependency comes from a Debian 12 package installed by deploy/setup.sh.
find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(spdlog 1.10 REQUIRED CONFIG)
find_package(nlohmann_json 3.11 REQUIRED CONFIG)
find_package(yaml-cpp 0.7 REQUIRED CONFIG)
find_package(CLI11 2.1 REQUIRED CONFIG)
# Cap'n Proto's config needs pkg-config, OpenSSL and the C language (enabled by project()).
find_package(CapnProto 0.9 REQUIRED CONFIG)
find_package(OpenSSL REQUIRED)

# OpenBLAS, OpenMP build (libopenblas-openmp-dev): its threads follow omp_set_num_threads, like our kernels.
find_path(OPENBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas-openmp openblas REQUIRED)
find_library(OPENBLAS_LIBRARY NAMES openblas openblaso PATH_SUFFIXES openblas-openmp REQUIRED)
add_library(Ember::openblas UNKNOWN IMPORTED)
set_target_properties(Ember::openblas PROPERTIES
  IMPORTED_LOCATION "${OPENBLAS_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${OPENBLAS_INCLUDE_DIR}")

# yaml-cpp 0.7's config names its target differently across packagings.
if(TARGET yaml-cpp::yaml-cpp)
  set(EMBER_YAML_TARGET yaml-cpp::yaml-cpp)
else()
  set(EMBER_YAML_TARGET yaml-cpp)
endif()

# CAF 0.17.6 ships no CMake package and no pkg-config file (../shared/dependencies.md §2.1).
find_path(CAF_INCLUDE_DIR caf/all.hpp REQUIRED)
find_library(CAF_CORE_LIBRARY NAMES caf_core REQUIRED)
find_library(CAF_IO_LIBRARY NAMES caf_io REQUIRED)
add_library(CAF::core SHARED IMPORTED)
set_target_properties(CAF::core PROPERTIES IMPORTED_LOCATION "${CAF_CORE_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}" INTERFACE_LINK_LIBRARIES Threads::Threads)
add_library(CAF::io SHARED IMPORTED)
set_target_properties(CAF::io PROPERTIES IMPORTED_LOCATION "${CAF_IO_LIBRARY}" INTERFACE_LINK_LIBRARIES CAF::core)
# The control plane's TLS (security.tls_*): the same package's OpenSSL module.
find_library(CAF_OPENSSL_LIBRARY NAMES caf_openssl REQUIRED)
add_library(CAF::openssl SHARED IMPORTED)
set_target_properties(CAF::openssl PROPERTIES IMPORTED_LOCATION "${CAF_OPENSSL_LIBRARY}"
  INTERFACE_LINK_LIBRARIES "CAF::io;OpenSSL::SSL")

# cpp-httplib: Debian builds it as a library whose class layout depends on the feature macros its
# .pc file passes (OpenSSL, zlib, brotli), so it must come through pkg-config.
find_package(PkgConfig REQUIRED)
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
# BSD editline for `ember console` (line editing, history, completion): GNU readline is GPL.
pkg_check_modules(LIBEDIT REQUIRED IMPORTED_TARGET libedit)
# PCRE2 (BSD, libpcre2-dev) for the tokenizers' pre-tokenizer regexes (text/regex.hpp): the 8-bit
# library; UTF and UCP are chosen per pattern at compile time.
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
# utf8proc (MIT, libutf8proc-dev) for the tokenizers' Unicode normalizers (NFC: Qwen2's tokenizer.json).
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)

# gRPC and protobuf for the KServe v2 gRPC front end (libgrpc++-dev, protobuf-compiler-grpc,
# libprotobuf-dev, protobuf-compiler). gRPCConfig.cmake checks that every plugin binary exists, so
# configure fails without protobuf-compiler-grpc (../shared/dependencies.md §9.3).
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)

# The ONNX schema for `ember model import` (importer/): Debian's libonnx-dev ships onnx.proto beside
# its headers. Only the .proto is used: importer/CMakeLists.txt compiles it with protoc (above), so
# neither libonnx.so nor libonnx_proto.so is linked (../shared/dependencies.md, "ONNX").
find_path(EMBER_ONNX_PROTO_DIR onnx/onnx.proto DOC "The folder holding onnx/onnx.proto (libonnx-dev: /usr/include)"
          REQUIRED)

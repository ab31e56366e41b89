# Cross-building tachyon for aarch64 Linux on an x86-64 Debian host (docs/ARM64.md): Debian's
# gcc-aarch64-linux-gnu, the arm64 multiarch -dev packages under /usr/lib/aarch64-linux-gnu, and libevent's
# arm64 development files unpacked by scripts/arm64_deps.sh into TACHYON_ARM64_DEPS (libevent-dev is not
# multiarch: its arm64 package would replace the host's). Tests and `tachyon` run through qemu-aarch64
# (CMAKE_CROSSCOMPILING_EMULATOR, so ctest runs them under emulation too).
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
# The emulator loads the cross loader (-L: /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1, libc6-arm64-cross)
# and must load the libc of the same build beside it (-E LD_LIBRARY_PATH): by default that loader finds the
# arm64 multiarch libc (libc6:arm64, a different Debian revision, pulled in by the -dev packages) through
# /etc/ld.so.cache, and a loader and libc from different builds disagree on their private shared state: the
# first pthread_create then loops forever. The multiarch libraries (jansson, PCRE2, libevent) still come from
# /usr/lib/aarch64-linux-gnu.
set(CMAKE_CROSSCOMPILING_EMULATOR
    "qemu-aarch64;-L;/usr/aarch64-linux-gnu;-E;LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib")

if(NOT DEFINED TACHYON_ARM64_DEPS)
  set(TACHYON_ARM64_DEPS "${CMAKE_CURRENT_LIST_DIR}/../build-arm64-deps")
endif()
get_filename_component(TACHYON_ARM64_DEPS "${TACHYON_ARM64_DEPS}" ABSOLUTE)
# pkg-config sees the arm64 packages only (PKG_CONFIG_LIBDIR replaces the host's default search path).
set(ENV{PKG_CONFIG_LIBDIR}
    "${TACHYON_ARM64_DEPS}/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# Libraries and headers from the target's directories only; programs (pkg-config, the emulator) from the host.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu "${TACHYON_ARM64_DEPS}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)

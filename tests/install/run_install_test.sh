#!/usr/bin/env bash
# Install commfuse from a configured, built build directory into a temporary prefix and
# build two consumers against it, as a user would: a CMake project using
# find_package(commfuse) (C++ and C) and a C file compiled with pkg-config's flags. Each
# consumer runs and must load libcommfuse from the temporary prefix.
#
# usage: tests/install/run_install_test.sh <build-dir>
set -euo pipefail

if [[ $# -ne 1 || ! -f "$1/CMakeCache.txt" ]]; then
  echo "usage: $0 <configured-and-built-commfuse-build-dir>" >&2
  exit 2
fi
build_dir=$(cd "$1" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/commfuse-install-test.XXXXXX")
work=$(cd "$work" && pwd -P)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

fail() {
  echo "install test: FAIL: $*" >&2
  exit 1
}

# Run a command quietly; show its output only if it fails.
quiet() {
  local log=$work/step.log
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    fail "command failed: $*"
  fi
}

# The consumer must load the libcommfuse installed under $prefix, not some other copy.
check_loads_installed_lib() {
  local exe=$1 resolved
  resolved=$(ldd "$exe" | awk '/libcommfuse\.so/ {print $3}')
  [[ "$resolved" == "$prefix"/* ]] ||
    fail "$exe resolves libcommfuse to '${resolved:-nothing}', not to a file under $prefix"
}

echo "== cmake --install $build_dir --prefix $prefix"
quiet cmake --install "$build_dir" --prefix "$prefix"

# GNUInstallDirs picks lib, lib64 or lib/<multiarch>; find where the package files went.
pc_files=("$prefix"/lib*/pkgconfig/commfuse.pc "$prefix"/lib/*/pkgconfig/commfuse.pc)
pc_file=""
for f in "${pc_files[@]}"; do [[ -f "$f" ]] && pc_file=$f; done
[[ -n "$pc_file" ]] || fail "no commfuse.pc under $prefix/lib*/pkgconfig or $prefix/lib/*/pkgconfig"
libdir=$(dirname "$(dirname "$pc_file")")
echo "   libdir: ${libdir#"$prefix"/}"
for f in include/commfuse/commfuse.h include/commfuse/commfuse.hpp; do
  [[ -f "$prefix/$f" ]] || fail "$f not installed"
done
[[ -e "$libdir/libcommfuse.so" ]] || fail "libcommfuse.so not installed in $libdir"
[[ -f "$libdir/cmake/commfuse/commfuseConfig.cmake" ]] || fail "commfuseConfig.cmake not installed"
[[ -f "$libdir/cmake/commfuse/commfuseConfigVersion.cmake" ]] ||
  fail "commfuseConfigVersion.cmake not installed"

echo "== find_package(commfuse 0.1) consumer"
# CMAKE_PREFIX_PATH is searched before the system paths; the check below makes sure a
# copy of commfuse installed elsewhere on the machine did not make this pass.
quiet cmake -S "$here" -B "$work/consumer" \
  -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
  -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF
found_dir=$(sed -n 's/^commfuse_DIR:PATH=//p' "$work/consumer/CMakeCache.txt")
[[ "$found_dir" == "$prefix"/* ]] || fail "find_package found commfuse in '$found_dir', not under $prefix"
quiet cmake --build "$work/consumer" -j 2
for exe in consumer_cpp consumer_c; do
  check_loads_installed_lib "$work/consumer/$exe"
  "$work/consumer/$exe" || fail "$exe exited with status $?"
done

echo "== pkg-config consumer"
PKG_CONFIG_PATH=$(dirname "$pc_file")
export PKG_CONFIG_PATH
pc_prefix=$(pkg-config --variable=prefix commfuse)
pc_prefix=$(cd "$pc_prefix" 2>/dev/null && pwd -P || echo "$pc_prefix")
[[ "$pc_prefix" == "$prefix" ]] ||
  fail "commfuse.pc installed under $prefix says prefix=$(pkg-config --variable=prefix commfuse); the .pc file is not relocated by cmake --install --prefix"
pc_libdir=$(pkg-config --variable=libdir commfuse)
cflags=$(pkg-config --cflags commfuse)
libs=$(pkg-config --libs commfuse)
echo "   cflags: $cflags"
echo "   libs:   $libs"
# shellcheck disable=SC2086  # the flags are word lists
quiet "${CC:-cc}" -std=c11 -Wall -Wextra -Wpedantic -Werror "$here/main.c" $cflags $libs \
  -Wl,-rpath,"$pc_libdir" -o "$work/consumer_c_pkgconfig"
check_loads_installed_lib "$work/consumer_c_pkgconfig"
"$work/consumer_c_pkgconfig" || fail "consumer_c_pkgconfig exited with status $?"

echo "install test: PASS"

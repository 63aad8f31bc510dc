#!/usr/bin/env bash
# scripts/setup.sh's offline set-up. Without the network: bad usage exits
# 2, a folder that is missing or holds no packages exits 1 with one line.
# With ARCHIVE=1 (ctest cli_setup_archive, labels network and slow: it
# needs Debian's package archive): --download gathers three of the build's
# libraries and their dependencies into a folder, --from --prefix unpacks
# them without root, and CMake, pointed at the prefix by its env.sh, finds
# them there, builds test_writer against them, and the test runs on the
# prefix's liblmdb.
source "$IMS_TESTLIB"
setup="$IMS_SRC/scripts/setup.sh"

# usage and missing input
expect 2 bash "$setup" --bogus
contains "$T/err" "setup: unknown option '--bogus'"
expect 2 bash "$setup" --download
contains "$T/err" "--download needs a folder"
expect 2 bash "$setup" --from "$T/none" extra
contains "$T/err" "unexpected arguments after --from"
expect 1 bash "$setup" --from "$T/none"
same "$(cat "$T/err")" "setup: cannot install from '$T/none': no such folder"
mkdir "$T/empty"
expect 1 bash "$setup" --from "$T/empty" --prefix "$T/p0"
contains "$T/err" "it holds no .deb files"
absent "$T/p0"

if [ "${ARCHIVE:-0}" = 1 ]; then
  expect 0 bash "$setup" --download "$T/debs" liblmdb-dev libcjson-dev libpng-dev
  contains "$T/err" "on the machine without the archive: scripts/setup.sh --from"
  # the named packages and their libraries; the base system left out
  for p in liblmdb-dev liblmdb0 libcjson-dev libcjson1 libpng-dev libpng16-16 zlib1g-dev; do
    grep -qx "$p" "$T/debs/packages.txt" || fail "packages.txt lacks $p"
    compgen -G "$T/debs/${p}_*.deb" >/dev/null || fail "no .deb of $p"
    checks=$((checks + 2))
  done
  for p in libc6 zlib1g libgcc-s1; do
    ! grep -qx "$p" "$T/debs/packages.txt" || fail "packages.txt holds the base system's $p"
    checks=$((checks + 1))
  done
  same "$(ls "$T/debs"/*.deb | wc -l)" "$(wc -l <"$T/debs/packages.txt")" "one .deb per listed package"
  # unpacked without root into a prefix
  expect 0 bash "$setup" --from "$T/debs" --prefix "$T/pfx"
  exists "$T/pfx/env.sh"
  exists "$T/pfx/usr/include/lmdb.h"
  contains "$T/pfx/usr/lib/x86_64-linux-gnu/pkgconfig/lmdb.pc" "prefix=$T/pfx/usr"
  # CMake finds the libraries in the prefix and builds against them
  (
    source "$T/pfx/env.sh"
    cmake -S "$IMS_SRC" -B "$T/b" -DIMSHARD_WITH_CUDA=OFF -DIMSHARD_WITH_MPI=OFF \
      -DIMSHARD_WERROR=ON >"$T/cfg.log" 2>&1 &&
      cmake --build "$T/b" --target test_writer -j2 >"$T/build.log" 2>&1
  ) || fail "cannot build against the prefix: $(tail -5 "$T/cfg.log" "$T/build.log" 2>/dev/null)"
  checks=$((checks + 1))
  for v in LMDB_LIBDIR CJSON_LIBDIR PNG_LIBDIR; do
    same "$(sed -n "s/^$v:INTERNAL=//p" "$T/b/CMakeCache.txt")" "$T/pfx/usr/lib/x86_64-linux-gnu" "($v)"
  done
  run env LD_LIBRARY_PATH="$T/pfx/usr/lib/x86_64-linux-gnu" ldd "$T/b/tests/recordio/test_writer"
  contains "$T/out" "liblmdb.so.0 => $T/pfx/usr/lib/x86_64-linux-gnu/liblmdb.so.0"
  expect 0 env LD_LIBRARY_PATH="$T/pfx/usr/lib/x86_64-linux-gnu" "$T/b/tests/recordio/test_writer"
fi
finish

#!/usr/bin/env bash
# scripts/setup.sh's offline set-up. Without the network: bad usage exits
# 2, a folder that is missing or holds no packages exits 1 with one line.
# With ARCHIVE=1 (ctest cli_setup_archive, labels network and slow: it
# needs Debian's package archive): --download gathers three of the build's
# libraries and their dependencies into a folder, --from --prefix unpacks
# them without root, and CMake, pointed at the prefix by its env.sh, finds
# them there, builds test_writer against them, and the test runs on the
# prefix's liblmdb.
source "${IMS_TESTLIB:-$(dirname "$0")/lib.sh}" || exit 1
setup="$IMS_SRC/scripts/setup.sh"

# usage and missing input
expect 2 bash "$setup" --bogus
contains "$T/err" "setup: unknown option '--bogus'"
contains "$T/err" "(see --help)"
# --help explains every option
expect 0 bash "$setup" --help
for o in "--download DIR" "--gpu-node" "PACKAGE" "--from DIR" "--prefix P" "-h | --help"; do
  contains "$T/out" "$o"
done
expect 0 bash "$setup" -h
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
expect 2 bash "$setup" --download "$T/g" --gpu-node liblmdb-dev
contains "$T/err" "--gpu-node takes no packages: it names its own"
absent "$T/g"
# --download into a file, or of a package the archive does not have:
# one line, nothing made
touch "$T/afile"
expect 1 bash "$setup" --download "$T/afile" liblmdb-dev
same "$(cat "$T/err")" "setup: cannot download into '$T/afile': it is not a folder" "(--download into a file)"
expect 1 bash "$setup" --download "$T/nd" no-such-package-imshard
same "$(cat "$T/err")" "setup: cannot resolve the packages' dependencies: E: Unable to locate package no-such-package-imshard" "(an unknown package)"
absent "$T/nd"
# an empty or missing --prefix is refused: taken for none, it would
# install into the system as root
expect 2 bash "$setup" --from "$T/empty" --prefix ""
same "$(head -n1 "$T/err")" "setup: --prefix needs a folder" "(an empty --prefix)"
expect 2 bash "$setup" --from "$T/empty" --prefix
same "$(head -n1 "$T/err")" "setup: --prefix needs a folder" "(--prefix without its folder)"
# a folder that is not given: the next option is not taken for it
expect 2 bash "$setup" --download --gpu-node
same "$(head -n1 "$T/err")" "setup: --download needs a folder" "(--download without its folder)"
# options where they do not belong
expect 2 bash "$setup" --prefix "$T/p0"
contains "$T/err" "setup: --prefix goes with --from DIR"
expect 2 bash "$setup" --from "$T/empty" --gpu-node
contains "$T/err" "setup: --gpu-node goes with --download DIR"
expect 2 bash "$setup" --from "$T/empty" --download "$T/g"
contains "$T/err" "setup: --download and --from do not go together"
absent "$T/g"

# the other scripts: --help prints their use and runs nothing, and what
# they do not take exits 2 with one line (run from a copy whose setup.sh
# and cmake only leave a mark)
mkdir -p "$T/repo/scripts" "$T/repo/bin"
cp "$IMS_SRC"/scripts/build.sh "$IMS_SRC"/scripts/test.sh "$IMS_SRC"/scripts/demo.sh "$T/repo/scripts/"
printf '#!/bin/sh\ntouch "%s/ran"\nexit 1\n' "$T/repo" | tee "$T/repo/scripts/setup.sh" >"$T/repo/bin/cmake"
chmod +x "$T/repo/bin/cmake"
script() { local s=$1; shift; env PATH="$T/repo/bin:$PATH" bash "$T/repo/scripts/$s" "$@"; }
expect 0 script build.sh --help
contains "$T/out" "scripts/build.sh [BUILD_DIR] [CMAKE_OPTION...]"
expect 2 script build.sh -DIMSHARD_WITH_CUDA=ON
same "$(cat "$T/err")" "build.sh: the first argument is the build folder, not '-DIMSHARD_WITH_CUDA=ON' (scripts/build.sh build -DIMSHARD_WITH_CUDA=ON; see --help)" "(build.sh without its folder)"
expect 0 script test.sh --help
contains "$T/out" "scripts/test.sh [-h | --help]"
expect 2 script test.sh --quick
same "$(cat "$T/err")" "test.sh: unknown argument '--quick' (it takes none; see --help)" "(test.sh with an argument)"
expect 0 script demo.sh --help
contains "$T/out" "scripts/demo.sh [OUT]"
expect 2 script demo.sh --out "$T/d"
same "$(cat "$T/err")" "demo.sh: unknown option '--out' (see --help)" "(demo.sh with an option)"
expect 2 script demo.sh "$T/d" extra
same "$(cat "$T/err")" "demo.sh: unexpected argument 'extra': it takes one folder (see --help)" "(demo.sh with two folders)"
absent "$T/d"
absent "$T/repo/ran"
same "$(ls "$T/repo")" "$(printf 'bin\nscripts')" "(nothing written)"
# a build folder as a shell completes it, with a trailing slash: its
# configure log beside it (where gpu-check looks), as without
expect 1 script build.sh "$T/repo/b/"
exists "$T/repo/b.configure.log"

# a folder downloaded into twice: --from takes the files packages.txt
# names, one each, and says how many others it left out (packages made
# here with dpkg-deb, one file each)
mkpkg() { # NAME VERSION [FOLDER (default $T/twice) [ARCHITECTURE (default all)]]
  local d="$T/src-$1-$2" to=${3:-$T/twice} arch=${4:-all}
  mkdir -p "$d/DEBIAN" "$d/usr/share/$1" "$d/usr/lib/pkgconfig" "$to"
  printf 'Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: t <t@t>\nDescription: t\n' "$1" "$2" "$arch" >"$d/DEBIAN/control"
  echo "$2" >"$d/usr/share/$1/version"
  printf 'prefix=/usr\nlibdir=${prefix}/lib\nName: %s\nDescription: t\nVersion: %s\nCflags: -I/usr/include/%s\nLibs: -L${libdir} -l%s\n' "$1" "$2" "$1" "$1" >"$d/usr/lib/pkgconfig/$1.pc"
  dpkg-deb -b "$d" "$to/${1}_${2}_$arch.deb" >/dev/null
}
mkdir -p "$T/twice"
mkpkg pkg-a 1.0
mkpkg gcc-fake 1.0
echo pkg-a >"$T/twice/packages.txt"
expect 0 bash "$setup" --from "$T/twice" --prefix "$T/p1"
contains "$T/err" "setup: 1 .deb files in '$T/twice' are not in its packages.txt: left out"
contains "$T/err" "unpacked 1 packages into '$T/p1'"
same "$(cat "$T/p1/usr/share/pkg-a/version")" 1.0 "(the listed package)"
absent "$T/p1/usr/share/gcc-fake"
# its pkg-config file points at the prefix
contains "$T/p1/usr/lib/pkgconfig/pkg-a.pc" "prefix=$T/p1/usr"
contains "$T/p1/usr/lib/pkgconfig/pkg-a.pc" "Cflags: -I$T/p1/usr/include/pkg-a"
# and only the packages' own: another's in a prefix shared with other
# software (--prefix ~/.local, say) is left as it is
mkdir -p "$T/shared/lib/pkgconfig" "$T/shared/usr/lib/pkgconfig"
printf 'prefix=/usr\nCflags: -I/usr/include/other\n' | tee "$T/shared/lib/pkgconfig/other.pc" >"$T/shared/usr/lib/pkgconfig/other.pc"
expect 0 bash "$setup" --from "$T/twice" --prefix "$T/shared"
contains "$T/shared/usr/lib/pkgconfig/pkg-a.pc" "prefix=$T/shared/usr"
for pc in "$T/shared/lib/pkgconfig/other.pc" "$T/shared/usr/lib/pkgconfig/other.pc"; do
  same "$(cat "$pc" | tr '\n' ' ')" "prefix=/usr Cflags: -I/usr/include/other " "(another's .pc in the prefix)"
done
# options in any order
expect 0 bash "$setup" --prefix "$T/p1b" --from "$T/twice"
same "$(cat "$T/p1b/usr/share/pkg-a/version")" 1.0 "(--prefix before --from)"
# two versions of a listed package: which one is meant is not guessed
mkpkg pkg-a 2.0
expect 1 bash "$setup" --from "$T/twice" --prefix "$T/p2"
same "$(cat "$T/err")" "setup: cannot install from '$T/twice': 2 files of pkg-a (pkg-a_1.0_all.deb pkg-a_2.0_all.deb); remove all but one" "(two versions)"
absent "$T/p2"
rm "$T/twice"/pkg-a_*.deb
expect 1 bash "$setup" --from "$T/twice" --prefix "$T/p3"
same "$(cat "$T/err")" "setup: cannot install from '$T/twice': packages.txt names pkg-a, and there is no pkg-a_*.deb" "(a listed package missing)"
absent "$T/p3"

# packages.txt as an editor may leave it: CRLF line ends, blank lines and
# spaces, a name twice, no newline after the last name: each package once
for p in pkg-a pkg-b pkg-c; do mkpkg $p 1.0 "$T/edited"; done
printf 'pkg-a\r\n\r\n  pkg-b \r\npkg-a\npkg-c' >"$T/edited/packages.txt"
expect 0 bash "$setup" --from "$T/edited" --prefix "$T/pe"
same "$(cat "$T/err")" "setup: unpacked 3 packages into '$T/pe'; build with: source '$T/pe/env.sh' && scripts/build.sh build" "(an edited packages.txt)"
same "$(cat "$T"/pe/usr/share/pkg-*/version | tr '\n' ' ')" "1.0 1.0 1.0 " "(every package it names)"

# as root without --prefix: apt-get installs the folder's files, with no
# package source to reach (here apt-get only prints the dpkg calls it
# would make: Debug::pkgDPkgPM, nothing installed)
if [ "$(id -u)" = 0 ] && ! dpkg -s pkg-a >/dev/null 2>&1; then
  mkdir -p "$T/bin"
  printf '#!/bin/sh\nexec /usr/bin/apt-get -o Debug::pkgDPkgPM=true "$@"\n' >"$T/bin/apt-get"
  chmod +x "$T/bin/apt-get"
  expect 0 env PATH="$T/bin:$PATH" bash "$setup" --from "$T/edited"
  same "$(cat "$T/err")" "setup: installing 3 packages from '$T/edited'" "(as root, into the system)"
  run dpkg -s pkg-a
  same "$rc" 1 "(nothing installed by the check)"
else
  echo "cli_setup: not root: --from without --prefix (apt-get install) not checked"
fi

# a prefix whose path pkg-config or env.sh would garble (pkg-config splits
# a path at a space and mangles & # ' and the like; env.sh would expand $;
# a colon splits PATH) is refused before anything is written; DIR itself
# may hold them, its default prefix not
for odd in "a space" "amp&" "hash#" 'dollar$HOME' 'quote"' "colon:x" "accent-é"; do
  expect 1 bash "$setup" --from "$T/edited" --prefix "$T/$odd"
  same "$(sed 's/ (pkg-config .*//' "$T/err")" "setup: cannot unpack into '$T/$odd': its path holds '$(printf '%s' "$odd" | LC_ALL=C tr -d 'A-Za-z0-9/()+,.=@^_~-')'" "(a prefix with '$odd')"
  absent "$T/$odd"
done
# a prefix that cannot be made (a file on its path): one line
expect 1 bash "$setup" --from "$T/edited" --prefix "$T/afile/p"
same "$(cat "$T/err")" "setup: cannot create '$T/afile/p': Not a directory" "(a prefix under a file)"
cp -r "$T/edited" "$T/my debs"
expect 1 bash "$setup" --from "$T/my debs" --prefix "$T/my debs/prefix"
contains "$T/err" "setup: cannot unpack into '$T/my debs/prefix': its path holds ' '"
contains "$T/err" "name another with --prefix"
absent "$T/my debs/prefix"
expect 0 bash "$setup" --from "$T/my debs" --prefix "$T/p-(1)_x+y"
contains "$T/p-(1)_x+y/env.sh" "export PATH=\"$T/p-(1)_x+y/usr/bin:\$PATH\""

# a damaged or foreign file stops --from before anything is unpacked: a
# copy cut short (its contents end early), a text file named .deb, another
# architecture's package; a prefix an earlier --from made stays as it was
host=$(dpkg --print-architecture)
other=$([ "$host" = arm64 ] && echo amd64 || echo arm64)
for bad in short text foreign; do
  rm -rf "$T/bad"
  cp -r "$T/edited" "$T/bad"
  case $bad in
  short) head -c -40 "$T/edited/pkg-b_1.0_all.deb" >"$T/bad/pkg-b_1.0_all.deb" ;;
  text) echo "not a package" >"$T/bad/pkg-b_1.0_all.deb" ;;
  foreign) rm "$T/bad/pkg-b_1.0_all.deb" && mkpkg pkg-b 1.0 "$T/bad" "$other" ;;
  esac
  expect 1 bash "$setup" --from "$T/bad" --prefix "$T/pe"
  case $bad in
  foreign) same "$(cat "$T/err")" "setup: cannot install from '$T/bad': 'pkg-b_1.0_$other.deb' is a package for $other, and this machine is $host (download the packages where dpkg --print-architecture says $host)" "(another architecture's package)" ;;
  *) same "$(sed 's/ dpkg-deb says: .*//' "$T/err")" "setup: cannot install from '$T/bad': 'pkg-b_1.0_all.deb' is cut short or not a Debian package (copy it again;" "($bad)" ;;
  esac
  same "$(wc -l <"$T/err")" 1 "($bad: one line)"
  same "$(cat "$T/pe/usr/share/pkg-b/version")" 1.0 "($bad: the earlier prefix untouched)"
  exists "$T/pe/env.sh"
done

# the multiarch folder env.sh names is where the packages put their
# libraries, also without dpkg-architecture (dpkg-dev, which a GPU
# machine seldom has): not guessed as x86_64's (here an arm64 machine's
# packages, made as architecture all)
d="$T/src-arm"
mkdir -p "$d/DEBIAN" "$d/usr/lib/aarch64-linux-gnu/pkgconfig" "$T/arm" "$T/nodev"
printf 'Package: libarm\nVersion: 1\nArchitecture: all\nMaintainer: t <t@t>\nDescription: t\n' >"$d/DEBIAN/control"
printf 'prefix=/usr\nName: arm\nDescription: t\nVersion: 1\n' >"$d/usr/lib/aarch64-linux-gnu/pkgconfig/arm.pc"
dpkg-deb -b "$d" "$T/arm/libarm_1_all.deb" >/dev/null
printf '#!/bin/sh\necho "dpkg-architecture: not found" >&2\nexit 127\n' >"$T/nodev/dpkg-architecture"
chmod +x "$T/nodev/dpkg-architecture"
expect 0 env PATH="$T/nodev:$PATH" bash "$setup" --from "$T/arm" --prefix "$T/parm"
contains "$T/parm/env.sh" "export PKG_CONFIG_PATH=\"$T/parm/usr/lib/aarch64-linux-gnu/pkgconfig:"
contains "$T/parm/env.sh" "export LD_LIBRARY_PATH=\"$T/parm/usr/lib/aarch64-linux-gnu:"

# jpeglib.h takes the library's version from jconfig.h: headers whose
# jconfig.h is another libjpeg's than the library found (the prefix's
# jpeglib.h beside a GPU machine's own jconfig.h, say) stop the configure
# with one line, where the build used to fail every decode at run time
mkdir -p "$T/fakejpeg/include"
cp /usr/include/jpeglib.h /usr/include/jmorecfg.h /usr/include/jerror.h "$T/fakejpeg/include/"
sed -E 's/^(#define[ \t]+JPEG_LIB_VERSION[ \t]+)[0-9]+/\180/' /usr/include/x86_64-linux-gnu/jconfig.h >"$T/fakejpeg/include/jconfig.h"
expect 1 cmake -S "$IMS_SRC" -B "$T/bj" -DIMSHARD_WITH_CUDA=OFF -DIMSHARD_WITH_MPI=OFF -DCMAKE_PREFIX_PATH="$T/fakejpeg"
# (CMake folds its messages: compared unfolded)
same "$(tr -s ' \n' '  ' <"$T/err" | grep -c 'jconfig.h is for libjpeg version 80 (libjpeg.so.8) but the library found is .*libjpeg.so.62')" 1 "(configure against another libjpeg's jconfig.h)"

if [ "${ARCHIVE:-0}" = 1 ]; then
  expect 0 bash "$setup" --download "$T/debs" liblmdb-dev libcjson-dev libpng-dev libjpeg62-turbo-dev
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
  # jpeglib.h and the jconfig.h it reads (Debian's multiarch folder) both
  # from the prefix
  same "$(sed -n 's/^JPEG_INCLUDE:PATH=//p' "$T/b/CMakeCache.txt")" "$T/pfx/usr/include" "(jpeglib.h's folder)"
  same "$(sed -n 's/^JPEG_CONFIG_INCLUDE:PATH=//p' "$T/b/CMakeCache.txt")" "$T/pfx/usr/include/x86_64-linux-gnu" "(jconfig.h's folder)"
  run env LD_LIBRARY_PATH="$T/pfx/usr/lib/x86_64-linux-gnu" ldd "$T/b/tests/recordio/test_writer"
  contains "$T/out" "liblmdb.so.0 => $T/pfx/usr/lib/x86_64-linux-gnu/liblmdb.so.0"
  expect 0 env LD_LIBRARY_PATH="$T/pfx/usr/lib/x86_64-linux-gnu" "$T/b/tests/recordio/test_writer"
  # --gpu-node: the build's libraries, pkg-config and Open MPI with their
  # Fortran run-time, without the compiler toolchain a GPU machine has
  expect 0 bash "$setup" --download "$T/gn" --gpu-node
  for p in libturbojpeg0-dev liblmdb-dev libopenblas-dev libopenmpi-dev openmpi-bin pkg-config libgfortran5; do
    grep -qx "$p" "$T/gn/packages.txt" || fail "--gpu-node's packages.txt lacks $p"
    checks=$((checks + 1))
  done
  for p in gcc-12 cpp-12 gfortran-12 libc6-dev linux-libc-dev binutils libgcc-12-dev; do
    ! grep -qx "$p" "$T/gn/packages.txt" || fail "--gpu-node's packages.txt holds the toolchain's $p"
    checks=$((checks + 1))
  done
  # unpacked: Open MPI told where it is, its alternatives made as links
  expect 0 bash "$setup" --from "$T/gn" --prefix "$T/gnp"
  contains "$T/gnp/env.sh" "export OPAL_PREFIX=\"$T/gnp/usr\""
  contains "$T/gnp/env.sh" "export PMIX_MCA_mca_base_component_path=\"$T/gnp/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix\""
  same "$(readlink "$T/gnp/usr/bin/mpirun")" mpirun.openmpi "(mpirun's link)"
  same "$(readlink "$T/gnp/usr/bin/mpicc")" mpicc.openmpi "(mpicc's link)"
  # mpicc names the prefix's headers and libraries
  run bash -c "source '$T/gnp/env.sh' && mpicc --showme"
  contains "$T/out" "-I$T/gnp/usr/lib/x86_64-linux-gnu/openmpi/include"
fi
finish

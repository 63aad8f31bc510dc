#!/usr/bin/env bash
# Installs every build and test dependency of imshard from Debian packages,
# or moves them to a machine that reaches no package archive.
#
#   scripts/setup.sh
#       installs what is missing (apt-get; root, or through sudo). A no-op
#       (no apt-get call at all) when everything is already present, so it
#       is cheap to run before every build and test.
#   scripts/setup.sh --download DIR [PACKAGE...]
#       gathers the .deb files of the packages (default: the build's list
#       below) and of every dependency a base Debian system lacks (priority
#       required and important left out) into DIR, with DIR/packages.txt
#       naming them. Needs the package archive, not root.
#   scripts/setup.sh --download DIR --gpu-node
#       the same for a GPU machine, which has a C compiler, CMake and the
#       CUDA toolkit of its own (nvcc needs a host compiler) and may run
#       another distribution: the build's libraries, pkg-config and Open
#       MPI (the ones scripts/gpu-check.sh needs), without the compiler
#       toolchain and what only it brings (39 MiB instead of 98 here).
#   scripts/setup.sh --from DIR [--prefix P]
#       takes the .deb files DIR/packages.txt names (one of each: a folder
#       downloaded into twice keeps the first list's files, which are left
#       out and counted), or every .deb in DIR where there is no list.
#       Each is checked first (whole, and for this machine's architecture
#       or all): a damaged or foreign file stops it before anything is
#       installed or unpacked.
#       As root without --prefix: installs DIR's packages (apt-get, no
#       network). Otherwise unpacks them into P (default DIR/prefix; dpkg -x,
#       no root; its path of letters, digits and / ( ) + , . = @ ^ _ ~ -
#       only, which pkg-config passes on unchanged), points their
#       pkg-config files at P and writes P/env.sh,
#       which sets CMAKE_PREFIX_PATH, PKG_CONFIG_PATH, LD_LIBRARY_PATH and
#       PATH (and, where Open MPI is among them, what relocates it: its
#       mpirun and mpicc then work from P): `source P/env.sh &&
#       scripts/build.sh build` then builds and tests against P.
#   scripts/setup.sh -h | --help
#       prints this text.
#
# The CUDA toolkit, cuDNN and NCCL are not Debian packages here: they come
# with NVIDIA's installers (docs/TRAINING.md, "Setting up a GPU machine").
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libturbojpeg0-dev libjpeg62-turbo-dev libpng-dev zlib1g-dev
  liblmdb-dev lmdb-utils libcjson-dev
  libomp-dev libopenblas-dev libopenmpi-dev openmpi-bin
  python3 python3-lmdb python3-pil
  python3-dev python3-venv python3-pip python3-numpy python3-pytest  # the Python package (python/) and its tests
  clang libclang-rt-14-dev
  chromium  # headless, for the report's end-to-end test (tests/cli/test_report_e2e.sh)
  strace  # the tests that count a command's opens of its weights file (tests/cli/test_eval.sh)
)

# --gpu-node: what scripts/gpu-check.sh needs beside the machine's own
# compiler, CMake and CUDA toolkit
gpu_packages=(
  pkg-config
  libturbojpeg0-dev libjpeg62-turbo-dev libpng-dev zlib1g-dev
  liblmdb-dev libcjson-dev libopenblas-dev libopenmpi-dev openmpi-bin
)
# what the build runs with: kept even where the toolchain brings it too
# (Open MPI's and OpenBLAS's Fortran run-time, say)
gpu_runtime=(
  pkg-config libturbojpeg0 libjpeg62-turbo libpng16-16 zlib1g liblmdb0
  libcjson1 libopenblas0 libopenmpi3 openmpi-bin
)

die() { echo "setup: $*" >&2; exit 1; }
usage() { echo "setup: $*" >&2; echo "usage: scripts/setup.sh [--download DIR [--gpu-node | PACKAGE...] | --from DIR [--prefix P]] (see --help)" >&2; exit 2; }

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  sudo_cmd=(sudo)
fi

# The packages an install of "$@" brings, as if nothing were installed.
resolve() {
  local empty out rc=0
  empty=$(mktemp)
  out=$(apt-get -s -qq -o Dir::State::status="$empty" -o Debug::NoLocking=1 \
          install --no-install-recommends "$@" 2>&1) || rc=$?
  rm -f "$empty"
  [ $rc -eq 0 ] || die "cannot resolve the packages' dependencies: $(printf '%s\n' "$out" | grep -m1 '^E:')"
  printf '%s\n' "$out" | awk '$1 == "Inst" {print $2}' | sort -u
}

# The install closure of "$@" less the base system: what the essential,
# required and important packages bring is on every Debian machine, and
# installing an older copy of it over a newer one would downgrade it.
closure() {
  local want base
  # (closure runs in a command substitution, where set -e is off: a
  # resolve that stopped stops it too)
  want=$(resolve "$@") || exit 1
  [ -n "$want" ] || die "cannot resolve the packages' dependencies: apt-get listed none (run apt-get update)"
  # shellcheck disable=SC2046
  base=$(resolve $(apt-cache dumpavail | awk '
    /^Package: / {p = $2}
    /^Priority: (required|important)$/ || /^Essential: yes$/ {print p}' | sort -u)) || exit 1
  comm -23 <(printf '%s\n' "$want") <(printf '%s\n' "$base")
}

# download DIR GPU_NODE [PACKAGE...]
download() {
  local dir=$1 gpu_node=$2
  shift 2
  [ "$gpu_node" = 0 ] || set -- "${gpu_packages[@]}"
  [ $# -gt 0 ] || set -- "${packages[@]}"
  [ ! -e "$dir" ] || [ -d "$dir" ] || die "cannot download into '$dir': it is not a folder"
  local list why
  list=$(closure "$@")
  if [ $gpu_node -eq 1 ]; then
    # the toolchain's closure less what the libraries need at run time:
    # the GPU machine's own compiler takes its place, and a second libc6-dev
    # or gcc unpacked before it on the paths would shadow its own
    local toolchain
    toolchain=$(comm -23 <(resolve build-essential gfortran) <(resolve "${gpu_runtime[@]}"))
    list=$(comm -23 <(printf '%s\n' "$list") <(printf '%s\n' "$toolchain"))
  fi
  # made once the packages resolve: a name the archive lacks leaves none
  why=$(mkdir -p "$dir" 2>&1) || die "cannot create '$dir': ${why##*: }"
  [ -w "$dir" ] || die "cannot download into '$dir': it is not writable"
  local n
  n=$(printf '%s\n' "$list" | wc -l)
  echo "setup: downloading $n packages into '$dir'" >&2
  # shellcheck disable=SC2086
  (cd "$dir" && apt-get download -qq -o APT::Sandbox::User="$(id -un)" $list) ||
    die "cannot download the packages into '$dir' (is the package archive reachable?)"
  printf '%s\n' "$list" >"$dir/packages.txt.tmp" && mv "$dir/packages.txt.tmp" "$dir/packages.txt"
  local missing=()
  local p
  for p in $list; do
    compgen -G "$dir/${p}_*.deb" >/dev/null || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] || die "cannot find the downloaded files of ${missing[*]} in '$dir'"
  echo "setup: $n packages ($(du -sh "$dir" | cut -f1)) in '$dir'; on the machine without the archive: scripts/setup.sh --from '$dir'" >&2
}

# relocate_pc PREFIX PC...: the packages' .pc files name /usr as Debian
# installed it: relocate those paths into the prefix, so pkg-config (and
# CMake through it) hands the compiler the prefix's headers and libraries.
# Only the files the packages brought (links left alone): a prefix shared
# with other software (~/.local, say) keeps its other .pc files as they are.
relocate_pc() {
  local prefix=$1 pc
  shift
  for pc in "$@"; do
    [ -f "$pc" ] && [ ! -L "$pc" ] || continue
    sed -i -E \
      -e "s#^([A-Za-z_]+)=/usr(/|\$)#\\1=${prefix}/usr\\2#" \
      -e "s#(-[IL])/usr/#\\1${prefix}/usr/#g" "$pc"
  done
}

# pick_debs DIR: fills the array `debs` with the .deb files to install: those
# DIR/packages.txt names, one each, where --download wrote that list (a
# folder downloaded into twice keeps the first list's files, which may be
# the toolchain --gpu-node leaves out, or an older version); every .deb
# in DIR otherwise. The list is read as an editor may leave it: CRLF line
# ends, blank lines and spaces, a name twice, no newline at the end.
pick_debs() {
  local dir=$1 p f n_all
  local -A seen=()
  debs=()
  n_all=$(compgen -G "$dir/*.deb" | wc -l)
  if [ ! -f "$dir/packages.txt" ]; then
    debs=("$dir"/*.deb)
    return
  fi
  while IFS= read -r p || [ -n "$p" ]; do
    p=${p//[[:space:]]/}
    [ -n "$p" ] && [ -z "${seen[$p]:-}" ] || continue
    seen[$p]=1
    local found=()
    for f in "$dir/${p}"_*.deb; do
      [ -e "$f" ] && found+=("$f")
    done
    [ ${#found[@]} -gt 0 ] || die "cannot install from '$dir': packages.txt names $p, and there is no ${p}_*.deb"
    [ ${#found[@]} -eq 1 ] || die "cannot install from '$dir': ${#found[@]} files of $p (${found[*]##*/}); remove all but one"
    debs+=("${found[0]}")
  done <"$dir/packages.txt"
  [ ${#debs[@]} -gt 0 ] || die "cannot install from '$dir': its packages.txt names no package"
  [ "$n_all" -eq ${#debs[@]} ] ||
    echo "setup: $((n_all - ${#debs[@]})) .deb files in '$dir' are not in its packages.txt: left out" >&2
}

# check_debs DIR: each file of debs is whole (its contents read to the
# end), and a package of all architectures or of this machine's: checked
# before anything is installed or unpacked, so that a copy cut short, a
# file renamed .deb or another machine's package stops --from with its
# name, and a prefix an earlier --from made stays as it was.
check_debs() {
  local dir=$1 host deb arch why
  command -v dpkg-deb >/dev/null ||
    die "cannot install from '$dir': dpkg-deb is missing (the packages are Debian's: dpkg unpacks them)"
  host=$(dpkg --print-architecture)
  for deb in "${debs[@]}"; do
    why=""
    if ! arch=$(dpkg-deb -f "$deb" Architecture 2>/dev/null) || ! why=$(dpkg-deb --fsys-tarfile "$deb" 2>&1 >/dev/null); then
      [ -n "$why" ] || why=$(dpkg-deb -f "$deb" Architecture 2>&1 >/dev/null || true)
      die "cannot install from '$dir': '${deb##*/}' is cut short or not a Debian package (copy it again; dpkg-deb says: $(printf '%s\n' "$why" | sed -n '1s/.*: //p'))"
    fi
    [ "$arch" = all ] || [ "$arch" = "$host" ] ||
      die "cannot install from '$dir': '${deb##*/}' is a package for $arch, and this machine is $host (download the packages where dpkg --print-architecture says $host)"
  done
}

unpack() {
  local dir=$1 prefix=$2 deb abs odd why
  # The prefix's path goes into the .pc files, which pkg-config splits at
  # a space and passes on mangled where it holds & # ' " \ * ; ! % [ ] < >
  # ? { } | ` or a non-ASCII byte (seen with pkgconf 1.8), into env.sh
  # between double quotes ($) and into colon-separated lists (:).
  case "$prefix" in /*) abs=$prefix ;; *) abs=$PWD/$prefix ;; esac
  odd=$(printf '%s' "$abs" | LC_ALL=C tr -d 'A-Za-z0-9/()+,.=@^_~-')
  [ -z "$odd" ] ||
    die "cannot unpack into '$abs': its path holds '$odd' (pkg-config and env.sh take letters, digits and / ( ) + , . = @ ^ _ ~ - only); name another with --prefix"
  why=$(mkdir -p "$prefix" 2>&1) || die "cannot create '$prefix': ${why##*: }"
  prefix=$(cd "$prefix" && pwd)
  # an earlier env.sh goes first: a prefix this run leaves unfinished
  # (a full disk, say) has none, and does not look ready
  rm -f "$prefix/env.sh"
  local n=0 out f pcs=()
  for deb in "${debs[@]}"; do
    # dpkg-deb -X is dpkg -x that names the files it unpacks
    out=$(dpkg-deb -X "$deb" "$prefix" 2>&1) ||
      die "cannot unpack '$deb' into '$prefix', which is left unfinished without env.sh: $(printf '%s\n' "$out" | tail -n1)"
    while IFS= read -r f; do
      case "$f" in *.pc) pcs+=("$prefix/${f#./}") ;; esac
    done <<<"$out"
    n=$((n + 1))
  done
  relocate_pc "$prefix" "${pcs[@]}"
  # the multiarch folder of the packages' libraries (x86_64-linux-gnu):
  # dpkg-architecture's (dpkg-dev), else the one the packages made (a GPU
  # machine seldom has dpkg-dev), else uname's where they made none
  local arch
  arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null) || arch=""
  [ -n "$arch" ] || arch=$(cd "$prefix/usr/lib" 2>/dev/null && ls -d -- *-linux-gnu* 2>/dev/null | head -n1) || true
  [ -n "$arch" ] || arch="$(uname -m)-linux-gnu"
  cat >"$prefix/env.sh.tmp" <<EOF
# imshard's build dependencies unpacked by scripts/setup.sh --from
export CMAKE_PREFIX_PATH="$prefix/usr\${CMAKE_PREFIX_PATH:+:\$CMAKE_PREFIX_PATH}"
export PKG_CONFIG_PATH="$prefix/usr/lib/$arch/pkgconfig:$prefix/usr/lib/pkgconfig:$prefix/usr/share/pkgconfig\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$prefix/usr/lib/$arch:$prefix/usr/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export PATH="$prefix/usr/bin:\$PATH"
EOF
  if [ -e "$prefix/usr/bin/orterun" ]; then
    # Open MPI finds its plug-ins, help files and launcher through the
    # paths it was built with (/usr) unless told the new place; dpkg -x runs
    # no maintainer scripts, so the alternatives that name mpirun, mpiexec
    # and mpicc are made here, as links in the prefix
    local f
    for f in "$prefix"/usr/bin/*.openmpi; do
      [ -e "${f%.openmpi}" ] || ln -s "$(basename "$f")" "${f%.openmpi}"
    done
    echo "export OPAL_PREFIX=\"$prefix/usr\"" >>"$prefix/env.sh.tmp"
    [ ! -d "$prefix/usr/lib/$arch/pmix2/lib/pmix" ] ||
      echo "export PMIX_MCA_mca_base_component_path=\"$prefix/usr/lib/$arch/pmix2/lib/pmix\"" >>"$prefix/env.sh.tmp"
  fi
  mv "$prefix/env.sh.tmp" "$prefix/env.sh"
  echo "setup: unpacked $n packages into '$prefix'; build with: source '$prefix/env.sh' && scripts/build.sh build" >&2
}

from() {
  local dir=$1 prefix=$2
  [ -d "$dir" ] || die "cannot install from '$dir': no such folder"
  compgen -G "$dir/*.deb" >/dev/null || die "cannot install from '$dir': it holds no .deb files (made by scripts/setup.sh --download)"
  dir=$(cd "$dir" && pwd) # apt-get takes a file for a package only by its path
  pick_debs "$dir"
  check_debs "$dir"
  if [ -z "$prefix" ] && [ "$(id -u)" -eq 0 ]; then
    local log parts
    log=$(mktemp)
    parts=$(mktemp -d)
    export DEBIAN_FRONTEND=noninteractive
    echo "setup: installing ${#debs[@]} packages from '$dir'" >&2
    # local files only: with no package source (and its own cache, not the
    # system's), apt-get sees DIR's files and what is installed, and has no
    # archive to reach. (--no-download would say the same, but apt 2.6
    # then refuses every local file: "Internal Error, Pathname to install
    # is not absolute", and where the lists name the same version it
    # takes the archive's file and cannot fetch it.)
    if ! apt-get install -y -qq --no-install-recommends -o Dir::Etc::SourceList=/dev/null \
      -o Dir::Etc::SourceParts="$parts" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= \
      "${debs[@]}" >/dev/null 2>"$log"; then
      local why
      why=$(grep -m1 '^E:' "$log" || tail -1 "$log")
      rm -rf "$log" "$parts"
      die "cannot install the packages in '$dir': $why"
    fi
    rm -rf "$log" "$parts"
    return
  fi
  unpack "$dir" "${prefix:-$dir/prefix}"
}

# Options in any order; a folder option's value is never empty (an empty
# --prefix would otherwise mean none: as root, an install into the system)
mode="" dir="" prefix="" gpu_node=0 args=()
while [ $# -gt 0 ]; do
  case "$1" in
  --download | --from | --prefix)
    [ $# -ge 2 ] && [ -n "$2" ] && [ "${2#-}" = "$2" ] || usage "$1 needs a folder"
    case "$1" in
    --prefix) prefix=$2 ;;
    *)
      [ -z "$mode" ] || usage "--download and --from do not go together: run one, then the other"
      mode=${1#--}
      dir=$2
      ;;
    esac
    shift 2
    ;;
  --gpu-node) gpu_node=1; shift ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  -*) usage "unknown option '$1'" ;;
  *) args+=("$1"); shift ;;
  esac
done
[ "$mode" = from ] || [ -z "$prefix" ] || usage "--prefix goes with --from DIR"
[ "$mode" = download ] || [ "$gpu_node" = 0 ] || usage "--gpu-node goes with --download DIR"
case "$mode" in
download)
  [ "$gpu_node" = 0 ] || [ ${#args[@]} -eq 0 ] || usage "--gpu-node takes no packages: it names its own"
  download "$dir" "$gpu_node" "${args[@]}"
  exit 0
  ;;
from)
  [ ${#args[@]} -eq 0 ] || usage "unexpected arguments after --from '$dir': ${args[*]}"
  from "$dir" "$prefix"
  exit 0
  ;;
esac
[ ${#args[@]} -eq 0 ] || usage "unexpected argument '${args[0]}'"

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

#!/usr/bin/env bash
#   scripts/test.sh [-h | --help]
#
# The whole test suite: installs dependencies, builds with -Werror, runs
# every test; builds the libraries and tools again as Release (-O3), which
# must be as clean; then builds with AddressSanitizer + UndefinedBehaviorSanitizer
# and runs every test again; builds the tests of the code that starts
# threads (loader, verify, sample) with ThreadSanitizer and runs them;
# then runs each libFuzzer harness for 10 s from a fixed seed
# (scripts/fuzz.sh; bench/fuzz runs them longer). GPU tests are skipped
# (not passed) without a GPU.
# The Python package is installed into a virtual environment from the
# working tree (pip install ./python, as a user would) and its tests run
# with pytest against the build's tools.
set -euo pipefail
case "${1:-}" in
-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
"") ;;
*) echo "test.sh: unknown argument '$1' (it takes none; see --help)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc)

echo "== build (RelWithDebInfo, -Wall -Wextra -Werror)"
bash scripts/build.sh build
echo "== tests"
(cd build && ctest --output-on-failure -j"$jobs")

echo "== Python package (pip install ./python into build/python-venv) and tests/python"
# Debian's python3 with its numpy and pytest (--system-site-packages);
# scikit-build-core comes from PyPI into pip's isolated build environment.
py=${PYTHON:-/usr/bin/python3}
rm -rf build/python-venv
"$py" -m venv --system-site-packages build/python-venv
build/python-venv/bin/pip install --quiet --disable-pip-version-check ./python
# FAILMALLOC: the malloc that fails its Nth call, preloaded into children
# by tests/python/test_out_of_memory.py
IMSHARD="$PWD/build/tools/imshard" MAKE_IMAGES="$PWD/build/tests/fixtures/make_images" \
  FAILMALLOC="$PWD/build/tests/fixtures/failmalloc.so" \
  build/python-venv/bin/python -m pytest -q -p no:cacheprovider tests/python

echo "== build (Release: the libraries and tools, -Werror; gcc -O3 warns where -O2 does not)"
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DIMSHARD_WERROR=ON -DIMSHARD_WITH_CUDA=OFF \
  >build-release.configure.log 2>&1 || { cat build-release.configure.log >&2; exit 1; }
cmake --build build-release -j"$jobs" --target imshard imshard-train

echo "== build (ASan + UBSan)"
# float-cast-overflow: GCC's -fsanitize=undefined leaves out the check
# of a float converted to an integer it cannot hold (a NaN thread count
# on the report's page passed it, and only clang's fuzzing build saw it)
bash scripts/build.sh build-asan -DIMSHARD_SANITIZE=address,undefined,float-cast-overflow -DIMSHARD_PYTHON=ON \
  -DPython_EXECUTABLE="$py"
echo "== tests under ASan + UBSan"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --output-on-failure -j"$jobs" -LE slow)
echo "== tests/python against the extension built with ASan + UBSan"
# The interpreter is not instrumented: the sanitizer runtimes are
# preloaded, and leak checking is off (CPython keeps memory to its exit).
# test_out_of_memory.py skips itself here: failmalloc.so cannot be
# preloaded beside ASan's malloc, which comes first and never calls it.
for f in python/imshard/*.py; do cp "$f" build-asan/python/imshard/; done
LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)" \
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  PYTHONPATH="$PWD/build-asan/python" IMSHARD="$PWD/build/tools/imshard" \
  MAKE_IMAGES="$PWD/build/tests/fixtures/make_images" \
  "$py" -m pytest -q -p no:cacheprovider tests/python

echo "== build (ThreadSanitizer: the tests of the code that starts threads)"
# The loader's producer thread, its consumer and a stop share the ring
# of batches; verify -j and sample share their work lists. OpenMP's
# workers are held to one thread (OMP_THREAD_LIMIT=1): libgomp is not
# instrumented, and its barriers would be reported as races.
cmake -S . -B build-tsan -DIMSHARD_SANITIZE=thread -DIMSHARD_WERROR=ON -DIMSHARD_WITH_CUDA=OFF \
  >build-tsan.configure.log 2>&1 || { cat build-tsan.configure.log >&2; exit 1; }
cmake --build build-tsan -j"$jobs" --target test_loader test_loader_batches test_loader_bad \
  test_verify test_sample
echo "== those tests under ThreadSanitizer"
(cd build-tsan && OMP_THREAD_LIMIT=1 TSAN_OPTIONS=halt_on_error=1 \
  ctest --output-on-failure -R '^test_(loader(_batches|_bad)?|verify|sample)$')

echo "== fuzzing (libFuzzer, 10 s per harness)"
FUZZ_SEED=1 bash scripts/fuzz.sh 10

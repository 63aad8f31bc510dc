#!/usr/bin/env bash
# bench/fuzz/run.sh [SECONDS [HARNESS...]]: every libFuzzer harness (or
# those named, e.g. shard) for SECONDS each (default 600), keeping the
# corpora in build-fuzz/corpus between runs so each run starts where the
# last stopped. See bench/fuzz/README.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec bash scripts/fuzz.sh "${1:-600}" "${@:2}"

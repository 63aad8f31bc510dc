#!/usr/bin/env bash
# scripts/gpu-check.sh without a GPU: whatever nvidia-smi says (missing,
# no driver, no device), one line and exit 1 before anything is built;
# bad usage exits 2. (With a GPU the script is the check itself.)
source "$IMS_TESTLIB"
check="$IMS_SRC/scripts/gpu-check.sh"
fake="$T/bin"
mkdir -p "$fake"
no_gpu_line="gpu-check: no GPU: nvidia-smi lists none (this check needs a CUDA GPU and its driver)"

expect 2 bash "$check" --bogus
contains "$T/err" "unknown argument '--bogus'"
expect 2 bash "$check" --build
contains "$T/err" "--build needs a folder"

# nvidia-smi missing: a PATH holding only what the script's first lines need
for tool in bash grep dirname sed cat; do ln -sf "$(command -v $tool)" "$fake/$tool"; done
expect 1 env PATH="$fake" bash "$check" --build "$T/b0"
same "$(cat "$T/err")" "$no_gpu_line" "(no nvidia-smi)"
absent "$T/b0"
absent "$T/b0.configure.log"
# nvidia-smi without a driver, and with a driver but no device
printf '#!/bin/sh\necho "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver." >&2\nexit 9\n' >"$fake/nvidia-smi"
chmod +x "$fake/nvidia-smi"
expect 1 env PATH="$fake" bash "$check" --build "$T/b1"
same "$(cat "$T/err")" "$no_gpu_line" "(no driver)"
absent "$T/b1"
printf '#!/bin/sh\necho "No devices were found"\nexit 6\n' >"$fake/nvidia-smi"
expect 1 env PATH="$fake:$PATH" bash "$check" --build "$T/b2"
same "$(cat "$T/err")" "$no_gpu_line" "(no device)"
absent "$T/b2"
finish

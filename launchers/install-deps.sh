#!/usr/bin/env bash
# Installs the Debian packages d500 needs that are missing; does nothing when all are there.
# Usage: launchers/install-deps.sh [--tests]     (--tests adds what the test suite needs)
set -euo pipefail
pkgs=(g++ cmake ninja-build pkg-config git
      libopenmpi-dev openmpi-bin            # MPI: the worker's ranks
      libhdf5-openmpi-dev hdf5-tools        # parallel HDF5: the results store; h5dump for users
      libtomlplusplus-dev                   # TOML++: campaign files and job specs
      libonnx-dev libprotobuf-dev           # ONNX (and its protobuf): networks of level 1
      zlib1g-dev dataset-fashion-mnist      # zlib reads Fashion-MNIST's gzip'd IDX files (level 2's real data)
      libssl-dev                            # OpenSSL's libcrypto: SHA-256 of the libraries a campaign loads
      libcli11-dev                          # CLI11: the command line
      libboost-math-dev                     # Boost.Math: binomial quantiles for the intervals
      libopenblas-dev                       # OpenBLAS: the blas backend
      libslurm-dev                          # libslurm: d500 submit, status, cancel
      libdnnl-dev ocl-icd-opencl-dev        # oneDNN: the onednn backend (its CMake package wants OpenCL)
      libtorch-dev)                         # LibTorch (ATen, CPU): the libtorch backend
if [ "${1:-}" = "--tests" ]; then
  pkgs+=(libgtest-dev libgmock-dev          # GoogleTest: unit and integration tests
         chromium                             # the report checked through its DOM in a real browser
         libonnx-testdata python3-onnx        # ONNX's backend tests (d500 onnx-test); checking exported models
         python3 python3-h5py python3-pandas python3-numpy   # reading results without d500
         slurmctld slurmd slurm-client munge                 # the test clusters
         iproute2 util-linux                                 # the multi-node one: namespaces, veths, a bridge
         universal-ctags clang-format)                       # the function-length and format checks (tests/check_*.sh)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "d500: installing missing Debian packages: ${missing[*]}"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "d500: not root and no sudo: install as root: apt-get install ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q </dev/null
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null

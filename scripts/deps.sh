#!/usr/bin/env bash
# Installs the Debian packages INCA needs to build, test and demo, if any are missing.
# Safe to run repeatedly: does nothing when everything is present.
set -euo pipefail

PKGS=(
  gcc make meson ninja-build pkg-config zlib1g-dev   # build
  clang libclang-rt-14-dev                           # libFuzzer + sanitizers for fuzz tests
  tshark python3-scapy                               # wire-format conformance tests
  python3-matplotlib                                 # plots
  iproute2 nftables ethtool                          # netns fabric tests, GSO-on-veth capture
  libxdp-dev libbpf-dev                              # inca-switch --xdp (AF_XDP; clang builds the XDP program)
  libgrpc-dev protobuf-c-compiler libprotobuf-c-dev protobuf-compiler   # AM gRPC service
  python3-grpcio python3-grpc-tools                  # tests with a gRPC client we did not write
  libnetconf2-dev libyang2-dev libssh-dev libyang2-tools  # NETCONF between the AM and switches
  python3-ncclient openssh-client                    # tests with a NETCONF client we did not write
  libinih-dev                                        # inca-sim scenario files
  openmpi-bin libopenmpi-dev mpich libmpich-dev      # MPI interposer + Open MPI baselines
  python3-torch                                      # PyTorch DDP hook (CPU-only Debian build)
  python3-numpy                                      # Python bindings test (numpy arrays)
  openssl                                            # TLS certificates for the AM tests
  libssl-dev                                         # data-plane MAC (AES-GMAC, HKDF from libcrypto)
  python3-cryptography                               # check_pcap.py verifies MAC tags independently
  python3-prometheus-client                          # metrics tests: a Prometheus parser we did not write
  python3-protobuf                                   # am_secure test: descriptor_pb2 checks the reflection service
  groff-base                                         # install test: man pages render without warnings
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

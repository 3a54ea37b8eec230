#!/usr/bin/env bash
# Proves the README's main command on a fresh Debian 12: debootstraps a minimal bookworm root
# (no compiler, no libraries, nothing of this machine's), copies a clean clone of this
# repository's HEAD into it, and runs `bash launchers/quickstart.sh` there as root, with only
# the package registry reachable. Needs root and the network to the Debian mirror; not part of
# the test suite (it downloads ~1 GB and takes ~15-30 minutes on 2 cores).
#
#   bash launchers/check-fresh-debian.sh [ROOT_DIR]     (default /var/tmp/d500-fresh-debian)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
root="${1:-/var/tmp/d500-fresh-debian}"
mirror="${D500_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
[ "$(id -u)" = 0 ] || { echo "check-fresh-debian: must run as root (debootstrap, chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap
if [ ! -x "$root/usr/bin/apt-get" ]; then
  rm -rf "$root"
  debootstrap --variant=minbase bookworm "$root" "$mirror"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
mounted=()
cleanup() { for ((i=${#mounted[@]}-1; i>=0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done; }
trap cleanup EXIT
for fs in proc sys dev dev/pts; do
  mkdir -p "$root/$fs"
  mount --bind "/$fs" "$root/$fs"
  mounted+=("$root/$fs")
done
mkdir -p "$root/dev/shm" && mount -t tmpfs tmpfs "$root/dev/shm" && mounted+=("$root/dev/shm")
rm -rf "$root/root/d500"
git -C "$here" archive --format=tar --prefix=d500/ HEAD | tar -x -C "$root/root"
echo "check-fresh-debian: what the fresh root has before the quickstart:"
chroot "$root" /bin/bash -c 'for c in g++ cmake mpirun h5dump; do printf "  %s: %s\n" "$c" "$(command -v $c || echo absent)"; done'
start=$(date +%s)
chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin CI=true \
  /bin/bash -c 'cd /root/d500 && bash launchers/quickstart.sh' </dev/null
echo "check-fresh-debian: the quickstart passed in a fresh Debian 12 root in $(( $(date +%s) - start )) s"
ls -l "$root"/root/d500/runs/quickstart-*/report.md

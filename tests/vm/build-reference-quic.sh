#!/bin/sh
# Builds, outside the repository, what the QUIC interop part of tests/vm/test_kernel_stacks.py
# needs: the Linux QUIC kernel module (github lxin/quic) for the guest's Debian kernel, its
# userspace handshake library libquic, and the reference NetPerfMeter 2.0.10 built with QUIC
# against them. Nothing of their code enters the project; the test skips without them.
#
#   sh tests/vm/build-reference-quic.sh        (as root; needs the packages below)
#
# Packages (Debian 12): linux-headers-KVER (KVER: the guest's kernel, the newest in /boot with
# modules, as tests/vm/npmvm.py picks it), gcc (12, the kernel's own compiler), make, autoconf,
# automake, libtool, pkg-config, libgnutls28-dev, cmake, g++, libsctp-dev, libbz2-dev, git.
#
# What it makes (the test looks for these three):
#   $QUIC_PREFIX/modules/KVER/quic.ko                          the module, loaded with insmod
#   $REF_PREFIX/bin/netperfmeter                               the reference with HAVE_QUIC
#   $REF_PREFIX/lib/quic-config-noop.so                        for its passive (quic-config-noop.c)
# and, used only by the build, $QUIC_PREFIX/lib/libquic.a and $QUIC_PREFIX/include.
#
# Environment (defaults in brackets): QUIC_GIT [https://github.com/lxin/quic], QUIC_COMMIT
# [03a9c7c..., main of 2026-07-24, the week before the reference's release], NPM_GIT
# [https://github.com/dreibh/netperfmeter], NPM_TAG [netperfmeter-2.0.10], KVER, SRC
# [/usr/local/src/netperfmeter-reference-quic], QUIC_PREFIX
# [/usr/local/lib/netperfmeter-reference-quic], REF_PREFIX
# [/usr/local/lib/netperfmeter-reference-2.0.10-quic], JOBS [2].
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)

QUIC_GIT=${QUIC_GIT:-https://github.com/lxin/quic}
QUIC_COMMIT=${QUIC_COMMIT:-1a2f77cee38f05acc1970f4800356beb5d743f20}
NPM_GIT=${NPM_GIT:-https://github.com/dreibh/netperfmeter}
NPM_TAG=${NPM_TAG:-netperfmeter-2.0.10}
SRC=${SRC:-/usr/local/src/netperfmeter-reference-quic}
QUIC_PREFIX=${QUIC_PREFIX:-/usr/local/lib/netperfmeter-reference-quic}
REF_PREFIX=${REF_PREFIX:-/usr/local/lib/netperfmeter-reference-2.0.10-quic}
JOBS=${JOBS:-2}
if [ -z "${KVER:-}" ]; then
  KVER=$(for k in /boot/vmlinuz-*; do v=${k#/boot/vmlinuz-}; [ -d "/lib/modules/$v/kernel" ] && echo "$v"; done |
         sort | tail -n 1)
fi
if [ -z "$KVER" ] || [ ! -f "/lib/modules/$KVER/build/Makefile" ]; then
  echo "build-reference-quic: no kernel headers for '${KVER}' (apt-get install linux-headers-${KVER:-VERSION})" >&2
  exit 1
fi

checkout() {  # URL REVISION DIRECTORY: a fresh work tree of REVISION
  rm -rf "$3"
  git clone --quiet "$1" "$3"
  git -C "$3" -c advice.detachedHead=false checkout --quiet "$2"
}

mkdir -p "$SRC"

# 1. lxin/quic: libquic (static, so that the reference needs nothing at run time) and the
#    module, built out of tree against the guest kernel's headers (its configure would take the
#    running kernel's, which on a build host is another one).
checkout "$QUIC_GIT" "$QUIC_COMMIT" "$SRC/quic"
cd "$SRC/quic"
./autogen.sh >/dev/null
./configure --quiet --prefix="$QUIC_PREFIX" --without-modules --disable-shared --enable-static
make -C libquic -j"$JOBS" install >/dev/null
make -C "/lib/modules/$KVER/build" M="$SRC/quic/modules/net/quic" ROOTDIR="$SRC/quic/modules" \
  CONFIG_IP_QUIC=m -j"$JOBS" modules
install -D -m 644 modules/net/quic/quic.ko "$QUIC_PREFIX/modules/$KVER/quic.ko"

# 2. The reference with QUIC: its CMake test compiles <linux/quic.h> and finds libquic.
checkout "$NPM_GIT" "$NPM_TAG" "$SRC/netperfmeter"
cd "$SRC/netperfmeter"
cmake -S . -B b -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DWITH_ICONS=OFF -DWITH_PLOT_PROGRAMS=OFF -DWITH_EXAMPLE_SCRIPTS=OFF -DWITH_EXAMPLE_RESULTS=OFF \
  -DCMAKE_C_FLAGS="-I$QUIC_PREFIX/include" -DCMAKE_CXX_FLAGS="-I$QUIC_PREFIX/include" \
  -DCMAKE_LIBRARY_PATH="$QUIC_PREFIX/lib" >cmake.log
if ! grep -q '^HAVE_QUIC:INTERNAL=1' b/CMakeCache.txt || ! grep -q '^QUIC_LIBRARY:FILEPATH=.*libquic' b/CMakeCache.txt; then
  echo "build-reference-quic: the reference's build found no QUIC (see $SRC/netperfmeter/cmake.log)" >&2
  exit 1
fi
cmake --build b --target netperfmeter -j"$JOBS"
install -D b/src/netperfmeter "$REF_PREFIX/bin/netperfmeter"

# 3. The LD_PRELOAD library that lets the reference's passive accept QUIC flows on the module
#    (tests/vm/quic-config-noop.c says why).
mkdir -p "$REF_PREFIX/lib"
cc -shared -fPIC -O2 -Wall -Werror -I"$QUIC_PREFIX/include" -o "$REF_PREFIX/lib/quic-config-noop.so" \
  "$HERE/quic-config-noop.c" -ldl
echo "built: $QUIC_PREFIX/modules/$KVER/quic.ko $REF_PREFIX/bin/netperfmeter $REF_PREFIX/lib/quic-config-noop.so"

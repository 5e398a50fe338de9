#!/bin/sh
# The bundled SCTP stack: Debian's libusrsctp source package, netperfmeter's patch series
# (src/sctp/usrsctp-patches) on top, built into a static library. Called by CMake at configure
# time (src/sctp/CMakeLists.txt); usable by hand.
#
#   bundled-usrsctp.sh --series DIR --prefix DIR --source DIR [--cc COMPILER] [--jobs N]
#   bundled-usrsctp.sh --series DIR --prefix DIR --tree DIR [--cc COMPILER] [--jobs N]
#   bundled-usrsctp.sh --series DIR --fetch-only --source DIR
#
# --series   the patch series: series (one file name per line), the patches, VERSION (the
#            Debian source version they apply to, e.g. 0.9.5.0-2)
# --prefix   where to install lib/libusrsctp.a and include/usrsctp.h; filled atomically (a
#            complete prefix or none), so that a cache of prefixes never holds half a build
# --source   a directory with the source package (libusrsctp_VERSION.dsc and its files);
#            downloaded there with "apt-get source --download-only" when it is not there yet
#            (needs a deb-src entry for the release: packaging/setup.sh deps adds one)
# --tree     instead of --source: an unpacked copy of that source package's orig tarball, as
#            netperfmeter's own Debian source package carries it (component "usrsctp"); Debian's
#            patches are not applied then -- its one patch (1001, a pkg-config file for the
#            autotools build) does not touch the CMake build used here, so the library is the
#            same
#
# Errors: one line on stderr and exit status 1; the build's own output goes to a log whose
# name the line gives.
set -eu

die() { printf 'bundled-usrsctp: %s\n' "$*" >&2; exit 1; }

series="" prefix="" source_dir="" tree="" cc="${CC:-cc}" jobs="" fetch_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --series) series="$2"; shift 2 ;;
    --prefix) prefix="$2"; shift 2 ;;
    --source) source_dir="$2"; shift 2 ;;
    --tree) tree="$2"; shift 2 ;;
    --cc) cc="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --fetch-only) fetch_only=1; shift ;;
    *) die "unknown argument: $1" ;;
  esac
done
[ -n "$series" ] && [ -f "$series/series" ] && [ -f "$series/VERSION" ] || die "--series needs a directory with series and VERSION"
[ -n "$source_dir" ] || [ -n "$tree" ] || die "--source or --tree is required"
[ -z "$source_dir" ] || [ -z "$tree" ] || die "--source and --tree exclude each other"
[ "$fetch_only" = 0 ] || [ -n "$source_dir" ] || die "--fetch-only needs --source"
[ "$fetch_only" = 1 ] || [ -n "$prefix" ] || die "--prefix is required"
version=$(tr -d ' \n' < "$series/VERSION")
upstream=${version%-*}
dsc="libusrsctp_${version}.dsc"

# 1. The source package, downloaded once (or the unpacked orig tree, checked to be that version).
if [ -n "$tree" ]; then
  tree_version=$(sed -n 's/^AC_INIT(\[libusrsctp\], *\[\([^]]*\)\]).*/\1/p' "$tree/configure.ac" 2>/dev/null || true)
  [ -n "$tree_version" ] || die "$tree is not a usrsctp source tree (no AC_INIT in its configure.ac)"
  [ "$tree_version" = "$upstream" ] || die "$tree holds usrsctp $tree_version, the series applies to $upstream ($series/VERSION)"
elif [ ! -f "$source_dir/$dsc" ]; then
  mkdir -p "$source_dir"
  command -v apt-get >/dev/null || die "no $dsc in $source_dir and no apt-get to download it"
  log="$source_dir/apt-get-source.log"
  if ! (cd "$source_dir" && apt-get source --download-only "libusrsctp=$version") > "$log" 2>&1; then
    die "cannot download the source package libusrsctp $version (apt-get source: $(tail -n 1 "$log")); it needs a deb-src entry for the release (packaging/setup.sh deps adds one), or configure with -DNPM_USRSCTP=system"
  fi
  [ -f "$source_dir/$dsc" ] || die "apt-get source did not bring $dsc (see $log)"
fi
[ "$fetch_only" = 1 ] && exit 0

[ -n "$tree" ] || command -v dpkg-source >/dev/null || die "dpkg-source (dpkg-dev) is needed to unpack $dsc"
command -v patch >/dev/null || die "patch is needed to apply the series"
command -v cmake >/dev/null || die "cmake is needed to build usrsctp"

# 2. Unpacked (with Debian's own patches; or the tree copied), the series applied, built and
# installed, all in a scratch directory beside the prefix that becomes the prefix only when
# everything worked.
# One build at a time per cache (build trees configured side by side share it).
parent=$(dirname "$prefix")
mkdir -p "$parent"
exec 9> "$parent/.lock"
command -v flock >/dev/null && flock 9
if [ -f "$prefix/lib/libusrsctp.a" ] && [ -f "$prefix/BUILT-FROM" ]; then
  exit 0  # built meanwhile by another configuration
fi
work=$(mktemp -d "$parent/.usrsctp-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
log="$parent/usrsctp-build.log"
: > "$log"
if [ -n "$tree" ]; then
  cp -R "$tree" "$work/src" || die "cannot copy $tree"
  origin="$upstream (Debian orig tarball)"  # no path: it ends up in the binary (reproducible builds)
else
  dpkg-source --no-check -x "$source_dir/$dsc" "$work/src" >> "$log" 2>&1 ||
    die "cannot unpack $source_dir/$dsc (see $log)"
  origin="$version (Debian source)"
fi
while read -r name; do
  case "$name" in ''|'#'*) continue ;; esac
  [ -f "$series/$name" ] || die "the series names $name, which is not in $series"
  patch -d "$work/src" -p1 --batch --forward --no-backup-if-mismatch < "$series/$name" >> "$log" 2>&1 ||
    die "$name does not apply to libusrsctp $version (see $log)"
done < "$series/series"

generator=""
command -v ninja >/dev/null && generator="-GNinja"
# As Debian builds it (IPv4 and IPv6, SCTP_DEBUG for the debug printf hook), but optimised
# (Debian's autotools build appends -O0 with its default --enable-debug) and position
# independent, for linking into netperfmeter; no sanitizers (an uninstrumented library, as
# the packaged one: usrsctp's own internal races are not this project's findings). The scratch
# directory's name stays out of the library (its assertions' __FILE__, the debug information),
# which is then the same from build to build (reproducible packages). CFLAGS from the
# environment come first (a package build's hardening flags; part of CMake's cache key).
cmake -S "$work/src" -B "$work/build" $generator -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_INSTALL_PREFIX="$work/prefix" \
  -DCMAKE_INSTALL_LIBDIR=lib -DCMAKE_INSTALL_INCLUDEDIR=include \
  -DCMAKE_C_FLAGS="${CFLAGS:-} -Wno-address-of-packed-member -ffile-prefix-map=$work/src=usrsctp -ffile-prefix-map=$work/build=usrsctp-build" \
  -Dsctp_werror=OFF -Dsctp_build_programs=OFF -Dsctp_build_shared_lib=OFF -Dsctp_build_fuzzer=OFF \
  -Dsctp_debug=ON -Dsctp_invariants=OFF -Dsctp_inet=ON -Dsctp_inet6=ON >> "$log" 2>&1 ||
  die "cannot configure usrsctp (see $log)"
cmake --build "$work/build" ${jobs:+-j "$jobs"} >> "$log" 2>&1 || die "cannot build usrsctp (see $log)"
cmake --install "$work/build" >> "$log" 2>&1 || die "cannot install usrsctp into $work/prefix (see $log)"
[ -f "$work/prefix/lib/libusrsctp.a" ] && [ -f "$work/prefix/include/usrsctp.h" ] ||
  die "the usrsctp build left no lib/libusrsctp.a and include/usrsctp.h (see $log)"
# One line for netperfmeter --version, e.g. "libusrsctp 0.9.5.0-2 (Debian source) with patches 0001 0002".
numbers=$(grep -v '^[[:space:]]*\(#\|$\)' "$series/series" | cut -c1-4 | tr '\n' ' ' | sed 's/ $//')
printf 'libusrsctp %s with patches %s\n' "$origin" "${numbers:-none}" > "$work/prefix/BUILT-FROM"
rm -rf "$prefix"
mv "$work/prefix" "$prefix"
printf 'bundled-usrsctp: libusrsctp %s with %s patch(es) in %s\n' "$upstream" \
  "$(grep -c -v '^[[:space:]]*\(#\|$\)' "$series/series")" "$prefix"

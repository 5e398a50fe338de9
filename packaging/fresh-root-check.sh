#!/usr/bin/env bash
# The README's set-up commands on a fresh Debian 12 root, as a new user would run them.
#
#   packaging/fresh-root-check.sh [--keep] [--only demo|test] [ROOT]
#   packaging/fresh-root-check.sh --autopkgtest DEBS [--keep] [ROOT]
#
# Creates a clean Debian 12 (bookworm) root with debootstrap from the Debian archive (ROOT,
# default /var/tmp/netperfmeter-fresh-root, replaced if it exists), clones this repository's
# committed HEAD into /root/netperfmeter inside it, and runs each command of README.md's
# "Set-up" section there, as root in a chroot with /proc, /sys, /dev, /run, bpffs and cgroup2
# mounted (network namespaces, tbf and BPF work as on a machine of its own; the network stack is
# the host's). Everything is mounted in a private mount namespace: nothing leaks to the host.
# What a command needs and did not install makes it fail here, whatever the host has installed.
#
# With --autopkgtest, the packages in DEBS (packaging/setup.sh packages: BUILD_DIR/packages)
# are installed into the clean root instead, with what packaging/debian/tests/control names
# for each test, and each of those autopkgtests runs there (AUTOPKGTEST_TMP set, as root).
#
# Prints one line per command or test (exit status, duration) and exits 0 only if all
# succeeded; the full output is in ROOT.log/. --keep leaves ROOT for inspection; --only runs
# one command. Needs root, debootstrap and git on the host; the README's test command takes
# about an hour, the autopkgtests a few minutes.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
keep=0
only=""
debs=""
while (($#)); do
  case "$1" in
    --keep) keep=1; shift ;;
    --only) only=$2; shift 2 ;;
    --autopkgtest) debs=$(realpath "$2"); shift 2 ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fresh-root-check: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
root=${1:-/var/tmp/netperfmeter-fresh-root}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
logs=$root.log

log() { printf '[fresh-root] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

[[ $(id -u) -eq 0 ]] || die "needs root (debootstrap, chroot, mounts)"
command -v debootstrap >/dev/null || die "needs debootstrap (apt-get install debootstrap)"
command -v git >/dev/null || die "needs git"
git -C "$here" rev-parse HEAD >/dev/null 2>&1 || die "$here is not a git checkout"

# The README's commands: the indented lines of its "Set-up" section.
mapfile -t commands < <(awk '/^## /{inside = ($0 ~ /^## Set-up/)} inside && /^    [^ ]/{sub(/^    /, ""); print}' "$here/README.md")
((${#commands[@]} > 0)) || die "README.md has no commands in its Set-up section"
if [[ -n $only ]]; then
  mapfile -t commands < <(printf '%s\n' "${commands[@]}" | grep -E "(^| )$only\$" || true)
  ((${#commands[@]} > 0)) || die "README.md has no set-up command ending in '$only'"
fi

# Mounts live in a private mount namespace: they end with this process, whatever happens.
if [[ -z ${NPM_FRESH_ROOT_UNSHARED:-} ]]; then
  export NPM_FRESH_ROOT_UNSHARED=1
  args=()
  ((keep)) && args+=(--keep)
  [[ -n $only ]] && args+=(--only "$only")
  [[ -n $debs ]] && args+=(--autopkgtest "$debs")
  exec unshare --mount --propagation private "$0" "${args[@]}" "$root"
fi

# Never delete through a mount point (devtmpfs is the host's /dev).
remove_root() {
  if grep -q " $(realpath -m "$root")/" /proc/self/mountinfo; then
    die "something is still mounted under $root; not removing it"
  fi
  rm -rf --one-file-system "$root"
}

remove_root
rm -rf "$logs"
mkdir -p "$logs"
log "debootstrap bookworm into $root ($mirror)"
start=$SECONDS
debootstrap bookworm "$root" "$mirror" >"$logs/debootstrap.log" 2>&1 || die "debootstrap failed: see $logs/debootstrap.log"
log "debootstrap: $((SECONDS - start)) s"
# A fresh machine's sources: the release, its updates and security updates.
cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb ${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security} bookworm-security main
EOF
cp /etc/resolv.conf "$root/etc/resolv.conf"
if [[ -z $debs ]]; then
  git clone --quiet "$here" "$root/root/netperfmeter"
  log "cloned $(git -C "$here" rev-parse --short HEAD) into /root/netperfmeter"
fi

# The root a mount point of its own, as on a machine ("ip netns exec" makes / a slave mount).
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount -t bpf bpffs "$root/sys/fs/bpf"
mount -t cgroup2 cgroup2 "$root/sys/fs/cgroup" 2>/dev/null || true
mount -t devtmpfs devtmpfs "$root/dev"
mkdir -p "$root/dev/pts" "$root/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts"
mount -t tmpfs tmpfs "$root/dev/shm"
mount -t tmpfs tmpfs "$root/run"
mkdir -p "$root/run/netns"

if [[ -n $debs ]]; then
  # The autopkgtests of packaging/debian/tests against the built packages.
  mkdir -p "$root/root/debs"
  find "$debs" -maxdepth 1 -name '*.deb' ! -name '*-dbgsym_*' -exec cp {} "$root/root/debs/" \;
  ls "$root"/root/debs/*.deb >/dev/null 2>&1 || die "no packages in $debs (packaging/setup.sh packages)"
  tests=$here/packaging/debian/tests
  mapfile -t commands < <(awk -F': *' '$1 == "Tests" {print $2}' "$tests/control")
  depends=$(awk -F': *' '$1 == "Depends" {print $2}' "$tests/control" | tr ',' '\n' | tr -d ' ' |
            grep -v '^netperfmeter' | sort -u | tr '\n' ' ')
  log "installing the packages and the tests' dependencies ($depends)"
  chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive bash -c \
    "apt-get update -qq && apt-get install -y -qq --no-install-recommends /root/debs/*.deb $depends" \
    >"$logs/install.log" 2>&1 || die "installing the packages failed: see $logs/install.log"
  cp -r "$tests" "$root/root/tests"
  status=0
  for t in "${commands[@]}"; do
    mkdir -p "$root/tmp/autopkgtest-tmp/$t"
    start=$SECONDS
    rc=0
    chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 AUTOPKGTEST_TMP="/tmp/autopkgtest-tmp/$t" \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      "/root/tests/$t" >"$logs/autopkgtest-$t.log" 2>&1 || rc=$?
    printf 'autopkgtest %-20s exit %d after %d s: %s\n' "$t" "$rc" $((SECONDS - start)) \
      "$(tail -n 1 "$logs/autopkgtest-$t.log")"
    if ((rc != 0)); then
      status=1
      tail -n 20 "$logs/autopkgtest-$t.log" | sed 's/^/    /'
    fi
  done
  commands=()
fi

status=${status:-0}
for cmd in "${commands[@]}"; do
  name=$(echo "$cmd" | tr -c 'A-Za-z0-9.\n-' '_')
  log "running: $cmd"
  start=$SECONDS
  rc=0
  chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    bash -c "cd /root/netperfmeter && $cmd" >"$logs/$name.log" 2>&1 || rc=$?
  printf '%-32s exit %d after %d s\n' "$cmd" "$rc" $((SECONDS - start))
  if ((rc != 0)); then
    status=1
    tail -n 40 "$logs/$name.log" | sed 's/^/    /'
  fi
done

for m in dev/shm dev/pts dev run sys/fs/cgroup sys/fs/bpf sys proc; do
  umount -l "$root/$m" 2>/dev/null || true
done
umount -l "$root" 2>/dev/null || true
if ((keep == 0)); then
  remove_root
else
  log "kept $root"
fi
log "logs in $logs"
exit $status

/* LD_PRELOAD library for the reference NetPerfMeter 2.0.10's passive with the Linux QUIC module
 * (tests/vm/build-reference-quic.sh builds it outside the repository).
 *
 * When the reference's passive identifies a QUIC flow, it reads the accepted connection's
 * QUIC_SOCKOPT_CONFIG, sets the congestion control the flow asked for and writes it back. The
 * module refuses QUIC_SOCKOPT_CONFIG on an established connection (EINVAL, in every lxin/quic
 * version that has the option), so the reference's passive rejects every QUIC flow, its own
 * active's included. Here such a write succeeds if it would change nothing (the connection's
 * configuration already is the one asked for: Reno, the module's default, for cc=default and
 * cc=reno); any other write fails as before. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <linux/quic.h>

#ifndef SOL_QUIC
#define SOL_QUIC 288
#endif

int setsockopt(int fd, int level, int name, const void* value, socklen_t length) {
  static int (*next)(int, int, int, const void*, socklen_t);
  if (next == NULL) {
    next = (int (*)(int, int, int, const void*, socklen_t))dlsym(RTLD_NEXT, "setsockopt");
  }
  const int result = next(fd, level, name, value, length);
  if (result < 0 && errno == EINVAL && level == SOL_QUIC && name == QUIC_SOCKOPT_CONFIG &&
      length == sizeof(struct quic_config)) {
    struct quic_config current;
    socklen_t currentLength = sizeof(current);
    if (getsockopt(fd, level, name, &current, &currentLength) == 0 && currentLength == sizeof(current) &&
        memcmp(&current, value, sizeof(current)) == 0) {
      return 0;
    }
    errno = EINVAL;
  }
  return result;
}

/*
 * usrsctp_cookie_race: a COOKIE-ECHO for an existing association, handled while another
 * receive thread frees that association, must not touch it after the free -- the
 * use-after-free that upstream fixed in 28e2ea73 ("Fix locking issue found by syzkaller"),
 * patch 0011 of the bundled stack (src/sctp/usrsctp-patches).
 *
 * sctp_handle_cookie_echo() computes the cookie's signature under the endpoint's lock, which it
 * may not take while holding the association's: it unlocks the association, locks the
 * endpoint, locks the association again. In libusrsctp 0.9.5 it holds no reference on the
 * association meanwhile. Another thread that takes the association's lock in that gap and
 * frees it -- a receive thread handling an ABORT for it, as usrsctp runs one per UDP socket
 * (IPv4 and IPv6) for netperfmeter, or a timer that gives the association up -- gets the
 * endpoint's lock first, frees the association, and the handler then locks and reads freed
 * memory. A peer reaches this by sending its COOKIE-ECHO again (a retransmission whose
 * COOKIE-ACK was lost, or a replay) and an ABORT over another path at the same moment. (The
 * user's close does not: usrsctp's input path holds a reference on the socket while it handles
 * a packet of one of its associations, so a close meanwhile frees nothing.)
 *
 * The window is a few instructions wide, so the program opens it on purpose instead of hoping:
 * it is linked with --wrap=pthread_mutex_lock/unlock (tests/stress/CMakeLists.txt), so that the
 * stack's own lock calls come here. The wire thread delivers a replayed COOKIE-ECHO; when it
 * unlocks a mutex from inside sctp_handle_cookie_echo() (found in the program's own symbol
 * table), a second thread feeds the stack an ABORT for the association, and the wire thread
 * lets go only once that thread waits for this very mutex (the association's); its next lock
 * (the endpoint's) waits until the other thread's sctp_free_assoc() has taken that mutex too, or
 * the ABORT has been handled without it (a free deferred to the ASOCKILL timer, as it is when
 * the handler holds a reference). From then on the order is the stack's own. Every lock call checks with
 * AddressSanitizer whether the mutex lies in freed memory, before and after taking it: the stack is not built with
 * ASan, so its reads of freed memory go unseen, but its locks do not (the handler's second lock of the association is
 * checked once the ABORT has been handled, since the free gives the lock back before it frees). Each round checks that
 * both hand-overs happened: a round that missed the window (the ABORT did not wait for the mutex the handler let go of)
 * fails the program, which never passes without having tested.
 *
 * Exit status 0 when every round hit the window and no freed mutex was locked, 1 with one line
 * (saying where the freed block was) otherwise.
 * Usage: usrsctp_cookie_race [--rounds N]
 */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sanitizer/asan_interface.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conn_wire.h"

#define PROGRAM "usrsctp_cookie_race"
#define LISTEN_PORT 5001
#define COOKIE_ECHO 10 /* chunk types */
#define ABORT 6

static void fail(const char* what) { conn_wire_fail(PROGRAM, what); }

/* --- Where the stack's functions are: their symbols in this program's own ELF symbol table. --- */

#define MAX_RANGES 4 /* a function and compiler clones of it (name.part.0, name.isra.0, ...) */
struct function {
  const char* name;
  uintptr_t lo[MAX_RANGES], hi[MAX_RANGES];
  int ranges;
};
static struct function handler = {.name = "sctp_handle_cookie_echo"};
static struct function free_assoc = {.name = "sctp_free_assoc"};

static int main_object_bias(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  *(uintptr_t*)data = info->dlpi_addr; /* the first object is the program itself */
  return 1;
}

static void add_if_named(struct function* f, const char* name, uintptr_t start, uintptr_t size) {
  const size_t length = strlen(f->name);
  if (strncmp(name, f->name, length) != 0 || (name[length] != '\0' && name[length] != '.')) return;
  if (f->ranges == MAX_RANGES) {
    fprintf(stderr, PROGRAM ": more copies of %s than expected in the symbol table\n", f->name);
    exit(1);
  }
  f->lo[f->ranges] = start;
  f->hi[f->ranges] = start + size;
  ++f->ranges;
}

static void find_functions(struct function* const* functions, int count) {
  const int fd = open("/proc/self/exe", O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) fail("cannot read /proc/self/exe");
  const size_t size = (size_t)st.st_size;
  const unsigned char* image = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (image == MAP_FAILED) fail("cannot map /proc/self/exe");
  const Elf64_Ehdr* eh = (const Elf64_Ehdr*)image;
  if (size < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
      eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > size ||
      (size - eh->e_shoff) / sizeof(Elf64_Shdr) < eh->e_shnum)
    fail("/proc/self/exe is not a 64-bit ELF file this program can read");
  const Elf64_Shdr* sections = (const Elf64_Shdr*)(image + eh->e_shoff);
  uintptr_t bias = 0;
  dl_iterate_phdr(main_object_bias, &bias);
  for (unsigned i = 0; i < eh->e_shnum; ++i) {
    const Elf64_Shdr* symtab = &sections[i];
    if (symtab->sh_type != SHT_SYMTAB || symtab->sh_link >= eh->e_shnum) continue;
    const Elf64_Shdr* strtab = &sections[symtab->sh_link];
    if (symtab->sh_offset > size || symtab->sh_size > size - symtab->sh_offset || strtab->sh_offset > size ||
        strtab->sh_size > size - strtab->sh_offset)
      fail("/proc/self/exe has a symbol table outside the file");
    const Elf64_Sym* symbols = (const Elf64_Sym*)(image + symtab->sh_offset);
    const char* names = (const char*)(image + strtab->sh_offset);
    for (size_t j = 0; j < symtab->sh_size / sizeof(Elf64_Sym); ++j) {
      const Elf64_Sym* sym = &symbols[j];
      if (ELF64_ST_TYPE(sym->st_info) != STT_FUNC || sym->st_size == 0 || sym->st_name >= strtab->sh_size) continue;
      const char* name = names + sym->st_name;
      if (strnlen(name, strtab->sh_size - sym->st_name) == strtab->sh_size - sym->st_name) continue;
      for (int k = 0; k < count; ++k) add_if_named(functions[k], name, bias + sym->st_value, sym->st_size);
    }
  }
  munmap((void*)image, size);
  for (int k = 0; k < count; ++k) {
    if (functions[k]->ranges == 0) {
      fprintf(stderr,
              PROGRAM
              ": no %s in the program's symbol table (stripped, or not the usrsctp this test is "
              "for)\n",
              functions[k]->name);
      exit(1);
    }
  }
}

static int called_from(const struct function* f, uintptr_t address) {
  for (int i = 0; i < f->ranges; ++i)
    if (address >= f->lo[i] && address < f->hi[i]) return 1;
  return 0;
}

/* --- The lock calls of the stack (and of this program), through --wrap. --- */

int __real_pthread_mutex_lock(pthread_mutex_t* m);
int __real_pthread_mutex_unlock(pthread_mutex_t* m);

static atomic_int armed;             /* a replayed COOKIE-ECHO is on its way */
static atomic_int handler_reached;   /* the wire thread unlocked inside the handler */
static atomic_int handler_relocking; /* ... and its next lock is the endpoint's */
static atomic_int go;                /* the aborter may feed the ABORT */
static atomic_int aborter_done;
static atomic_int gave_association;                       /* the aborter waited for the handler's mutex */
static _Atomic(pthread_mutex_t*) aborter_wants;           /* the mutex the aborter waits for */
#define MAX_HELD 32                                       /* distinct mutexes */
static _Atomic(pthread_mutex_t*) freeing_locks[MAX_HELD]; /* what the aborter locked in sctp_free_assoc() */
static pthread_t aborter_id;
static atomic_int aborter_running;

static int is_aborter(void) { return atomic_load(&aborter_running) && pthread_equal(pthread_self(), aborter_id); }

/* True once the aborter locked m in sctp_free_assoc(): the endpoint's lock, which the free takes
 * again after it let go of the association's (the handler must not get it before). */
static int aborter_frees_under(pthread_mutex_t* m) {
  for (int i = 0; i < MAX_HELD; ++i)
    if (atomic_load(&freeing_locks[i]) == m) return 1;
  return 0;
}

static void check_not_freed(pthread_mutex_t* m, const char* when) {
  if (!__asan_address_is_poisoned(m)) return;
  /* Where the block was freed, without ASan's symbolizer (which can hang with the other
   * threads in the stack's locks): its size, the offset and the freeing thread. */
  void* block = NULL;
  size_t block_size = 0;
  char name[32] = "";
  __asan_locate_address(m, name, sizeof(name), &block, &block_size);
  void* trace[1];
  int freed_by = -1;
  __asan_get_free_stack(m, trace, 1, &freed_by);
  fprintf(stderr,
          PROGRAM
          ": a mutex in freed memory was locked%s (%s thread; %zu bytes into a freed %zu-byte "
          "block, freed by thread T%d): the association was freed while the COOKIE-ECHO's handler had let go of "
          "it, the use-after-free of upstream 28e2ea73\n",
          when, pthread_equal(pthread_self(), conn_wire_thread_id) ? "the wire" : "another",
          (size_t)((char*)m - (char*)block), block_size, freed_by);
  _exit(1);
}

/* Waits (at most 5 s) until done(m) holds or the ABORT has been handled; with done NULL, only
 * the latter. */
static void wait_for(int (*done)(pthread_mutex_t*), pthread_mutex_t* m) {
  const double deadline = conn_wire_now() + 5.0;
  while ((done == NULL || !done(m)) && !atomic_load(&aborter_done) && conn_wire_now() < deadline) usleep(100);
}

static int aborter_waits_for(pthread_mutex_t* m) { return atomic_load(&aborter_wants) == m; }

int __wrap_pthread_mutex_lock(pthread_mutex_t* m) {
  check_not_freed(m, "");
  if (is_aborter()) {
    atomic_store(&aborter_wants, m);
    const int result = __real_pthread_mutex_lock(m);
    atomic_store(&aborter_wants, NULL);
    if (called_from(&free_assoc, (uintptr_t)__builtin_return_address(0)) && !aborter_frees_under(m)) {
      for (int i = 0; i < MAX_HELD; ++i) {
        pthread_mutex_t* expected = NULL;
        if (atomic_compare_exchange_strong(&freeing_locks[i], &expected, m)) break;
      }
    }
    return result;
  }
  if (atomic_load(&handler_relocking) == 1 && pthread_equal(pthread_self(), conn_wire_thread_id)) {
    /* The handler's next lock, the endpoint's: only once the aborter's sctp_free_assoc() took
     * it (its lookup of the association holds it for a moment too: not that one). */
    atomic_store(&handler_relocking, 2);
    wait_for(aborter_frees_under, m);
    const int result = __real_pthread_mutex_lock(m);
    check_not_freed(m, " (freed while it waited for it)");
    return result;
  }
  if (atomic_load(&handler_relocking) == 2 && pthread_equal(pthread_self(), conn_wire_thread_id)) {
    /* The one after, the association's again: the free gives it back before it frees the
     * memory, so look only once the ABORT has been handled to its end. */
    atomic_store(&handler_relocking, 0);
    const int result = __real_pthread_mutex_lock(m);
    wait_for(NULL, m);
    check_not_freed(m, " (freed while it held it)");
    return result;
  }
  const int result = __real_pthread_mutex_lock(m);
  check_not_freed(m, " (freed while it waited for it)");
  return result;
}

int __wrap_pthread_mutex_unlock(pthread_mutex_t* m) {
  const uintptr_t caller = (uintptr_t)__builtin_return_address(0);
  if (atomic_load(&armed) && !atomic_load(&handler_reached) && called_from(&handler, caller) &&
      pthread_equal(pthread_self(), conn_wire_thread_id)) {
    /* The handler lets go of the association to take the endpoint's lock: start the ABORT
     * now, and let go only when it waits for this mutex (or has finished without it). */
    atomic_store(&handler_reached, 1);
    atomic_store(&go, 1);
    wait_for(aborter_waits_for, m);
    if (aborter_waits_for(m)) {
      atomic_store(&gave_association, 1);
      atomic_store(&handler_relocking, 1);
    }
  }
  return __real_pthread_mutex_unlock(m);
}

/* --- The wire, tapped: the client's COOKIE-ECHO is kept for the replay. --- */

static unsigned char cookie_echo[2048];
static size_t cookie_echo_length;
static atomic_int keep_cookie_echo;

static int tapped_output(void* addr, void* buffer, size_t length, uint8_t tos, uint8_t set_df) {
  const unsigned char* packet = buffer;
  /* AF_CONN packets are bare SCTP packets: a 12-byte common header, then the first chunk. */
  if (atomic_load(&keep_cookie_echo) && length > 12 && packet[12] == COOKIE_ECHO && length <= sizeof(cookie_echo)) {
    memcpy(cookie_echo, packet, length);
    cookie_echo_length = length;
    atomic_store(&keep_cookie_echo, 0);
  }
  return conn_wire_output(addr, buffer, length, tos, set_df);
}

/* A second receive thread: the client's ABORT (the COOKIE-ECHO's ports and verification tag,
 * an ABORT chunk without causes), fed to the stack when the handler has let go. */
static void* aborter_thread(void* arg) {
  (void)arg;
  aborter_id = pthread_self();
  atomic_store(&aborter_running, 1);
  unsigned char packet[16];
  memcpy(packet, cookie_echo, 12);
  memset(packet + 8, 0, 4);
  const unsigned char chunk[4] = {ABORT, 0, 0, 4};
  memcpy(packet + 12, chunk, sizeof(chunk));
  const uint32_t crc = usrsctp_crc32c(packet, sizeof(packet));
  memcpy(packet + 8, &crc, sizeof(crc));
  while (!atomic_load(&go)) usleep(100);
  usrsctp_conninput(&conn_wire_endpoint, packet, sizeof(packet), 0);
  atomic_store(&aborter_done, 1);
  return NULL;
}

static uint32_t asockill_count(void) { return conn_wire_stat().sctps_timoassockill; }

int main(int argc, char** argv) {
  const long rounds = conn_wire_option(PROGRAM, argc, argv, "--rounds", 3);
  struct function* const functions[] = {&handler, &free_assoc};
  find_functions(functions, 2);

  usrsctp_init(0, tapped_output, NULL);
  if (conn_wire_start(0) != 0) fail("cannot start the wire thread");
  const char* failed = NULL;
  struct socket* listener = conn_wire_listener(LISTEN_PORT, NULL, &failed);
  if (listener == NULL) fail(failed);

  const uint32_t asockill_before = asockill_count();
  uint32_t deferred = 0;
  const double start = conn_wire_now();
  for (long round = 0; round < rounds; ++round) {
    atomic_store(&keep_cookie_echo, 1);
    struct socket *client, *server;
    failed = conn_wire_connect(listener, LISTEN_PORT, 0, NULL, &client, &server);
    if (failed != NULL) fail(failed);
    if (atomic_load(&keep_cookie_echo)) fail("the handshake went by without a COOKIE-ECHO on the wire");
    while (conn_wire_busy()) usleep(1000);

    atomic_store(&handler_reached, 0);
    atomic_store(&handler_relocking, 0);
    atomic_store(&go, 0);
    atomic_store(&aborter_done, 0);
    atomic_store(&gave_association, 0);
    for (int i = 0; i < MAX_HELD; ++i) atomic_store(&freeing_locks[i], NULL);
    pthread_t id;
    if (pthread_create(&id, NULL, aborter_thread, NULL) != 0) fail("cannot start the aborter");
    while (!atomic_load(&aborter_running)) usleep(100);
    atomic_store(&armed, 1);
    /* The client's COOKIE-ECHO again, for the association that now exists. */
    if (conn_wire_output(NULL, cookie_echo, cookie_echo_length, 0, 0) != 0) fail("cannot queue the replay");
    const double deadline = conn_wire_now() + 10.0;
    while (!atomic_load(&aborter_done) && conn_wire_now() < deadline) usleep(1000);
    if (!atomic_load(&aborter_done)) {
      fail(atomic_load(&handler_reached)
               ? "the ABORT was not handled within 10 s"
               : "the replayed COOKIE-ECHO never reached sctp_handle_cookie_echo() within 10 s");
    }
    pthread_join(id, NULL);
    atomic_store(&aborter_running, 0);
    while (conn_wire_busy()) usleep(1000);
    atomic_store(&armed, 0);
    if (!atomic_load(&gave_association)) {
      fprintf(stderr, PROGRAM ": round %ld missed the window: %s\n", round + 1,
              atomic_load(&handler_reached) ? "the ABORT never waited for the mutex the handler released"
                                            : "the handler was not reached");
      return 1;
    }
    /* A free deferred by a reference the handler held runs 10 ms later (SCTP_ASOC_KILL_TIMEOUT):
     * counted for the report, not required (what the program asks is only that nothing freed
     * was locked). */
    const double timer_deadline = conn_wire_now() + 1.0;
    while (asockill_count() == asockill_before + deferred && conn_wire_now() < timer_deadline) usleep(1000);
    deferred = asockill_count() - asockill_before;
    usrsctp_close(server);
    usrsctp_close(client);
  }
  usrsctp_close(listener);
  while (conn_wire_busy()) usleep(1000);
  conn_wire_stop();
  if (!conn_wire_finish(10.0)) fail("usrsctp_finish() still refuses 10 s after every socket was closed");
  printf(PROGRAM
         ": %ld round(s): a replayed COOKIE-ECHO met an ABORT of its association in the handler's "
         "window each time, no freed mutex locked (%u free(s) deferred to the ASOCKILL timer); %lu packets "
         "delivered; usrsctp_finish() succeeded; %.1f s\n",
         rounds, deferred, atomic_load(&conn_wire_delivered), conn_wire_now() - start);
  return 0;
}

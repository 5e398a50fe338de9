// SPDX-License-Identifier: GPL-2.0
/*
 * netperfmeter-cc-loader start|stop|status
 *
 * Registers NetPerfMeter's BPF struct_ops congestion controls (npm_lia,
 * npm_olia, npm_rpv1, npm_rpv2) with the kernel, adds them to
 * net.ipv4.tcp_allowed_congestion_control, lists what is registered and
 * allowed, and unregisters them again. The BPF object is embedded (libbpf
 * skeleton); registrations outlive the loader process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <linux/capability.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "npm_cc.skel.h"

#define NPM_CC_COUNT 4
static const char *const cc_names[NPM_CC_COUNT] = { "npm_lia", "npm_olia", "npm_rpv1", "npm_rpv2" };
static const char *const stat_names[3] = { "coupled", "reno-fallback", "walk-truncated" };

#define AVAILABLE_PATH "/proc/sys/net/ipv4/tcp_available_congestion_control"
#define ALLOWED_PATH "/proc/sys/net/ipv4/tcp_allowed_congestion_control"
#define BTF_PATH "/sys/kernel/btf/vmlinux"
#define MIN_MAJOR 6
#define MIN_MINOR 2

static int verbose;

/* ---- libbpf log capture (for the verifier's last lines) ---------------- */
static char *log_buf;
static size_t log_len, log_cap;

static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	va_list aq;
	int n;

	if (verbose) {
		va_copy(aq, ap);
		vfprintf(stderr, fmt, aq);
		va_end(aq);
	}
	if (level == LIBBPF_DEBUG && !verbose)
		return 0;
	va_copy(aq, ap);
	n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	if (n <= 0)
		return 0;
	if (log_len + (size_t)n + 1 > log_cap) {
		size_t cap = (log_cap ? log_cap * 2 : 65536);
		while (cap < log_len + (size_t)n + 1)
			cap *= 2;
		char *b = realloc(log_buf, cap);
		if (!b)
			return 0;
		log_buf = b;
		log_cap = cap;
	}
	vsnprintf(log_buf + log_len, log_cap - log_len, fmt, ap);
	log_len += (size_t)n;
	return 0;
}

/* Print the last 'max' lines of the verifier log found in the captured text. */
static void print_verifier_tail(int max)
{
	const char *begin, *end;
	const char *p;
	int lines = 0;

	if (!log_buf)
		return;
	begin = strstr(log_buf, "-- BEGIN PROG LOAD LOG --");
	end = begin ? strstr(begin, "-- END PROG LOAD LOG --") : NULL;
	if (!begin || !end) {
		begin = log_buf;
		end = log_buf + log_len;
	} else {
		begin = strchr(begin, '\n') ? strchr(begin, '\n') + 1 : begin;
	}
	p = end;
	while (p > begin && lines <= max) {
		p--;
		if (*p == '\n' && p + 1 < end)
			lines++;
	}
	if (p > begin || *p == '\n')
		p++;
	fprintf(stderr, "netperfmeter-cc-loader: verifier log (last lines):\n");
	fwrite(p, 1, (size_t)(end - p), stderr);
	if (end > p && end[-1] != '\n')
		fputc('\n', stderr);
}

static const char *failed_prog(void)
{
	static char name[128];
	const char *p = log_buf ? strstr(log_buf, "prog '") : NULL;
	const char *q;

	if (!p)
		return "?";
	p += 6;
	q = strchr(p, '\'');
	if (!q || (size_t)(q - p) >= sizeof(name))
		return "?";
	memcpy(name, p, (size_t)(q - p));
	name[q - p] = 0;
	return name;
}

/* ---- environment checks --------------------------------------------------- */
static int have_cap(int cap)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];

	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &hdr, data) != 0)
		return 0;
	return (data[cap / 32].effective >> (cap % 32)) & 1;
}

static int check_env(int need_load)
{
	struct utsname u;
	int major = 0, minor = 0;

	/* test hooks: pretend another BTF path / kernel release */
	const char *btf = getenv("NPM_CC_LOADER_BTF");
	const char *release = getenv("NPM_CC_LOADER_KERNEL_RELEASE");

	if (!btf)
		btf = BTF_PATH;
	if (need_load && access(btf, R_OK) != 0) {
		fprintf(stderr,
			"netperfmeter-cc-loader: no kernel BTF (%s missing): "
			"the kernel needs CONFIG_DEBUG_INFO_BTF=y\n",
			btf);
		return 2;
	}
	if (!release && uname(&u) == 0)
		release = u.release;
	if (release && sscanf(release, "%d.%d", &major, &minor) == 2 &&
	    (major < MIN_MAJOR || (major == MIN_MAJOR && minor < MIN_MINOR))) {
		fprintf(stderr,
			"netperfmeter-cc-loader: kernel %s too old: need >= %d.%d "
			"(BPF struct_ops tcp_congestion_ops, TCP kfuncs, bpf_rdonly_cast)\n",
			release, MIN_MAJOR, MIN_MINOR);
		return 2;
	}
	if (!have_cap(CAP_SYS_ADMIN) && !(have_cap(CAP_BPF) && have_cap(CAP_PERFMON))) {
		fprintf(stderr, "netperfmeter-cc-loader: no CAP_BPF: registering a congestion "
				"control needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN); run as root\n");
		return 4;
	}
	return 0;
}

/* ---- sysctl lists --------------------------------------------------------- */
static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -errno;
	if (!fgets(buf, (int)len, f))
		buf[0] = 0;
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

static int in_list(const char *list, const char *name)
{
	size_t n = strlen(name);
	const char *p = list;

	while ((p = strstr(p, name)) != NULL) {
		if ((p == list || p[-1] == ' ') && (p[n] == 0 || p[n] == ' '))
			return 1;
		p += n;
	}
	return 0;
}

static int allow_all(void)
{
	char cur[1024], next[2048];
	FILE *f;
	int i, changed = 0;

	if (read_line(ALLOWED_PATH, cur, sizeof(cur)) != 0)
		return -1;
	snprintf(next, sizeof(next), "%s", cur);
	for (i = 0; i < NPM_CC_COUNT; i++) {
		char avail[1024];
		if (read_line(AVAILABLE_PATH, avail, sizeof(avail)) != 0 || !in_list(avail, cc_names[i]) ||
		    in_list(next, cc_names[i]))
			continue;
		size_t l = strlen(next);
		snprintf(next + l, sizeof(next) - l, "%s%s", l ? " " : "", cc_names[i]);
		changed = 1;
	}
	if (!changed)
		return 0;
	f = fopen(ALLOWED_PATH, "w");
	if (!f || fprintf(f, "%s\n", next) < 0 || fclose(f) != 0) {
		fprintf(stderr, "netperfmeter-cc-loader: cannot update %s: %s\n", ALLOWED_PATH, strerror(errno));
		return -1;
	}
	return 0;
}

/* ---- finding registered struct_ops maps ---------------------------------- */
typedef int (*map_cb)(int fd, const struct bpf_map_info *info, void *arg);

static int for_each_map(map_cb cb, void *arg)
{
	__u32 id = 0;

	while (bpf_map_get_next_id(id, &id) == 0) {
		struct bpf_map_info info;
		__u32 len = sizeof(info);
		int fd = bpf_map_get_fd_by_id(id);
		int r;

		if (fd < 0)
			continue;
		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) {
			close(fd);
			continue;
		}
		r = cb(fd, &info, arg);
		close(fd);
		if (r)
			return r;
	}
	return 0;
}

struct scan {
	__u32 map_id[NPM_CC_COUNT];
	__u64 stats[NPM_CC_COUNT][3];
	int have_stats;
	__u32 stats_id;
	int unregistered;
	int errors;
	int do_unregister;
};

static int scan_cb(int fd, const struct bpf_map_info *info, void *arg)
{
	struct scan *s = arg;
	int i;

	if (info->type == BPF_MAP_TYPE_STRUCT_OPS) {
		for (i = 0; i < NPM_CC_COUNT; i++) {
			if (strcmp(info->name, cc_names[i]) != 0)
				continue;
			if (s->do_unregister) {
				int zero = 0;
				if (bpf_map_delete_elem(fd, &zero) == 0) {
					printf("unregistered %s (struct_ops map id %u)\n", cc_names[i], info->id);
					s->unregistered++;
				} else if (errno != ENOENT && errno != EINVAL && errno != EINPROGRESS) {
					/* ENOENT/EINPROGRESS: an older registration
					 * that is already being torn down */
					fprintf(stderr,
						"netperfmeter-cc-loader: cannot unregister "
						"%s (map id %u): %s\n",
						cc_names[i], info->id, strerror(errno));
					s->errors++;
				}
			} else if (info->id > s->map_id[i]) {
				s->map_id[i] = info->id; /* newest; older ones may be dying */
			}
		}
	} else if (info->type == BPF_MAP_TYPE_ARRAY && strcmp(info->name, "npm_cc_b.bss") == 0 &&
		   info->value_size >= sizeof(__u64) * NPM_CC_COUNT * 3) {
		/* counters of the newest object (older ones may be dying) */
		__u64 *v = calloc(1, info->value_size);
		int zero = 0;
		if (v && info->id > s->stats_id && bpf_map_lookup_elem(fd, &zero, v) == 0) {
			for (i = 0; i < NPM_CC_COUNT; i++)
				for (int k = 0; k < 3; k++)
					s->stats[i][k] = v[i * 3 + k];
			s->have_stats = 1;
			s->stats_id = info->id;
		}
		free(v);
	}
	return 0;
}

/* ---- commands -------------------------------------------------------------- */
static int cmd_status(void)
{
	char avail[1024] = "", allowed[1024] = "";
	struct scan s;
	int i, registered = 0;

	memset(&s, 0, sizeof(s));
	read_line(AVAILABLE_PATH, avail, sizeof(avail));
	read_line(ALLOWED_PATH, allowed, sizeof(allowed));
	/* map ids and counters need privileges; the sysctl view always works */
	for_each_map(scan_cb, &s);
	printf("%-10s %-11s %-8s %s\n", "name", "registered", "allowed", "struct_ops map");
	for (i = 0; i < NPM_CC_COUNT; i++) {
		int reg = in_list(avail, cc_names[i]);
		registered += reg;
		printf("%-10s %-11s %-8s ", cc_names[i], reg ? "yes" : "no",
		       in_list(allowed, cc_names[i]) ? "yes" : "no");
		if (s.map_id[i])
			printf("id %u\n", s.map_id[i]);
		else
			printf("-\n");
	}
	printf("available: %s\nallowed:   %s\n", avail, allowed);
	if (s.have_stats)
		for (i = 0; i < NPM_CC_COUNT; i++)
			printf("stats %s: %s=%llu %s=%llu %s=%llu\n", cc_names[i], stat_names[0],
			       (unsigned long long)s.stats[i][0], stat_names[1], (unsigned long long)s.stats[i][1],
			       stat_names[2], (unsigned long long)s.stats[i][2]);
	return registered == NPM_CC_COUNT ? 0 : 3;
}

static int cmd_stop(void)
{
	struct scan s;
	char avail[1024] = "";
	int rc, i, left = 0;

	rc = check_env(0);
	if (rc)
		return rc;
	memset(&s, 0, sizeof(s));
	s.do_unregister = 1;
	for_each_map(scan_cb, &s);
	read_line(AVAILABLE_PATH, avail, sizeof(avail));
	for (i = 0; i < NPM_CC_COUNT; i++)
		if (in_list(avail, cc_names[i])) {
			fprintf(stderr, "netperfmeter-cc-loader: %s is still registered\n", cc_names[i]);
			left++;
		}
	if (!s.unregistered && !left)
		printf("nothing to unregister\n");
	return (left || s.errors) ? 1 : 0;
}

static int cmd_start(void)
{
	char avail[1024] = "";
	struct npm_cc_bpf *skel = NULL;
	struct bpf_object *obj;
	const char *path = getenv("NPM_CC_LOADER_OBJECT"); /* test hook */
	int i, rc, err, todo = 0;
	int need[NPM_CC_COUNT];

	rc = check_env(1);
	if (rc)
		return rc;
	read_line(AVAILABLE_PATH, avail, sizeof(avail));
	for (i = 0; i < NPM_CC_COUNT; i++) {
		need[i] = !in_list(avail, cc_names[i]);
		todo += need[i];
		if (!need[i])
			printf("%s already registered\n", cc_names[i]);
	}
	if (todo) {
		if (path) {
			obj = bpf_object__open_file(path, NULL);
			err = libbpf_get_error(obj);
			if (err) {
				fprintf(stderr, "netperfmeter-cc-loader: cannot open %s: %s\n", path, strerror(-err));
				return 1;
			}
		} else {
			skel = npm_cc_bpf__open();
			if (!skel) {
				fprintf(stderr,
					"netperfmeter-cc-loader: cannot open the BPF "
					"object: %s\n",
					strerror(errno));
				return 1;
			}
			obj = skel->obj;
		}
		err = bpf_object__load(obj);
		if (err) {
			int e = -err;
			if (log_buf && strstr(log_buf, "not found in kernel BTF")) {
				fprintf(stderr,
					"netperfmeter-cc-loader: kernel too old: a kfunc "
					"or type used by the congestion controls is missing "
					"(need Linux >= %d.%d with MPTCP)\n",
					MIN_MAJOR, MIN_MINOR);
				print_verifier_tail(5);
				rc = 2;
			} else if (e == EPERM) {
				fprintf(stderr, "netperfmeter-cc-loader: no CAP_BPF: permission "
						"denied loading the BPF programs (need CAP_BPF and "
						"CAP_PERFMON, or CAP_SYS_ADMIN)\n");
				rc = 4;
			} else if (log_buf && strstr(log_buf, "PROG LOAD LOG")) {
				fprintf(stderr,
					"netperfmeter-cc-loader: verifier rejected "
					"program '%s': %s\n",
					failed_prog(), strerror(e));
				print_verifier_tail(15);
				rc = 5;
			} else {
				fprintf(stderr,
					"netperfmeter-cc-loader: loading the BPF object "
					"failed: %s\n",
					strerror(e));
				print_verifier_tail(10);
				rc = 1;
			}
			goto out;
		}
		for (i = 0; i < NPM_CC_COUNT; i++) {
			struct bpf_map *map;
			struct bpf_link *link;

			if (!need[i])
				continue;
			map = bpf_object__find_map_by_name(obj, cc_names[i]);
			if (!map) {
				fprintf(stderr,
					"netperfmeter-cc-loader: %s missing in the BPF "
					"object\n",
					cc_names[i]);
				rc = 1;
				continue;
			}
			link = bpf_map__attach_struct_ops(map);
			if (!link) {
				fprintf(stderr, "netperfmeter-cc-loader: registering %s failed: %s\n", cc_names[i],
					strerror(errno));
				rc = 1;
				continue;
			}
			/* keep it registered after this process exits */
			bpf_link__disconnect(link);
			bpf_link__destroy(link);
			printf("registered %s\n", cc_names[i]);
		}
	}
	if (allow_all() != 0 && !rc)
		rc = 1;
out:
	if (skel)
		npm_cc_bpf__destroy(skel);
	else if (todo)
		bpf_object__close(obj);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: netperfmeter-cc-loader [--verbose] start|stop|status\n"
		   "  start   register npm_lia npm_olia npm_rpv1 npm_rpv2 and allow them\n"
		   "  stop    unregister them\n"
		   "  status  show what is registered and allowed (exit 3 if not all)\n"
		   "options:\n"
		   "  --verbose      print libbpf's messages\n"
		   "  -h, --help     this help\n"
		   "  -v, --version  version\n");
}

int main(int argc, char **argv)
{
	const char *command = NULL;
	int short_v = 0, version = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(a, "--verbose") == 0) {
			verbose = 1;
		} else if (strcmp(a, "-v") == 0) {
			short_v = 1;
		} else if (strcmp(a, "--version") == 0) {
			version = 1;
		} else if (a[0] != '-' && !command) {
			command = a;
		} else {
			fprintf(stderr, "netperfmeter-cc-loader: unexpected argument \"%s\" (see --help)\n", a);
			return 2;
		}
	}
	/* -v is --version, as in netperfmeter and the other programs; it used to be what
	 * --verbose is now, and "-v start" keeps that meaning for the scripts that wrote it. */
	if (version || (short_v && !command)) {
		printf("NetPerfMeter-CC-Loader %s\n", NPM_VERSION);
		return 0;
	}
	if (short_v) {
		fprintf(stderr, "netperfmeter-cc-loader: -v with a command is the old spelling of --verbose "
				"(-v alone prints the version)\n");
		verbose = 1;
	}
	if (!command) {
		usage(stderr);
		return 2;
	}
	libbpf_set_print(libbpf_log);
	if (strcmp(command, "start") == 0)
		return cmd_start();
	if (strcmp(command, "stop") == 0)
		return cmd_stop();
	if (strcmp(command, "status") == 0)
		return cmd_status();
	fprintf(stderr, "netperfmeter-cc-loader: unknown command \"%s\" (start, stop or status)\n", command);
	return 2;
}

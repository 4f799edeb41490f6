// SPDX-License-Identifier: MIT OR Apache-2.0
// Guest-side driver for one benchmark case: starts a tracer, times exec -> its "ready"
// line on the guest clock, runs steps while it traces, stops it, and reports. Static, so
// it runs the same in the guest and in the bpftrace chroot's neighbourhood.
//
// usage: harness [--ready STR] [--stdout FILE] [--log FILE] [--signal INT|TERM]
//                [--timeout SECS] STEP... -- TRACER ARGS...
// steps, run in order once the tracer printed a line containing STR ("Tracing" default):
//   --then CMD      run `sh -c CMD` (its stdout is ours), wait for it
//   --rss           print rss_hwm_kb=N (VmHWM of the tracer from /proc/PID/status)
//   --stopped CMD   SIGSTOP the tracer, run CMD, then send the stop signal and SIGCONT and
//                   wait: prints drain_ns (signal -> exit), the time to consume what CMD
//                   produced while the tracer could not run (plus the fixed stop cost)
// The tracer's stdout (unless --stdout) and stderr go to a pipe the harness reads; all of
// it ends up in --log. At the end (if still running) the tracer gets the stop signal.
// prints: attach_ns=N ... stop_ns=N exit=N maxrss_kb=N (ru_maxrss from wait4)
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int pipe_rd = -1, log_fd = -1;
static pid_t tracer_pid = -1, spinner_pid = -1;

/*
 * Under -icount with sleep=off an idle guest's clock jumps to the next timer deadline,
 * however far: a tracer that waits for the host (a file read over virtiofs) can lose
 * seconds of guest time at random. While the harness waits for the tracer, a SCHED_IDLE
 * spinner keeps the CPU busy instead, so such a wait costs about what it costs in real
 * time; when the tracer has work, the spinner gets a negligible share of the CPU.
 */
static void spin_start(void)
{
	if (spinner_pid > 0)
		return;
	spinner_pid = fork();
	if (spinner_pid == 0) {
		struct sched_param sp = {0};
		sched_setscheduler(0, SCHED_IDLE, &sp);
		for (volatile unsigned long i = 0;; i++)
			;
	}
}

static void spin_stop(void)
{
	if (spinner_pid > 0) {
		kill(spinner_pid, SIGKILL);
		waitpid(spinner_pid, NULL, 0);
	}
	spinner_pid = -1;
}

/* --timeout: never leave a tracer attached behind us. */
static void on_alarm(int sig)
{
	(void)sig;
	if (spinner_pid > 0)
		kill(spinner_pid, SIGKILL);
	if (tracer_pid > 0)
		kill(tracer_pid, SIGKILL);
	static const char msg[] = "harness: timed out; tracer killed\n";
	if (write(2, msg, sizeof(msg) - 1) < 0) {
	}
	_exit(124);
}

/* After the ready line: copy whatever else the tracer prints to the log. */
static void *drain(void *arg)
{
	(void)arg;
	char buf[65536];
	ssize_t n;
	while ((n = read(pipe_rd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
		if (n > 0 && log_fd >= 0 && write(log_fd, buf, n) < 0)
			break;
	return NULL;
}

static int run_sh(const char *cmd)
{
	pid_t pid;
	char *argv[] = {"sh", "-c", (char *)cmd, NULL};
	if (posix_spawn(&pid, "/bin/sh", NULL, NULL, argv, environ))
		return -1;
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void print_hwm(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmHWM:", 6))
			printf("rss_hwm_kb=%lld\n", atoll(line + 6));
	fclose(f);
}

static void usage(void)
{
	fprintf(stderr, "usage: harness [--ready STR] [--stdout FILE] [--log FILE] "
			"[--signal INT|TERM] [--timeout S] [--then CMD|--rss|--stopped CMD]... "
			"-- TRACER ARGS...\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *ready = "Tracing", *out_path = NULL, *log_path = NULL;
	int stop_sig = SIGTERM, timeout_s = 120;
	struct step { char kind; const char *arg; } steps[64];
	int nsteps = 0, i;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		int more = i + 1 < argc;
		if (!strcmp(a, "--")) { i++; break; }
		else if (!strcmp(a, "--ready") && more) ready = argv[++i];
		else if (!strcmp(a, "--stdout") && more) out_path = argv[++i];
		else if (!strcmp(a, "--log") && more) log_path = argv[++i];
		else if (!strcmp(a, "--timeout") && more) timeout_s = atoi(argv[++i]);
		else if (!strcmp(a, "--signal") && more) {
			stop_sig = !strcmp(argv[++i], "INT") ? SIGINT : SIGTERM;
		} else if (!strcmp(a, "--then") && more && nsteps < 64)
			steps[nsteps++] = (struct step){'t', argv[++i]};
		else if (!strcmp(a, "--stopped") && more && nsteps < 64)
			steps[nsteps++] = (struct step){'s', argv[++i]};
		else if (!strcmp(a, "--rss") && nsteps < 64)
			steps[nsteps++] = (struct step){'r', NULL};
		else usage();
	}
	if (i >= argc)
		usage();
	char **tracer = argv + i;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (log_path && (log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0) {
		perror(log_path);
		return 1;
	}

	/* The spinner first, so that it holds no end of the pipe. */
	signal(SIGALRM, on_alarm);
	spin_start();
	int p[2];
	if (pipe2(p, O_CLOEXEC)) {
		perror("pipe");
		return 1;
	}
	pipe_rd = p[0];
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 2);
	if (out_path)
		posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	else
		posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);

	pid_t pid;
	long long t0 = now_ns();
	int err = posix_spawnp(&pid, tracer[0], &fa, NULL, tracer, environ);
	if (err) {
		spin_stop();
		fprintf(stderr, "harness: cannot start %s: %s\n", tracer[0], strerror(err));
		return 1;
	}
	tracer_pid = pid;
	close(p[1]);

	/* Read lines until the ready mark. Byte by byte: nothing past it is consumed here. */
	char line[4096];
	size_t len = 0;
	long long attach_ns = -1;
	int status, exited = 0;
	alarm(timeout_s); /* a tracer that never gets ready: SIGALRM ends the harness */
	for (;;) {
		char c;
		ssize_t n = read(pipe_rd, &c, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (log_fd >= 0 && write(log_fd, &c, 1) < 0)
			break;
		if (c != '\n' && len + 1 < sizeof(line)) {
			line[len++] = c;
			continue;
		}
		line[len] = 0;
		len = 0;
		if (strstr(line, ready)) {
			attach_ns = now_ns() - t0;
			break;
		}
	}
	spin_stop();
	if (attach_ns < 0) {
		fprintf(stderr, "harness: %s ended or failed before printing '%s'\n", tracer[0], ready);
		kill(pid, SIGKILL);
		drain(NULL);
		waitpid(pid, &status, 0);
		printf("attach_ns=-1 exit=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
		return 1;
	}
	printf("attach_ns=%lld\n", attach_ns);
	pthread_t th;
	pthread_create(&th, NULL, drain, NULL);
	alarm(0);

	struct rusage ru;
	long long stop_ns = -1;
	for (int s = 0; s < nsteps; s++) {
		switch (steps[s].kind) {
		case 't': {
			int rc = run_sh(steps[s].arg);
			if (rc)
				fprintf(stderr, "harness: step '%s' exited %d\n", steps[s].arg, rc);
			break;
		}
		case 'r':
			print_hwm(pid);
			break;
		case 's': {
			kill(pid, SIGSTOP);
			int rc = run_sh(steps[s].arg);
			if (rc)
				fprintf(stderr, "harness: step '%s' exited %d\n", steps[s].arg, rc);
			spin_start();
			alarm(timeout_s);
			long long t = now_ns();
			kill(pid, stop_sig);
			kill(pid, SIGCONT);
			while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR)
				;
			long long d = now_ns() - t;
			spin_stop();
			printf("drain_ns=%lld\n", d);
			exited = 1;
			break;
		}
		}
		if (exited)
			break;
	}
	if (!exited) {
		spin_start();
		long long t = now_ns();
		kill(pid, stop_sig);
		alarm(timeout_s);
		while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR)
			;
		stop_ns = now_ns() - t;
		spin_stop();
		printf("stop_ns=%lld\n", stop_ns);
	}
	pthread_join(th, NULL);
	printf("exit=%d maxrss_kb=%ld cpu_user_us=%lld cpu_sys_us=%lld\n",
	       WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), ru.ru_maxrss,
	       ru.ru_utime.tv_sec * 1000000LL + ru.ru_utime.tv_usec,
	       ru.ru_stime.tv_sec * 1000000LL + ru.ru_stime.tv_usec);
	return 0;
}

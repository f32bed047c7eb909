/* The launcher of bench/hook_bench.mjs: runs one hook process and measures it exactly, without
 * Node.js on the clock.
 *
 *   hook_spawn STDIN_FILE STDOUT_FILE STDERR_FILE PROGRAM [ARGS...]
 *
 * Forks, gives the child STDIN_FILE on a pipe (as hosts do: Claude Code writes the payload to
 * the hook's stdin and closes it), STDOUT_FILE and STDERR_FILE as stdout and stderr, execs PROGRAM,
 * writes the payload, waits for it with wait4. Prints one line:
 *
 *   <wall_us> <maxrss_kib> <exit_status> <user_us> <sys_us>
 *
 * wall: CLOCK_MONOTONIC from just before fork() to wait4()'s return (fork, exec, dynamic
 * linking, the hook's work, exit). maxrss: the child's ru_maxrss (peak resident set, KiB), as
 * /usr/bin/time -f %M reports it. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: hook_spawn STDIN_FILE STDOUT_FILE STDERR_FILE PROGRAM [ARGS...]\n");
    return 2;
  }
  int in = open(argv[1], O_RDONLY);
  if (in < 0) {
    perror(argv[1]);
    return 2;
  }
  struct stat st;
  fstat(in, &st);
  char* payload = malloc((size_t)st.st_size + 1);
  ssize_t got = read(in, payload, (size_t)st.st_size);
  close(in);
  if (got != st.st_size) {
    fprintf(stderr, "short read of %s\n", argv[1]);
    return 2;
  }
  int out = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (out < 0) {
    perror(argv[2]);
    return 2;
  }
  int err = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (err < 0) {
    perror(argv[3]);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    perror("pipe");
    return 2;
  }
  long long start = now_us();
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    return 2;
  }
  if (pid == 0) {
    dup2(fds[0], 0);
    dup2(out, 1);
    dup2(err, 2);
    execvp(argv[4], argv + 4);
    _exit(127);
  }
  close(fds[0]);
  size_t off = 0;
  while (off < (size_t)got) {
    ssize_t w = write(fds[1], payload + off, (size_t)got - off);
    if (w <= 0) break; /* the hook closed its stdin early: fine */
    off += (size_t)w;
  }
  close(fds[1]);
  int status = 0;
  struct rusage ru;
  memset(&ru, 0, sizeof ru);
  if (wait4(pid, &status, 0, &ru) < 0) {
    perror("wait4");
    return 2;
  }
  long long wall = now_us() - start;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  printf("%lld %ld %d %lld %lld\n", wall, ru.ru_maxrss, code,
         (long long)ru.ru_utime.tv_sec * 1000000LL + ru.ru_utime.tv_usec,
         (long long)ru.ru_stime.tv_sec * 1000000LL + ru.ru_stime.tv_usec);
  return 0;
}

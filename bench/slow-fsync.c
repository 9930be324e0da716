/* A model of a slower disk for `scripts/bench` (FSYNC_DELAY_US=N): preloaded into
 * ZooKeeper's JVM, it makes every fsync and fdatasync take N microseconds longer, as a
 * cloud volume or a spinning disk would. ZooKeeper flushes its transaction log with one of
 * these per batch of writes, so the figures then show what the writes per operation cost
 * where a flush is not almost free, as it is on this machine's disk. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

static void pause_before_flush(void) {
    static long delay_us = -1;
    if (delay_us < 0) {
        const char *set = getenv("FSYNC_DELAY_US");
        delay_us = set ? atol(set) : 0;
    }
    if (delay_us > 0) {
        struct timespec pause = {delay_us / 1000000, (delay_us % 1000000) * 1000};
        nanosleep(&pause, 0);
    }
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    pause_before_flush();
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    pause_before_flush();
    return real(fd);
}

/* Loaded before Debian 12's libfaketime 0.9.10 by tests/chaos/scenarios_clock.py.
 *
 * With FAKETIME_DONT_FAKE_MONOTONIC=1 (only the wall clock is faked, as an NTP step moves only
 * CLOCK_REALTIME), libfaketime still shifts an absolute clock_nanosleep deadline on the
 * monotonic clock by the wall clock's epoch, so the kernel gets a negative time and answers
 * EINVAL: CPython's time.sleep (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)) fails. This
 * passes sleeps on every clock but CLOCK_REALTIME straight to the kernel (those clocks are not
 * faked, so nothing needs converting) and leaves CLOCK_REALTIME sleeps to libfaketime. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int clock_nanosleep(clockid_t clock, int flags, const struct timespec *req, struct timespec *rem) {
    if (clock == CLOCK_REALTIME) {
        int (*next)(clockid_t, int, const struct timespec *, struct timespec *) =
            (int (*)(clockid_t, int, const struct timespec *, struct timespec *))dlsym(RTLD_NEXT, "clock_nanosleep");
        if (next != NULL)
            return next(clock, flags, req, rem);
    }
    if (syscall(SYS_clock_nanosleep, clock, flags, req, rem) == -1)
        return errno;
    return 0;
}

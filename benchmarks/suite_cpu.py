"""CPU seconds of a command and of every process it starts, the ones it leaves unwaited
included (pyspark does not wait for its JVM): the README's test-suite cost.

usage: python benchmarks/suite_cpu.py python -m pytest -q -p no:xdist tests
Prints one line on stderr: exit code, wall seconds, user, sys and user+sys CPU seconds.
This process makes itself a child subreaper (Linux prctl PR_SET_CHILD_SUBREAPER), so the
orphans of the command are reparented to it and reaped here; their CPU then counts in
RUSAGE_CHILDREN. CPU seconds, unlike wall time, barely move with what else the machine
runs; on N free cores `-n N` takes at least cpu_s / N.
"""
import ctypes
import os
import resource
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def main(argv):
    if not argv:
        sys.exit(__doc__.split("\n\n")[1])
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.execvp(argv[0], argv)
    rc = None
    while True:
        try:
            p, status = os.wait()
        except ChildProcessError:
            break
        if p == pid:
            rc = os.waitstatus_to_exitcode(status)
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"suite_cpu: rc={rc} wall_s={time.monotonic() - t0:.1f} user_s={ru.ru_utime:.1f} "
          f"sys_s={ru.ru_stime:.1f} cpu_s={ru.ru_utime + ru.ru_stime:.1f}", file=sys.stderr)
    return rc or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

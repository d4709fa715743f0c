"""How many trials run at once by default (``--jobs auto``).

A trial mostly waits (for a failpoint, a lease to run out, a worker to finish), so its
cost is what it holds while it waits, not a core: the processes it starts (two or three
workers and a provider, each a Python process), the file descriptors the harness keeps
open for it (provider and ledger connections, the failpoint socket, log files, pipes) and
the ports it listens on (its provider, its proxies). The default is the most trials
those resources allow at once, with a share of each left for everything else, and never
more trials than the run has cells:

    jobs = min(cells, MAX_AUTO_JOBS, TRIALS_PER_CPU * usable CPUs,
               available memory / 2 / memory per trial,
               open-file limit / 2 / descriptors per trial,
               local port range / 4 / ports per trial)

The CPUs bound it too, loosely: waits overlap, but every trial starts its processes
(workers, an enqueue command per delivery) on the same cores, and past a few trials a
core those starts queue up behind the bounds a target declared (its lease).

A container costs more than a process (the runtime's shim beside each one), so a trial
on the docker backend counts more memory. ``-j N`` overrides the rule.
"""

from __future__ import annotations

import contextlib
import os
import resource
from pathlib import Path

#: Resident memory of one trial on the process backend: up to three workers and a
#: provider at about 25 MiB each (measured), with room for the harness's share.
TRIAL_MEMORY_B = {"process": 128 << 20, "docker": 256 << 20}
#: Descriptors the harness holds for one trial: connections, sockets, logs, pipes.
TRIAL_FDS = 64
#: Ports one trial listens on: its providers and its proxies.
TRIAL_PORTS = 4
#: The widest default. Past it a trial's waits no longer overlap with anything to gain
#: (a full matrix is a few dozen cells), while every trial started at once is another
#: set of processes starting together.
MAX_AUTO_JOBS = 16
#: Trials per usable CPU. On two cores, 16 trials at once slowed the node example's
#: enqueue command past half its 0.5 s lease, and 3 runs of its matrix in 10 ended with an
#: inconclusive duplicate_delivery cell; at 8 none of 10 did, in as much time (about 28 s).
TRIALS_PER_CPU = 4


def auto_jobs(n_cells: int, *, backend: str = "process") -> int:
    """The default width for ``n_cells`` trials on ``backend`` (see the module doc)."""
    memory = _available_memory_b() // 2 // TRIAL_MEMORY_B.get(backend, TRIAL_MEMORY_B["docker"])
    fds = _open_file_limit() // 2 // TRIAL_FDS
    ports = _local_ports() // 4 // TRIAL_PORTS
    cpus = TRIALS_PER_CPU * _usable_cpus()
    return max(1, min(n_cells, MAX_AUTO_JOBS, cpus, memory, fds, ports))


def resolve_jobs(jobs: int | None, n_cells: int, *, backend: str = "process") -> int:
    """``jobs`` as given (``-j N``), or the default for the run when None (auto)."""
    return jobs if jobs is not None else auto_jobs(n_cells, backend=backend)


def _available_memory_b() -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def _usable_cpus() -> int:
    """The CPUs this process may run on (a container's or taskset's share, not the host's)."""
    with contextlib.suppress(AttributeError, OSError):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _open_file_limit() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 16


def _local_ports() -> int:
    with contextlib.suppress(OSError, ValueError):
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(high) - int(low) + 1
    return 28_232  # Linux's default range

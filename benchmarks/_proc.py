"""Process and machine probes shared by the benchmark scripts (Linux ``/proc``; not a benchmark itself:
the leading underscore keeps it out of ``python -m benchmarks``): memory and CPU time.

RSS counts every resident page a process maps; PSS splits each shared page between the processes
that map it (so PSS summed over processes is their real footprint); USS is the private part (what
the process frees when it exits).
"""

from __future__ import annotations

import os
import statistics

GB = 1024**3
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_times_total() -> tuple[float, float]:
    """(busy, total) jiffies of all cores since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    total = sum(fields[:8])  # guest time is already inside user
    return total - idle, total


def process_cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds (all threads) of the processes (0 for one that is gone)."""
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime
        except OSError:
            pass
    return total


def mem_available_gb() -> float:
    """MemAvailable of this machine in GiB (/proc/meminfo)."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024 / GB
    return float("nan")


def smaps_mb(pid: int) -> dict[str, float] | None:
    """RSS, PSS (shared pages split between their users) and USS (private pages) of a process in
    MiB (``/proc/<pid>/smaps_rollup``); None for a process that is gone or not readable."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            kb = {line.split(":")[0]: int(line.split()[1]) for line in f if line.split()[-1] == "kB"}
    except OSError:
        return None
    return {"rss": kb["Rss"] / 1024, "pss": kb["Pss"] / 1024, "uss": (kb["Private_Clean"] + kb["Private_Dirty"]) / 1024}


def runner_memory_mb(pids: list[int], prefix: str = "runner") -> dict[str, float | None]:
    """Medians over the processes of RSS, PSS and USS: ``{prefix}_rss_mb`` etc. (None when none is readable)."""
    infos = [m for m in map(smaps_mb, pids) if m]
    return {
        f"{prefix}_{k}_mb": round(statistics.median(m[k] for m in infos), 1) if infos else None
        for k in ("rss", "pss", "uss")
    }


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (e.g. a ``ray.cluster_utils.Cluster``'s nodes and their workers)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out

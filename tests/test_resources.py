"""The CPU and memory a process may really use (kvlab.resources), read from fake /proc and cgroup trees: each
source alone, the smallest winning, cgroup v1, v2 and the v1/v2 hybrid, ancestors' quotas, and every malformed,
missing or "max" file giving no limit (never a crash, never 0 threads)."""
import os

import pytest
import torch

from kvlab import measure, resources
from kvlab.device import available_memory

NODE_CORES = 16


@pytest.fixture(autouse=True)
def node_of_16_cores(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(NODE_CORES)), raising=False)


def write(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def v2_tree(root, cpu_max=None, memory_max=None, own="/kubepods/pod1/c1", parent_cpu_max=None):
    """A pure cgroup v2 machine (a recent Kubernetes node): one unified hierarchy at /sys/fs/cgroup."""
    write(root, "proc/self/cgroup", f"0::{own}\n")
    write(root, "proc/self/mountinfo", "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n")
    own_dir = "sys/fs/cgroup" + own
    (root / own_dir).mkdir(parents=True, exist_ok=True)
    if cpu_max is not None:
        write(root, own_dir + "/cpu.max", cpu_max)
    if memory_max is not None:
        write(root, own_dir + "/memory.max", memory_max)
    if parent_cpu_max is not None:
        write(root, "sys/fs/cgroup/kubepods/pod1/cpu.max", parent_cpu_max)


def hybrid_tree(root, quota="-1", period="100000", limit="9223372036854771712", own="/docker/abc"):
    """v1 controllers with an empty v2 hierarchy at /sys/fs/cgroup/unified (this course's own CI machine)."""
    write(root, "proc/self/cgroup", f"4:memory:{own}\n2:cpu,cpuacct:{own}\n1:name=systemd:/\n0::/\n")
    write(root, "proc/self/mountinfo",
          "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n"
          "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
          "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
          "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n")
    write(root, "sys/fs/cgroup/unified/cgroup.procs", "")
    write(root, f"sys/fs/cgroup/cpu,cpuacct{own}/cpu.cfs_quota_us", quota)
    write(root, f"sys/fs/cgroup/cpu,cpuacct{own}/cpu.cfs_period_us", period)
    write(root, f"sys/fs/cgroup/memory{own}/memory.limit_in_bytes", limit)


def test_no_cgroup_files_no_env_is_the_affinity_mask(tmp_path):
    budget = resources.cpu_budget(tmp_path, env={})
    assert (budget.value, budget.source) == (NODE_CORES, "CPU 亲和性")
    assert resources.memory_limit(tmp_path, env={}) is None


@pytest.mark.parametrize("cpu_max, cpus", [("100000 100000", 1), ("50000 100000", 1), ("250000 100000", 2),
                                           ("400000 100000", 4), ("max 100000", NODE_CORES), ("", NODE_CORES),
                                           ("garbage", NODE_CORES), ("-1 100000", NODE_CORES),
                                           ("100000 0", NODE_CORES), ("nan 100000", NODE_CORES)])
def test_cgroup_v2_cpu_max(tmp_path, cpu_max, cpus):
    v2_tree(tmp_path, cpu_max=cpu_max)
    assert resources.cpu_budget(tmp_path, env={}).value == cpus


def test_an_ancestors_quota_counts(tmp_path):
    v2_tree(tmp_path, cpu_max="max 100000", parent_cpu_max="200000 100000")
    budget = resources.cpu_budget(tmp_path, env={})
    assert (budget.value, budget.source) == (2, "cgroup CPU 配额")


def test_the_own_cgroup_missing_under_the_mount_falls_back_to_ancestors(tmp_path):
    """In a cgroup namespace /proc/self/cgroup can name a path that the mount does not show."""
    v2_tree(tmp_path, own="/")
    write(tmp_path, "sys/fs/cgroup/cpu.max", "100000 100000")
    write(tmp_path, "proc/self/cgroup", "0::/not/visible/here\n")
    assert resources.cpu_budget(tmp_path, env={}).value == 1


@pytest.mark.parametrize("quota, period, cpus", [("100000", "100000", 1), ("150000", "100000", 1),
                                                 ("300000", "100000", 3), ("-1", "100000", NODE_CORES),
                                                 ("100000", "", NODE_CORES)])
def test_cgroup_v1_hybrid_quota(tmp_path, quota, period, cpus):
    hybrid_tree(tmp_path, quota=quota, period=period)
    assert resources.cpu_budget(tmp_path, env={}).value == cpus


def test_unreadable_files_give_no_limit(tmp_path):
    hybrid_tree(tmp_path)
    (tmp_path / "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us").unlink()
    (tmp_path / "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us").mkdir()  # reading it raises IsADirectory
    assert resources.cpu_budget(tmp_path, env={}).value == NODE_CORES


@pytest.mark.parametrize("env, cpus, source", [
    ({"CPU_LIMIT": "1.0"}, 1, "JupyterHub 的 CPU_LIMIT"), ({"CPU_LIMIT": "0.5"}, 1, "JupyterHub 的 CPU_LIMIT"),
    ({"CPU_LIMIT": "2.7"}, 2, "JupyterHub 的 CPU_LIMIT"), ({"CPU_LIMIT": "0"}, NODE_CORES, "CPU 亲和性"),
    ({"CPU_LIMIT": "lots"}, NODE_CORES, "CPU 亲和性"), ({"OMP_NUM_THREADS": "3"}, 3, "OMP_NUM_THREADS"),
    ({"OMP_NUM_THREADS": "0"}, NODE_CORES, "CPU 亲和性"), ({"KVLAB_THREADS": "4", "OMP_NUM_THREADS": "2"}, 4,
                                                             "KVLAB_THREADS"),
    ({"KVLAB_THREADS": "-2"}, NODE_CORES, "CPU 亲和性"), ({"KVLAB_THREADS": "64"}, NODE_CORES, "CPU 亲和性"),
])
def test_environment_sources(tmp_path, env, cpus, source):
    budget = resources.cpu_budget(tmp_path, env=env)
    assert (budget.value, budget.source) == (cpus, source)


def test_the_smallest_source_wins(tmp_path):
    hybrid_tree(tmp_path, quota="300000")
    assert resources.cpu_budget(tmp_path, env={"CPU_LIMIT": "2"}).value == 2
    assert resources.cpu_budget(tmp_path, env={"CPU_LIMIT": "8"}).value == 3
    assert resources.cpu_budget(tmp_path, env={"CPU_LIMIT": "8", "KVLAB_THREADS": "1"}).source == "KVLAB_THREADS"


@pytest.mark.parametrize("tree, env, expected", [
    (lambda r: v2_tree(r, memory_max="2147483648"), {}, 2 * 2**30),
    (lambda r: v2_tree(r, memory_max="max"), {}, None),
    (lambda r: hybrid_tree(r, limit="1073741824"), {}, 2**30),
    (lambda r: hybrid_tree(r), {}, None),  # v1's "no limit" is a huge number
    (lambda r: hybrid_tree(r), {"MEM_LIMIT": "2147483648"}, 2 * 2**30),
    (lambda r: hybrid_tree(r, limit="1073741824"), {"MEM_LIMIT": "2147483648"}, 2**30),
    (lambda r: None, {"MEM_LIMIT": "not a number"}, None),
])
def test_memory_limit(tmp_path, tree, env, expected):
    tree(tmp_path)
    limit = resources.memory_limit(tmp_path, env=env)
    assert (limit.value if limit else None) == expected


def test_a_pod_limit_lowers_what_the_fit_checks_see(monkeypatch):
    """/proc/meminfo shows the node's memory inside a pod: the fit checks must see the pod's limit instead."""
    node = available_memory("cpu")
    monkeypatch.setenv("MEM_LIMIT", str(2 * 2**30))
    pod = available_memory("cpu")
    assert pod <= 2 * 2**30 - resources.resident_bytes() + 1
    assert pod <= node


def test_peak_resident_is_read():
    assert resources.peak_resident_bytes() >= resources.resident_bytes() > 10 * 2**20


def test_timing_threads_leave_a_core_unless_the_user_set_a_count(monkeypatch):
    monkeypatch.setattr(measure, "cpu_budget", lambda: resources.Limit(4, "cgroup CPU 配额"))
    monkeypatch.setattr(measure, "user_threads", lambda: None)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 16)
    assert measure.measurement_threads() == 3
    assert "本进程可用 4 核，来自 cgroup CPU 配额" in measure.device_label("cpu")
    monkeypatch.setattr(measure, "user_threads", lambda: resources.Limit(4, "KVLAB_THREADS"))
    assert measure.measurement_threads() == 4
    assert "按 KVLAB_THREADS=4" in measure.device_label("cpu")
    monkeypatch.setattr(measure, "cpu_budget", lambda: resources.Limit(1, "JupyterHub 的 CPU_LIMIT"))
    monkeypatch.setattr(measure, "user_threads", lambda: None)
    assert measure.measurement_threads() == 1  # never 0


def test_a_quota_of_one_cpu_gives_one_thread_in_a_fresh_process(tmp_path):
    """The whole path, in a new interpreter: CPU_LIMIT=1 (what a hub exports) -> torch runs 1 thread."""
    import subprocess
    import sys

    env = {**os.environ, "CPU_LIMIT": "1"}
    env.pop("OMP_NUM_THREADS", None)
    env.pop("KVLAB_THREADS", None)
    out = subprocess.run([sys.executable, "-c", "import kvlab, torch; from kvlab.measure import measurement_threads;"
                          "print(torch.get_num_threads(), measurement_threads())"],
                         env=env, capture_output=True, text=True, check=True).stdout.split()
    assert out == ["1", "1"]


# -- the words for the readouts, in the course's language (issue 34) -------------------------------------------
def test_where_a_limit_was_read_is_said_in_the_course_language(tmp_path):
    from kvlab.language import using_language

    v2_tree(tmp_path, cpu_max="200000 100000", memory_max=str(2**30))
    with using_language("en"):
        assert resources.cpu_budget(tmp_path, env={}).source == "cgroup CPU quota"
        assert resources.memory_limit(tmp_path, env={}).source == "cgroup memory limit"
        assert resources.cpu_budget(tmp_path, env={"CPU_LIMIT": "1"}).source == "JupyterHub's CPU_LIMIT"
        assert resources.memory_limit(tmp_path, env={"MEM_LIMIT": "1000"}).source == "JupyterHub's MEM_LIMIT"
        assert resources.cpu_budget(tmp_path / "nothing", env={}).source == "CPU affinity"
        assert resources.cpu_budget(tmp_path, env={"KVLAB_THREADS": "1"}).source == "KVLAB_THREADS"  # named as set
    assert resources.cpu_budget(tmp_path, env={}).source == "cgroup CPU 配额"  # Chinese again, as before


def test_the_readouts_say_how_a_number_was_measured_in_either_language(monkeypatch):
    from kvlab.language import using_language

    monkeypatch.setattr(measure, "cpu_budget", lambda: resources.Limit(2, resources.SOURCES.say("affinity")))
    monkeypatch.setattr(measure, "user_threads", lambda: None)
    assert measure.threads_source() == "本进程可用 2 核，来自 CPU 亲和性；留一核给浏览器和 Jupyter"
    assert measure.device_label("cpu", threads=1) == "cpu，计时用 1 个线程（本进程可用 2 核，来自 CPU 亲和性；留一核给浏览器和 Jupyter）"
    with using_language("en"):
        assert measure.threads_source() == ("2 cores available to this process, from CPU affinity; one core left for "
                                            "the browser and Jupyter")
        assert measure.device_label("cpu", threads=1).startswith("CPU, timed on 1 thread (2 cores available")
        assert measure.device_label("cpu", threads=3).startswith("CPU, timed on 3 threads (")
        assert measure.measure_matmul_flops("cpu", n=64, repeats=1).what == "a 64×64 float32 matmul"
        assert measure.measure_read_bandwidth("cpu", nbytes=2**20, repeats=1).what == "summing a 1 MiB float32 array"
        monkeypatch.setattr(measure, "cpu_budget", lambda: resources.Limit(1, "KVLAB_THREADS"))
        monkeypatch.setattr(measure, "user_threads", lambda: resources.Limit(1, "KVLAB_THREADS"))
        assert measure.threads_source() == "as KVLAB_THREADS=1 says"


def test_a_language_variable_naming_no_language_does_not_stop_the_import(monkeypatch):
    """kvlab applies the thread budget when it is imported; a bad KVLAB_LANG is refused when something is said."""
    import kvlab.language as lang_mod

    monkeypatch.setattr(lang_mod, "_chosen", [])
    monkeypatch.setenv("KVLAB_LANG", "xx")
    assert resources.apply_thread_budget().value >= 1
    with pytest.raises(ValueError, match="KVLAB_LANG"):
        resources.cpu_budget()

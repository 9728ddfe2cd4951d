"""The real NVML on a machine with an NVIDIA GPU: what ietop reads is what nvidia-smi reads.

Skipped without a GPU; the fake-driven tests in test_gpu.py cover the error paths everywhere else.
"""

from __future__ import annotations

import pytest

from ietop.sources.gpu import Nvml
from tests.gpu_support import HELD_BYTES, MIB, GpuMemoryHolder, have_gpu, smi_gpus, smi_processes

pytestmark = pytest.mark.skipif(not have_gpu(), reason="needs an NVIDIA GPU and nvidia-smi")


def test_nvml_reads_what_nvidia_smi_reads() -> None:
    nvml = Nvml()
    assert nvml.start() is None
    try:
        before = nvml.sample()
        with GpuMemoryHolder() as holder:
            ours = nvml.sample()
            smi = smi_gpus()
            smi_procs = smi_processes()
    finally:
        nvml.close()

    assert [(g.index, g.uuid, g.name) for g in ours] == [(s.index, s.uuid, s.name) for s in smi]
    for g, s in zip(ours, smi, strict=True):
        assert g.memory_total is not None and abs(g.memory_total / MIB - s.memory_total_mib) <= 1
        # Read a few milliseconds apart, while only this test's child changes what is allocated.
        assert g.memory_used is not None and abs(g.memory_used / MIB - s.memory_used_mib) <= 64
        if s.temperature_c is not None:
            assert g.temperature_c is not None and abs(g.temperature_c - s.temperature_c) <= 3
        if s.power_limit_w is not None:
            assert g.power_limit_w is not None and abs(g.power_limit_w - s.power_limit_w) < 1
        assert g.util_percent is None or 0 <= g.util_percent <= 100
        assert g.power_w is None or 0 < g.power_w < 2000

    gpu0, was = ours[0], before[0]
    assert gpu0.memory_used is not None and was.memory_used is not None
    assert gpu0.memory_used - was.memory_used >= HELD_BYTES  # the child's 1 GiB, plus its context
    ours_pids = {p.pid: p.used_bytes for g in ours for p in g.processes}
    assert set(smi_procs) <= set(ours_pids), (smi_procs, ours_pids)
    if holder.pid in smi_procs:  # nvidia-smi and this test share a pid namespace (not always in containers)
        used = ours_pids[holder.pid]
        assert used is not None and used >= HELD_BYTES
        assert abs(used / MIB - smi_procs[holder.pid]) <= 2

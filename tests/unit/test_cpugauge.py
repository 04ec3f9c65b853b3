"""Whether the machine's cores have room, from the kernel's own CPU accounting (or the load average)."""

from __future__ import annotations

import time

from gleaner.stages import cpugauge
from gleaner.stages.cpugauge import CpuGauge


def stat(path, user: int, idle: int) -> None:
    # cpu  user nice system idle iowait irq softirq steal
    path.write_text(f"cpu  {user} 0 0 {idle} 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0\n")


def test_the_busy_share_is_that_of_the_ticks_since_the_reading_before(tmp_path, monkeypatch):
    monkeypatch.setattr(cpugauge, "PERIOD", 0.0)
    path = tmp_path / "stat"
    stat(path, user=100, idle=900)
    gauge = CpuGauge(str(path))
    assert gauge.busy() == 0.0  # one reading: nothing to compare with yet
    stat(path, user=190, idle=910)  # 90 busy ticks of 100
    assert abs(gauge.busy() - 0.9) < 1e-9
    stat(path, user=200, idle=1000)  # 10 of 100: an idle spell since
    assert abs(gauge.busy() - 0.1) < 1e-9


def test_readings_closer_than_the_period_give_the_last_share(tmp_path, monkeypatch):
    monkeypatch.setattr(cpugauge, "PERIOD", 60.0)
    path = tmp_path / "stat"
    stat(path, user=0, idle=100)
    gauge = CpuGauge(str(path))
    gauge.busy()
    stat(path, user=100, idle=100)
    assert gauge.busy() == 0.0  # not read again within the period: a hot path asks often


def test_without_proc_stat_the_load_average_stands_in(tmp_path, monkeypatch):
    monkeypatch.setattr(cpugauge, "PERIOD", 0.0)
    monkeypatch.setattr(cpugauge.os, "getloadavg", lambda: (3.0, 0.0, 0.0))
    monkeypatch.setattr(cpugauge.os, "cpu_count", lambda: 4)
    gauge = CpuGauge(str(tmp_path / "missing"))
    assert gauge.busy() == 0.75


def test_the_real_gauge_reads_a_share(monkeypatch):
    monkeypatch.setattr(cpugauge, "PERIOD", 0.0)
    gauge = CpuGauge()
    gauge.busy()
    time.sleep(0.05)
    assert 0.0 <= gauge.busy() <= 1.0

"""``./run gpu-check`` / ``python -m trace_report.capture.gpucheck``: the plan covers every
experiment with options the capture command accepts; --dry-run runs nothing; without CUDA the
check is refused with one Error: line; a run writes logs and a summary."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from test_capture_cli import assert_one_error_line

from trace_report.capture import gpucheck, runner
from trace_report.capture.__main__ import main as capture_main
from trace_report.capture.config import EXPERIMENTS, CaptureConfig, validate
from trace_report.capture.runner import NsightOutcome

REPO = Path(__file__).resolve().parents[2]
CAPTURE_ARGS = len(gpucheck.CAPTURE)


def dry_run(capsys, tmp_path: Path) -> list[list[str]]:
    code = gpucheck.main(["--dry-run", "--out-dir", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    return [shlex.split(line, comments=True) for line in out.splitlines()]


def test_dry_run_prints_every_experiment_on_cuda_and_runs_nothing(capsys, tmp_path):
    commands = dry_run(capsys, tmp_path)
    captures = [c for c in commands if c[:CAPTURE_ARGS] == gpucheck.CAPTURE]
    assert {c[CAPTURE_ARGS] for c in captures} == set(EXPERIMENTS)
    for argv in captures:
        assert argv[argv.index("--device") + 1] == "cuda"
        out_dir = Path(argv[argv.index("--out-dir") + 1])
        assert out_dir.parent == tmp_path and out_dir.name.startswith("gpu-check-")
    flags = {flag for c in captures for flag in c}
    assert {"--nsys", "--ncu", "--data-on-device", "--amp-dtype", "--compile-mode",
            "--nproc-list", "--repeats"} <= flags
    assert not any(tmp_path.iterdir())  # nothing ran, nothing written


def test_every_planned_capture_command_is_accepted_by_the_capture_cli(capsys, tmp_path,
                                                                      monkeypatch):
    seen: list[CaptureConfig] = []

    def fake_run(cfg: CaptureConfig):
        seen.append(validate(cfg))
        return NsightOutcome(tmp_path, [], printed_only=True)

    monkeypatch.setattr(runner, "run_capture", fake_run)
    captures = [c for c in dry_run(capsys, tmp_path) if c[:CAPTURE_ARGS] == gpucheck.CAPTURE]
    for argv in captures:
        assert capture_main(argv[CAPTURE_ARGS:]) == 0, capsys.readouterr().err
    assert len(seen) == len(captures)
    assert all(cfg.device == "cuda" and cfg.steps == 10 for cfg in seen)


def test_ddp_world_sizes_follow_the_gpu_count():
    assert gpucheck.world_sizes(0) == "1"
    assert gpucheck.world_sizes(1) == "1"
    assert gpucheck.world_sizes(4) == "1,2,4"
    assert gpucheck.world_sizes(8) == "1,2,4,8"


def test_without_cuda_it_is_one_error_line(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code = gpucheck.main(["--out-dir", str(tmp_path)])
    assert_one_error_line(code, capsys.readouterr().err, "needs a CUDA device", "--dry-run")
    assert not any(tmp_path.iterdir())


def test_bad_options_are_one_error_line(capsys, tmp_path):
    code = gpucheck.main(["--dry-run", "--steps", "2", "--out-dir", str(tmp_path)])
    assert_one_error_line(code, capsys.readouterr().err, "--steps must be at least 5")
    code = gpucheck.main(["--dry-run", "--only", "bogus", "--out-dir", str(tmp_path)])
    assert_one_error_line(code, capsys.readouterr().err, "no step named bogus")


def test_run_script_dry_run(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable, "TRACE_REPORT_VENV": str(tmp_path / "none")}
    done = subprocess.run(["bash", str(REPO / "run"), "gpu-check", "--dry-run", "--only",
                           "baseline,ncu", "--out-dir", str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and " -m trace_report.capture baseline " in lines[0]
    assert "--ncu" in lines[1] and lines[1].endswith("# needs ncu on PATH")


def test_a_run_writes_logs_and_a_summary(capsys, tmp_path, monkeypatch):
    py = sys.executable
    fake_plan = [
        gpucheck.Step("ok", [py, "-c", "print('fine')"]),
        gpucheck.Step("broken", [py, "-c", "import sys; print('Error: it broke'); sys.exit(3)"]),
        gpucheck.Step("tool", [py, "-c", "print(1)"], needs="no-such-binary-on-path"),
    ]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(gpucheck, "plan", lambda folder, steps, gpus: fake_plan)
    monkeypatch.setattr(gpucheck, "environment", lambda: {"gpus": ["fake"]})
    assert gpucheck.main(["--out-dir", str(tmp_path)]) == 1  # one step failed
    (folder,) = tmp_path.glob("gpu-check-*")
    summary = json.loads((folder / "summary.json").read_text())
    status = {s["name"]: (s["status"], s["rc"], s["reason"]) for s in summary["steps"]}
    assert status == {"ok": ("passed", 0, ""), "broken": ("failed", 3, "Error: it broke"),
                      "tool": ("skipped", None, "no-such-binary-on-path not on PATH")}
    assert "fine" in (folder / "logs" / "ok.log").read_text()
    assert "| broken | failed |" in (folder / "summary.md").read_text()
    assert "| broken | failed |" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["top-kernels", "breakdown", "flags"])
def test_the_analysis_steps_name_real_commands(command):
    from trace_report.cli.app import main

    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0


def assert_gone(pid: int) -> None:
    """``pid`` ends within 5 s: gone, or a zombie that init has not reaped yet."""
    for _ in range(100):
        stat = Path(f"/proc/{pid}/stat")
        try:
            if stat.read_text().split()[2] == "Z":
                return
        except (FileNotFoundError, ProcessLookupError):
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} still running")


def test_a_step_over_its_timeout_is_stopped_with_its_children(tmp_path):
    # The step starts a grandchild (as ncu starts the capture) that would outlive a plain kill.
    marker = tmp_path / "grandchild.pid"
    code = ("import subprocess, sys, time; "
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            f"open({str(marker)!r}, 'w').write(str(p.pid)); time.sleep(60)")
    step = gpucheck.Step("slow", [sys.executable, "-c", code])
    outcome = gpucheck.run_step(step, tmp_path, timeout_s=3)
    assert (outcome.status, outcome.rc, outcome.reason) == ("timeout", None, "over 3 s")
    assert 3 <= outcome.wall_s < 30
    assert_gone(int(marker.read_text()))


def test_an_interrupt_stops_the_step_and_keeps_the_summary(capsys, tmp_path, monkeypatch):
    py = sys.executable
    fake_plan = [gpucheck.Step("ok", [py, "-c", "print('fine')"]),
                 gpucheck.Step("long", [py, "-c", "import time; time.sleep(60)"])]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(gpucheck, "plan", lambda folder, steps, gpus: fake_plan)
    monkeypatch.setattr(gpucheck, "environment", lambda: {"gpus": ["fake"]})
    real_popen = subprocess.Popen

    class InterruptedWait(real_popen):  # Ctrl-C while the second step runs
        def wait(self, timeout=None):
            if timeout is not None and "sleep" in " ".join(self.args):
                raise KeyboardInterrupt
            return super().wait(timeout)

    monkeypatch.setattr(gpucheck.subprocess, "Popen", InterruptedWait)
    assert gpucheck.main(["--out-dir", str(tmp_path)]) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Interrupted" in err
    (folder,) = tmp_path.glob("gpu-check-*")
    steps = json.loads((folder / "summary.json").read_text())["steps"]
    assert [(s["name"], s["status"]) for s in steps] == [("ok", "passed"),
                                                         ("long", "interrupted")]


def test_a_timeout_reaches_workers_in_their_own_session_through_sigterm(tmp_path):
    # As torchrun does: the step starts its worker in a new session (out of the step's process
    # group) and passes SIGTERM on to it.
    marker = tmp_path / "worker.pid"
    code = ("import os, signal, subprocess, sys, time; "
            "w = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], "
            "start_new_session=True); "
            f"open({str(marker)!r}, 'w').write(str(w.pid)); "
            "signal.signal(signal.SIGTERM, lambda *a: (w.terminate(), w.wait(), sys.exit(143))); "
            "time.sleep(60)")
    outcome = gpucheck.run_step(gpucheck.Step("ddp-like", [sys.executable, "-c", code]), tmp_path,
                                timeout_s=3)
    assert outcome.status == "timeout" and outcome.wall_s < 30
    assert_gone(int(marker.read_text()))

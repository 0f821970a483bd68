"""The capture command's options: bad input gives one `Error:` line and exit 1; the Nsight
hooks print the exact command and refuse to run without their binary or a GPU."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
import torch

from trace_report.capture import nsight, runner
from trace_report.capture.__main__ import main
from trace_report.capture.config import CaptureConfig, validate
from trace_report.capture.profiling import CudaProfilerWindow
from trace_report.capture.runner import NsightOutcome, run_capture
from trace_report.errors import InputError, TraceReportError

TINY = ["--steps", "2", "--batch-size", "8", "--image-size", "16", "--wait", "0",
        "--warmup", "1", "--active", "1", "--synthetic-test", "16", "--threads", "1", "--no-progress"]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_error_line(code: int, err: str, *fragments: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 1
    assert len(lines) == 1 and lines[0].startswith("Error: "), err
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["bogus"], "experiment 'bogus'"),
        (["--model", "vgg16"], "--model 'vgg16'"),
        (["--optimizer", "lion"], "--optimizer 'lion'"),
        (["--device", "tpu"], "--device 'tpu'"),
        (["--batch-size", "0"], "--batch-size must be at least 1"),
        (["--lr", "-1"], "--lr must be greater than 0"),
        (["--threads", "0"], "--threads"),
        (["workers", "--workers-list", "1,a"], "--workers-list"),
        (["amp", "--batch-sizes", "0,8"], "--batch-sizes"),
        (["--dataset", "cifar10"], "needs --data-dir"),
        (["--dataset", "synthetic", "--download"], "--download applies only"),
        (["--steps", "3"], "profiler schedule needs 5"),
        (["--run-id", "../escape"], "--run-id"),
        (["--nsys", "--ncu"], "cannot be combined"),
        (["--print-command"], "add --nsys or --ncu"),
        (["no-bn", "--model", "alexnet"], "BatchNorm"),
    ],
)
def test_bad_options_give_one_error_line_and_exit_1(capsys, tmp_path, argv, fragment):
    code, _, err = run(capsys, *argv, "--out-dir", str(tmp_path), "--no-progress")
    assert_one_error_line(code, err, fragment)


def test_cuda_device_without_gpu_is_an_input_error(capsys, tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    code, _, err = run(capsys, "--device", "cuda", "--out-dir", str(tmp_path))
    assert_one_error_line(code, err, "no CUDA device")
    assert not any(tmp_path.iterdir())  # nothing written


def test_existing_run_folder_is_not_overwritten(capsys, tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("mine")
    code, _, err = run(capsys, "--run-id", "taken", "--out-dir", str(tmp_path))
    assert_one_error_line(code, err, "already exists")
    assert (tmp_path / "taken" / "keep.txt").read_text() == "mine"


def test_missing_cifar_is_not_downloaded_without_the_flag(capsys, tmp_path):
    code, _, err = run(capsys, "--dataset", "cifar10", "--data-dir", str(tmp_path / "none"),
                       "--out-dir", str(tmp_path / "out"), *TINY)
    assert_one_error_line(code, err, "CIFAR-10 not found", "--download")
    assert not (tmp_path / "none").exists()


def test_usage_errors_exit_2(capsys):
    code, _, err = run(capsys, "--steps", "many")
    assert code == 2 and err.startswith("Error: ") and "--steps" in err


def test_the_project_cli_maps_capture_errors(capsys):
    cli = pytest.importorskip("trace_report.cli.app")
    with pytest.raises(SystemExit) as done:
        cli.main(["capture", "bogus"])
    assert done.value.code == 1
    assert capsys.readouterr().err.strip().startswith("Error: experiment 'bogus'")


def test_print_command_nsys(capsys, tmp_path):
    code, out, _ = run(capsys, "--nsys", "--print-command", "--run-id", "r1", "--out-dir",
                       str(tmp_path), "--steps", "6")
    assert code == 0
    (line,) = out.splitlines()
    argv = shlex.split(line)
    assert argv[:2] == ["nsys", "profile"]
    assert "--capture-range=cudaProfilerApi" in argv
    assert "--trace=cuda,nvtx,cudnn,cublas" in argv
    assert argv[argv.index("--output") + 1] == str(tmp_path / "r1" / "r1")
    child = argv[argv.index(sys.executable):]
    assert child[1:4] == ["-m", "trace_report.capture", "baseline"]
    assert child[child.index("--steps"):child.index("--steps") + 2] == ["--steps", "6"]
    assert "--run-id" in child and "--cuda-profiler-range" in child
    assert "--nsys" not in child and "--print-command" not in child
    assert not (tmp_path / "r1").exists()  # printing runs nothing


def test_print_command_ncu_profiles_the_window_and_exports_csv(capsys, tmp_path):
    code, out, _ = run(capsys, "--ncu", "--print-command", "--run-id", "r2", "--out-dir",
                       str(tmp_path))
    assert code == 0
    profile, export = out.splitlines()
    argv = shlex.split(profile)
    assert argv[0] == "ncu" and argv[argv.index("--profile-from-start") + 1] == "off"
    assert argv[argv.index("--export") + 1] == str(tmp_path / "r2" / "r2")
    metrics = argv[argv.index("--metrics") + 1].split(",")
    assert {"gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
            "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"} <= set(metrics)
    assert "SpeedOfLight_RooflineChart" in argv and "InstructionStats" in argv  # tensor-core work
    assert "--nvtx" not in argv  # every kernel of the window unless --ncu-region
    assert shlex.split(export) == [
        "ncu", "--import", str(tmp_path / "r2" / "r2.ncu-rep"), "--csv", "--page", "raw",
        "--print-units", "base", "--print-metric-instances", "details", ">",
        str(tmp_path / "r2" / "r2.ncu.csv"),
    ]


def test_ncu_region_profiles_only_that_regions_nvtx_range(capsys, tmp_path):
    code, out, _ = run(capsys, "--ncu", "--ncu-region", "forward", "--print-command",
                       "--run-id", "r3", "--out-dir", str(tmp_path))
    assert code == 0
    argv = shlex.split(out.splitlines()[0])
    assert argv[argv.index("--nvtx-include") + 1] == "forward/" and "--nvtx" in argv
    child = argv[argv.index("-m") + 1:]
    assert "--ncu-region" not in child and "--ncu" not in child  # the child runs plain


@pytest.mark.parametrize(("args", "message"), [
    (["--ncu-region", "forward"], "add --ncu"),
    (["--ncu", "--ncu-region", "fwd"], "--ncu-region 'fwd' is not one of"),
])
def test_bad_ncu_region_is_one_error_line(capsys, tmp_path, args, message):
    code, _, err = run(capsys, *args, "--print-command", "--out-dir", str(tmp_path))
    assert_one_error_line(code, err, message)


@pytest.mark.parametrize("tool", ["nsys", "ncu"])
def test_running_nsight_without_the_binary_is_an_input_error(capsys, tmp_path, monkeypatch,
                                                              tool):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nsys/ncu anywhere
    code, _, err = run(capsys, f"--{tool}", "--out-dir", str(tmp_path))
    assert_one_error_line(code, err, f"{tool} not found")
    with pytest.raises(InputError):
        run_capture(CaptureConfig(nsys=tool == "nsys", ncu=tool == "ncu", out_dir=tmp_path))


def test_running_nsight_without_a_gpu_is_an_input_error(tmp_path, monkeypatch):
    fake = tmp_path / "nsys"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(InputError, match="needs a CUDA device"):
        run_capture(CaptureConfig(nsys=True, out_dir=tmp_path / "out"))


def test_forwarded_options_reproduce_the_configuration(capsys, monkeypatch, tmp_path):
    cfg = CaptureConfig(
        experiment="workers", steps=6, batch_size=4, lr=0.05, amp=True, profile=False,
        workers_list=(0, 2), data_dir=Path("/data"), dataset="cifar10", run_id="x",
        out_dir=tmp_path,
    )
    seen: list[CaptureConfig] = []

    def fake_run(parsed: CaptureConfig):
        seen.append(parsed)
        return NsightOutcome(tmp_path, [], printed_only=True)

    monkeypatch.setattr(runner, "run_capture", fake_run)
    assert main(nsight.child_command(cfg)[3:]) == 0
    assert seen == [CaptureConfig(**{**cfg.__dict__, "cuda_profiler_range": True})]


def test_cuda_profiler_window_brackets_the_active_steps(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(torch.cuda.profiler, "start", lambda: calls.append("start"))
    monkeypatch.setattr(torch.cuda.profiler, "stop", lambda: calls.append("stop"))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    window = CudaProfilerWindow(CaptureConfig(wait=1, warmup=1, active=3), enabled=True)
    for step in range(8):
        window.before_step(step)
        calls.append(str(step))
        window.after_step(step)
    window.stop()
    assert calls == ["0", "1", "start", "2", "3", "4", "stop", "5", "6", "7"]


def test_ncu_export_falls_back_when_ncu_lacks_metric_instances(tmp_path, monkeypatch):
    # A stand-in ncu: the profile writes the report; an import that asks for
    # --print-metric-instances fails as an older ncu does, a plain import prints the CSV.
    fake = tmp_path / "bin" / "ncu"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        '  *--print-metric-instances*) echo "unrecognised option" >&2; exit 1 ;;\n'
        '  *--import*) echo \'"ID","Kernel Name"\' ;;\n'
        '  *) while [ "$1" != "--export" ]; do shift; done; touch "$2.ncu-rep" ;;\n'
        "esac\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:/usr/bin:/bin")
    cfg = validate(CaptureConfig(ncu=True, run_id="r", out_dir=tmp_path))
    run_dir = tmp_path / "r"
    reports = nsight.run(nsight.plan(cfg, run_dir), run_dir)
    assert [p.name for p in reports] == ["r.ncu-rep", "r.ncu.csv"]
    assert (run_dir / "r.ncu.csv").read_text() == '"ID","Kernel Name"\n'
    fake.write_text("#!/bin/sh\nexit 3\n")  # a failing profile is still an error
    with pytest.raises(TraceReportError, match="ncu exited with code 3"):
        nsight.run(nsight.plan(cfg, run_dir), run_dir)
    fake.write_text("#!/bin/sh\nexit 0\n")  # ncu writes no report when it profiled nothing
    region = validate(CaptureConfig(ncu=True, ncu_region="loss", run_id="r2", out_dir=tmp_path))
    with pytest.raises(TraceReportError, match="wrote no r2.ncu-rep: it profiled no kernel "
                                               r"\(nothing was launched inside the NVTX range of region 'loss'\)"):
        nsight.run(nsight.plan(region, tmp_path / "r2"), tmp_path / "r2")


def test_python_m_capture_builds_the_capture_command_alone(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m trace_report.capture`` (what the Nsight hooks re-run) builds only the capture
    command's parameters, as ``trace-report capture`` does, not every command's (slower starts);
    its usage errors are the same, and the app keeps every command afterwards."""
    import typer.main

    from trace_report.cli.app import app

    built: list[str] = []
    real = typer.main.get_command_from_info

    def spy(*args, **kwargs):
        info = kwargs.get("command_info", args[0] if args else None)
        built.append(info.name)
        return real(*args, **kwargs)

    monkeypatch.setattr(typer.main, "get_command_from_info", spy)
    before = [c.name for c in app.registered_commands]
    code, _, err = run(capsys, "baseline", "--no-such-option")
    assert code == 2 and err.strip() == "Error: No such option: --no-such-option (Possible options: --no-compile)"
    assert built == ["capture"]
    assert [c.name for c in app.registered_commands] == before and len(before) > 20

"""``compare``'s headline and ``--fail-if`` gate (analyses/compare/gate.py): the rule grammar, verdicts,
exit codes and the Markdown summary, checked on the shared A100/V100 pair (HTA TraceDiff's
control/test traces) against a plain-Python pass over the JSON."""

from __future__ import annotations

import fnmatch
import json
import math
from pathlib import Path

import pytest
from conftest import SHARED, invoke
from gpu_steps_plain import GPU_CATS, load, steps

import trace_report as tr
from trace_report.analyses.compare import compare
from trace_report.analyses.compare.gate import evaluate, headline, judge, parse_rule
from trace_report.analyses.compare.rules import GRAMMAR
from trace_report.errors import InputError, UsageError

PAIR = SHARED / "data" / "traces" / "hta_trace_diff"
CONTROL, TEST = PAIR / "control.json.gz", PAIR / "test.json.gz"
needs_pair = pytest.mark.skipif(not PAIR.is_dir(), reason="../shared/data is not present")


# --- the grammar and the verdicts (no data) ---

@pytest.mark.parametrize("text, metric, target, op, limit, relative", [
    ("step_time>+5%", "step_time", "", ">", 5.0, True),
    (" gpu_time < -3% ", "gpu_time", "", "<", -3.0, True),
    ("kernel:*gemm*>+10%", "kernel", "*gemm*", ">", 10.0, True),
    ("kernel:*elementwise_kernel<4*>+2ms", "kernel", "*elementwise_kernel<4*", ">", 2000.0, False),
    ("region:backward>+500us", "region", "backward", ">", 500.0, False),
    ("step_time>1.5s", "step_time", "", ">", 1.5e6, False),
])
def test_rules_parse(text, metric, target, op, limit, relative):
    rule = parse_rule(text)
    assert (rule.metric, rule.target, rule.op, rule.relative) == (metric, target, op, relative)
    assert rule.limit == pytest.approx(limit) and rule.text == text.strip()


@pytest.mark.parametrize("text", ["step_time>+5", "step_time=+5%", "step_time>+5%%", "foo>+5%", "kernel:>+5%",
                                  "region:fwd>+5%", "region>+5%", ">+5%", "", "step_time>+5 parsecs"])
def test_bad_rules_are_usage_errors_stating_the_grammar(text):
    with pytest.raises(UsageError) as exc:
        parse_rule(text)
    assert GRAMMAR in str(exc.value) and repr(text) in str(exc.value) and "\n" not in str(exc.value)


def test_verdicts_relative_and_absolute():
    up = parse_rule("step_time>+5%")
    assert judge(up, 100.0, 106.0).broken and judge(up, 100.0, 106.0).change == pytest.approx(6.0)
    assert not judge(up, 100.0, 105.0).broken  # not more than 5 %
    down = parse_rule("gpu_time<-3%")
    assert judge(down, 100.0, 96.0).broken and not judge(down, 100.0, 98.0).broken
    absolute = parse_rule("kernel:*gemm*>+2ms")
    assert judge(absolute, 1000.0, 3500.0).broken and judge(absolute, 1000.0, 3500.0).change == 2500.0
    assert not judge(absolute, 1000.0, 2900.0).broken
    assert judge(up, 0.0, 1.0).change == math.inf and judge(up, 0.0, 1.0).broken  # new in B
    assert judge(up, 0.0, 0.0).change == 0.0 and not judge(up, 0.0, 0.0).broken


# --- on the shared pair ---

def _plain(path: Path) -> dict:
    """Mean step time as the GPU sees it, GPU busy time per step (union of GPU operations'
    intervals inside each step's GPU period; gpu_steps_plain) and per-name GPU operation time,
    from the JSON alone."""
    trace = load(path)
    rows = steps(trace)
    names: dict[str, float] = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in GPU_CATS:
            names[e["name"]] = names.get(e["name"], 0.0) + float(e["dur"])
    return {"steps": len(rows), "step_us": sum(r["step_us"] for r in rows) / len(rows),
            "gpu_us": sum(r["busy_us"] or 0.0 for r in rows) / len(rows), "names": names}


def _matched(plain: dict, pattern: str) -> float:
    return sum(us for n, us in plain["names"].items() if fnmatch.fnmatchcase(n.lower(), pattern.lower()))


@pytest.fixture(scope="module")
def plain():
    if not PAIR.is_dir():
        pytest.skip("../shared/data is not present")
    return _plain(CONTROL), _plain(TEST)


@pytest.fixture(scope="module")
def dbs(tmp_path_factory):
    """The pair ingested once into two databases (every CLI call below then reads, not parses)."""
    if not PAIR.is_dir():
        pytest.skip("../shared/data is not present")
    folder = tmp_path_factory.mktemp("gate")
    for src, name in ((CONTROL, "a.duckdb"), (TEST, "b.duckdb")):
        res = invoke(["ingest", src, "-o", folder / name])
        assert res.exit_code == 0, res.output
    return folder / "a.duckdb", folder / "b.duckdb"


@pytest.fixture(scope="module")
def opened(dbs):
    with tr.open(dbs[0]) as a, tr.open(dbs[1]) as b:
        yield a, b


@needs_pair
def test_headline_matches_the_json(opened, plain):
    head = headline(*opened)
    for side, ref in ((head.a, plain[0]), (head.b, plain[1])):
        assert side.steps == ref["steps"] == 6
        assert side.step_us == pytest.approx(ref["step_us"], rel=1e-9)
        assert side.gpu_us == pytest.approx(ref["gpu_us"], rel=1e-9)


@needs_pair
def test_kernel_rules_sum_the_matching_operations_per_step(opened, plain):
    result = compare(*opened)
    rules = [parse_rule("kernel:*GEMM*>+10%"), parse_rule("kernel:memcpy dtod*<-1%")]
    gemm, memcpy = evaluate(rules, headline(*opened), kernels=result)
    (a, b) = plain
    assert gemm.a_us == pytest.approx(_matched(a, "*gemm*") / 6)
    assert gemm.b_us == pytest.approx(_matched(b, "*gemm*") / 6)
    names = {n for side in plain for n in side["names"] if fnmatch.fnmatchcase(n.lower(), "*gemm*")}
    assert gemm.matched == len(names) > 10 and gemm.broken  # the V100 run's cuBLAS kernels: +148 %
    assert memcpy.change == pytest.approx(100 * (_matched(b, "memcpy dtod*") / _matched(a, "memcpy dtod*") - 1))
    assert not memcpy.broken
    with pytest.raises(InputError, match="matches"):
        evaluate([parse_rule("kernel:no_such_kernel*>+1%")], headline(*opened), kernels=result)


def _cli(dbs, *args):
    return invoke(["compare", dbs[0], dbs[1], "-n", "3", *args])


@needs_pair
@pytest.mark.slow
def test_exit_codes_for_kept_and_broken_rules(dbs, plain):
    a, b = plain
    step = 100 * (b["step_us"] / a["step_us"] - 1)  # +60.1 %
    gpu_ms = (b["gpu_us"] - a["gpu_us"]) / 1000  # +54.8 ms
    kept = _cli(dbs, "--fail-if", f"step_time>+{step + 0.5:.2f}%", "--fail-if", f"gpu_time>+{gpu_ms + 0.1:.3f}ms")
    assert kept.exit_code == 0, kept.output
    assert "gate: passed, 2 rule(s) kept" in kept.stdout and "gate failed" not in kept.stderr
    broken = _cli(dbs, "--fail-if", f"step_time>+{step - 0.5:.2f}%", "--fail-if", f"gpu_time>+{gpu_ms + 0.1:.3f}ms",
                  "--fail-if", "region:backward<+1s")  # backward grew by 1.6 ms per step: less than 1 s
    assert broken.exit_code == 3, broken.output
    assert broken.stderr.splitlines()[-1] == ("gate failed: 2 of 3 --fail-if rule(s) broken: "
                                              f"step_time>+{step - 0.5:.2f}%, region:backward<+1s")
    assert f"rule step_time>+{step - 0.5:.2f}%: BROKEN, +{step:.1f}%" in broken.stdout


@needs_pair
def test_rule_errors_are_one_line(dbs):
    bad = _cli(dbs, "--fail-if", "step_time>+5")
    assert bad.exit_code == 2 and bad.stdout == ""
    assert bad.stderr.startswith("Error: --fail-if 'step_time>+5': not a rule (METRIC OP CHANGE")
    assert len(bad.stderr.splitlines()) == 1 and "Traceback" not in bad.stderr
    unjudged = _cli(dbs, "--fail-if", "kernel:no_such_kernel*>+1%", "-f", "json")
    assert unjudged.exit_code == 1 and unjudged.stdout == ""
    assert unjudged.stderr.splitlines()[-1] == "Error: --fail-if 'kernel:no_such_kernel*>+1%': no GPU operation of A " \
                                               "or B matches 'no_such_kernel*'"


@needs_pair
@pytest.mark.slow
def test_headline_comes_first_in_every_format(dbs, plain):
    a, b = plain
    step_line = f"step time: A {a['step_us'] / 1000:.4g} ms -> B {b['step_us'] / 1000:.4g} ms"
    table = _cli(dbs)
    assert table.exit_code == 0 and table.stdout.startswith(step_line), table.output
    assert table.stdout.splitlines()[1].startswith(f"GPU time: A {a['gpu_us'] / 1000:.4g} ms")
    assert table.stdout.index("GPU time") < table.stdout.index("B - A by kernel") < table.stdout.index("┏")
    for fmt in ("csv", "json"):
        res = _cli(dbs, "-f", fmt, "--fail-if", "step_time>+1000%")
        assert res.exit_code == 0
        lines = [line for line in res.stderr.splitlines() if not line.startswith("warning: ")]  # A100 vs V100
        assert lines[0].startswith(f"note: {step_line}")
        assert "note: rule step_time>+1000%: pass" in res.stderr and "step time" not in res.stdout
    assert json.loads(res.stdout)[0]["name"] == "Memcpy DtoD (Device -> Device)"  # stdout: JSON alone


@needs_pair
@pytest.mark.slow
def test_markdown_summary_for_a_pull_request(dbs, plain):
    a, b = plain
    res = _cli(dbs, "-f", "markdown", "--by", "region", "--fail-if", "step_time>+5%",
               "--fail-if", "kernel:*gemm*>+500%")
    assert res.exit_code == 3, res.output
    md = res.stdout
    assert md.startswith("## trace-report compare: B against A\n")
    assert (f"| step time (the longer of CPU span and GPU period) | {a['step_us'] / 1000:.4g} ms | "
            f"{b['step_us'] / 1000:.4g} ms" in md)
    assert f"| GPU time (GPU busy) | {a['gpu_us'] / 1000:.4g} ms | {b['gpu_us'] / 1000:.4g} ms" in md
    assert "**gate: FAILED, 1 of 2 rule(s) broken (exit 3)**" in md
    assert "| `step_time>+5%` |" in md and md.count("**broken**") == 1
    gemm = (_matched(a, "*gemm*") / 6, _matched(b, "*gemm*") / 6)
    assert f"| `kernel:*gemm*>+500%` | {gemm[0] / 1000:.4g} ms | {gemm[1] / 1000:.4g} ms |" in md  # --by region too
    order = [md.index(s) for s in ("| per step |", "| rule |", "**Top regressions**", "### B - A by region",
                                   "| region | status | a_wall_us")]
    assert order == sorted(order)
    top = md[md.index("**Top regressions**"):md.index("### B - A")]
    assert "| other | more |" in top and "| loss |" not in top  # loss shrank: not a regression


def test_gpu_time_rule_without_gpu_operations_on_one_side_is_not_judged():
    """A CPU-only trace (A) against a GPU trace (B): the GPU time rule is not judged (a note, exit
    0), where it broke at +inf %; a rule that can be judged still is."""
    cpu_only, gpu = SHARED / "data" / "traces" / "hta_cpu_only", SHARED / "data" / "traces" / "hta_amd_mi250"
    if not cpu_only.is_dir():
        pytest.skip("../shared/data is not present")
    res = invoke(["compare", cpu_only, gpu, "-n", "1", "-f", "json", "--fail-if", "gpu_time>+5%",
                  "--fail-if", "step_time>+1%"])
    assert res.exit_code == 0, res.output
    assert "rule gpu_time>+5%: not judged (A has no GPU operations: its GPU time cannot be compared)" in res.stderr
    assert "rule step_time>+1%: pass" in res.stderr and "gate: passed, 1 rule(s) kept, 1 not judged" in res.stderr
    assert "inf" not in res.stderr.lower().replace("info", "")
    swapped = invoke(["compare", gpu, cpu_only, "-n", "1", "-f", "markdown", "--fail-if", "gpu_time<-5%"])
    assert swapped.exit_code == 0 and "| not judged |" in swapped.stdout

"""`rebalance-audit assign` in a subprocess, fed with vector generations."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

from conftest import REPO, SHARED


def generations(assignor: str, limit: int):
    out = []
    with gzip.open(SHARED / "assignor-vectors" / f"{assignor}.jsonl.gz", "rt") as f:
        for line in f:
            seq = json.loads(line)
            if seq["size_class"] == "large":
                continue
            out.extend(seq["generations"])
            if len(out) >= limit:
                break
    return out[:limit]


def run_cli(assignor: str, stdin: str) -> subprocess.CompletedProcess:
    # `python -c` with the real entry point (running cli.py as __main__ would duplicate its classes)
    cmd = [sys.executable, "-c", "import sys; from rebalance_audit.cli import main; sys.exit(main())"]
    return subprocess.run(cmd + ["assign", "--assignor", assignor],
                          input=stdin, capture_output=True, text=True, cwd=REPO, timeout=120)


def sets(runs_by_member):
    return {m: {(t, p) for t, ps in r for p in ps} for m, r in runs_by_member.items()}


@pytest.mark.parametrize("assignor", ["cooperative-sticky", "uniform", "server-range"])
def test_cli_reproduces_kafka_assignments_line_by_line(assignor):
    gens = generations(assignor, 300)
    proc = run_cli(assignor, "".join(json.dumps(g) + "\n" for g in gens))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == len(gens)
    for g, line in zip(gens, lines):
        out = json.loads(line)
        exp = sets(g["assignment"])
        got = sets(out["assignment"])
        assert all(exp.get(m, set()) == got.get(m, set()) for m in set(exp) | set(got))


def test_cli_reports_errors_per_line_and_keeps_going():
    erroring = [g for s in map(json.loads, gzip.open(SHARED / "assignor-vectors" / "uniform.jsonl.gz", "rt"))
                for g in s["generations"] if g.get("assign_error")][:1]
    assert erroring
    good = generations("uniform", 1)[0]
    stdin = "not json\n" + json.dumps(erroring[0]) + "\n\n" + json.dumps({"topics": 3}) + "\n" + json.dumps(good) + "\n"
    proc = run_cli("uniform", stdin)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    assert len(lines) == 4
    assert "not JSON" in lines[0]["error"]
    assert "Mismatch in partition movement record" in lines[1]["error"]
    assert "topics" in lines[2]["error"]
    assert "assignment" in lines[3]


def test_cli_unknown_assignor_is_bad_usage():
    proc = run_cli("no-such-assignor", "")
    assert proc.returncode == 2
    assert "unknown assignor" in proc.stderr

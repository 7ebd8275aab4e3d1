"""Screenshots of the report for docs/screenshots/: five recordings loaded with the CLI's
defaults, as a user would, then the overview and one group page per kind of trouble.

    .venv/bin/python scripts/screenshots.py [--recordings ../shared/recordings] [--keep DIR [--report-only]]

Each recording is one cluster (`ingest segments` and `ingest logs` under its own name,
nothing else given), `run` builds every table and the report, and Debian's headless
`chromium` photographs the pages. Takes about 10 minutes on 2 cores.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# (recording, group, screenshot name): a crash, a storm, a KIP-848 group, compacted history.
PAGES = (
    ("crash_autocommit", "g-crash", "crash.png"),
    ("storm_flapping", "g-storm", "storm.png"),
    ("kip848_consumer_protocol", "g-848", "kip848.png"),
    ("compressed_compacted", "g-cmp-a", "compacted.png"),
)
RECORDINGS = ("crash_autocommit", "storm_flapping", "kip848_consumer_protocol", "compressed_compacted",
              "idle_overprovisioned")


def cli(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "rebalance_audit.cli", *args], cwd=REPO,
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"rebalance-audit {' '.join(args[:2])} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def shoot(page: Path, png: Path, height: int) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        sys.exit("no chromium on PATH (Debian: apt-get install chromium)")
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size=1280,{height}", f"--screenshot={png}", page.as_uri()],
                   check=True, capture_output=True, timeout=120)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--recordings", type=Path, default=REPO.parent / "shared" / "recordings")
    p.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots")
    p.add_argument("--keep", type=Path, help="build the lake here and keep it (default: a temporary folder)")
    p.add_argument("--report-only", action="store_true", help="with --keep: draw the report of the kept lake again")
    a = p.parse_args()
    if a.report_only and a.keep is None:
        p.error("--report-only needs --keep DIR")
    work = a.keep or Path(tempfile.mkdtemp(prefix="rebalance-audit-screenshots-"))
    lake = work / "lake"
    if a.report_only:
        # The kept lake as it is; only the pages are drawn again (after a change to them).
        index = Path(cli("report", "--lake", str(lake), "--force").strip().splitlines()[-1])  # its last line
    else:
        for rec in RECORDINGS:
            cli("ingest", "segments", "--lake", str(lake), "--cluster", rec, str(a.recordings / rec / "offsets_segments"))
            cli("ingest", "logs", "--lake", str(lake), "--cluster", rec, str(a.recordings / rec / "server.log"))
        out = cli("run", "--lake", str(lake))
        index = Path(next(line for line in out.splitlines() if line.startswith("report: "))[len("report: "):])
    from dashboards.safe import page_name

    a.out.mkdir(parents=True, exist_ok=True)
    shoot(index, a.out / "overview.png", 1100)
    for rec, group, png in PAGES:
        shoot(index.parent / "groups" / page_name(rec, group), a.out / png, 2400)
    print(json.dumps({"lake": str(lake), "report": str(index), "screenshots": str(a.out)}))
    if a.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Shared pytest configuration: where the shared test data lives."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("REBALANCE_AUDIT_SHARED", REPO.parent / "shared"))
RECORDINGS = SHARED / "recordings"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"shared test data not found at {SHARED} (set REBALANCE_AUDIT_SHARED)")
    return SHARED


@pytest.fixture(scope="session")
def recordings_dir(shared_dir: Path) -> Path:
    return shared_dir / "recordings"

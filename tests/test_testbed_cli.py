"""`python -m testbed`'s usage errors (exit 2, before any broker starts). The cluster it
starts, skewed clocks included, is tested through `KafkaCluster` (test_testbed_lifecycle.py,
test_coordinator_failover.py)."""
from __future__ import annotations

import pytest

from testbed.__main__ import main


@pytest.mark.parametrize("argv, message", [
    (["--clock-skew", "3"], "not NODE=SECONDS: '3'"),
    (["--clock-skew", "one=5"], "not NODE=SECONDS: 'one=5'"),
    (["--brokers", "2", "--clock-skew", "3=-15"], "--clock-skew: nodes are 1..2"),
])
def test_a_bad_clock_skew_is_bad_usage(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_:
        main(["--workdir", str(tmp_path / "tb"), *argv])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "tb").exists()

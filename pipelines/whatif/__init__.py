"""What-if replay: a group's real history handed to other assignors, generation by generation.

* `history.build_history(rows)` - one group's steps (memberships, subscriptions, partition counts);
* `replay.replay(history, assignor)` / `replay.actual(history)` - replayed rounds with metrics;
* `assemble.group_histories(...)` - one group's raw silver rows → its history rows (per group, in Python);
* `spark_job.whatif_tables(inputs, assignors)` - every group, distributed (one shuffle, applyInArrow);
* `incremental.update(lake, assignors)` / `spark_job.update_whatif` - keeps `whatif_episodes` and
  `whatif_summary` up to date, replaying only the groups whose silver history changed.
"""
from .protocols import DEFAULT_ASSIGNORS, PROTOCOL_OF, protocol_of

__all__ = ["DEFAULT_ASSIGNORS", "PROTOCOL_OF", "protocol_of"]

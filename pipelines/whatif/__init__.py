"""What-if replay: a group's real history handed to other assignors, generation by generation.

* `history.build_history(rows)` - one group's steps (memberships, subscriptions, partition counts);
* `replay.replay(history, assignor)` / `replay.actual(history)` - replayed rounds with metrics;
* `spark_job.whatif_tables(inputs, assignors)` - every group, distributed (applyInArrow);
* `spark_job.update_whatif(lake, assignors)` - writes `whatif_episodes` and `whatif_summary`.
"""
from .protocols import DEFAULT_ASSIGNORS, PROTOCOL_OF, protocol_of

__all__ = ["DEFAULT_ASSIGNORS", "PROTOCOL_OF", "protocol_of"]

"""How each assignor's protocol hands partitions over, which decides what a rebalance costs.

* eager (classic `range`, `roundrobin`, `sticky`, and the `zk-ceil` model): every member
  revokes everything it owns when the rebalance starts; nothing is consumed until the new
  assignment is synced.
* cooperative (`cooperative-sticky`): members keep consuming what they keep; a partition that
  moves between two live members is revoked at the end of the first generation and only
  assigned in a second (follow-up) rebalance.
* consumer (KIP-848 server assignors `uniform`, `uniform-4.1`, `server-range`): the
  coordinator computes a target; each member reconciles on its own heartbeats; a partition
  is handed to its new owner only once its previous owner has revoked it. No group-wide
  round, no second generation.
* handoff (`central-handoff` model): a central coordinator moves partitions close-then-start;
  only partitions changing live owner pause.
"""
from __future__ import annotations

EAGER, COOPERATIVE, CONSUMER, HANDOFF = "eager", "cooperative", "consumer", "handoff"

PROTOCOL_OF = {
    "range": EAGER,
    "roundrobin": EAGER,
    "sticky": EAGER,
    "zk-ceil": EAGER,
    "cooperative-sticky": COOPERATIVE,
    "uniform": CONSUMER,
    "uniform-4.1": CONSUMER,
    "server-range": CONSUMER,
    "central-handoff": HANDOFF,
}

DEFAULT_ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky", "uniform", "uniform-4.1",
                     "server-range", "central-handoff")


def protocol_of(assignor: str) -> str:
    try:
        return PROTOCOL_OF[assignor]
    except KeyError:
        raise ValueError(f"assignor {assignor!r} has no replay protocol; known: {', '.join(PROTOCOL_OF)}") from None

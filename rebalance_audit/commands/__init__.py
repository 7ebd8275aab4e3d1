"""One module per `rebalance-audit` subcommand: its arguments (`register`) and what it does."""

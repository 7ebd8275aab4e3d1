"""Dagster definitions: thin assets, asset checks, schedules, sensors and resources, each asset calling one
`pipelines/` function (`definitions.py` is what `workspace.yaml` loads)."""

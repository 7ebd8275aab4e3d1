"""Bronze: what arrived, untouched and keyed by where it came from: `__consumer_offsets` live (kafka.py)
or from segment files (segments.py), coordinator lines of server.log (logs.py), quarantine rows for bad
input; no Spark."""

"""The engine: data flows one way, from Kafka's bytes (codec, segments, logs) through bronze (ingest),
silver and gold to what-if, all through the lake (lake); `stages.py` declares what each stage reads and
writes. No Dagster import here."""

"""OTLP ingestion: pure decoders (``tracegrade.ingest.decode``) and the receivers built on them."""

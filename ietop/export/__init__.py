"""`ietop export`: the headless exporter (Prometheus metrics for fleets)."""

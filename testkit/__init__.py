"""What the tests and the benchmarks share: demo pipelines, real servers on loopback (SeaweedFS,
PostgreSQL, `dagster dev`), fault injection, reference readers and clusterings, and the real
data of ../shared. Imported from a checkout as ``testkit.<module>``; never part of the wheel."""

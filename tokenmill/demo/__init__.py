"""Demo crawl generator (``crawl``) and the WARC writer it uses (``warc_writer``): material for
the demo, tests and benchmarks, outside the processing core. Needs ``faker``."""

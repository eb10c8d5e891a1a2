"""dedup_signatures: per document, its normalized-content hash and MinHash LSH band hashes."""

from tokenmill.dedup import DedupSettings, compute_signatures
from tokenmill.layout import CLEANED, DEDUP_SIGNATURES, signature_schema
from tokenmill.stage import Pod, Scope, Stage

STAGE = Stage(
    name=DEDUP_SIGNATURES,
    scope=Scope.UNIT,
    run=compute_signatures,
    settings=DedupSettings,
    upstream=(CLEANED,),
    group="dedup",
    kinds=("parquet",),
    pod=Pod("4", "4Gi", "4", "6Gi"),
    schema=signature_schema(DedupSettings().banding()[0]),
    description="Per document: normalized-content hash and MinHash LSH band hashes.",
)

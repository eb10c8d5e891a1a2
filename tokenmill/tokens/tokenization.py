"""tokenizer and tokenized_shards: documents to Megatron indexed datasets with provenance."""

from __future__ import annotations

import dataclasses
import hashlib
from array import array
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from tokenmill.crawl.units import registered_crawls, registered_units
from tokenmill.runtime.stage import Verdict, Work, setting
from tokenmill.storage.lake import Lake
from tokenmill.storage.layout import (
    DEDUPLICATED,
    TOKEN_PROVENANCE_SCHEMA,
    TOKENIZER,
    TOKENIZER_KEY,
)
from tokenmill.storage.locations import open_location
from tokenmill.storage.outputs import (
    LANGUAGES,
    LANGUAGES_BY_FILE,
    PartitionWriter,
    StageReport,
    part_files,
    read_batches,
    require_committed,
)
from tokenmill.tokens.megatron import IndexedDatasetWriter, token_dtype
from tokenmill.tokens.reuse import Donor, DonorChanged, reused_or_encoded

TOKENIZER_FILE = TOKENIZER_KEY.rsplit("/", 1)[1]
EOD_TOKEN = "<|endoftext|>"
EOD_CANDIDATES = (EOD_TOKEN, "</s>", "<|end_of_text|>", "<eos>", "<|eos|>")
SIDECAR_SCHEMA = TOKEN_PROVENANCE_SCHEMA
ARRAY_TYPECODES = {np.dtype(np.uint16): "H", np.dtype(np.int32): "i"}
SIDECAR_SOURCE_COLUMNS = [
    "doc_id",
    "crawl",
    "source_file",
    "record_id",
    "record_offset",
    "url",
    "language",
]


def train_byte_level_bpe(texts: Iterator[str], vocab_size: int) -> Tokenizer:
    """A GPT-2 style byte-level BPE: decoding reproduces any text byte for byte."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[EOD_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


def sample_texts(lake: Lake, max_bytes: int) -> Iterator[str]:
    """Deduplicated texts in lake order (crawl, unit, file, row) up to `max_bytes`:
    deterministic."""
    taken = 0
    for crawl in registered_crawls(lake):
        for unit in registered_units(lake, crawl):
            for key in part_files(lake, unit, DEDUPLICATED):
                for batch in read_batches(lake, key, columns=["text"]):
                    for text in batch.column("text").to_pylist():
                        yield text
                        taken += len(text.encode())
                        if taken >= max_bytes:
                            return


@dataclass(frozen=True)
class TokenizerSettings:
    path: str | None = setting(
        None,
        "tokenizer.json to use (local path or s3:// URI, in the lake or a location the "
        "deployment allows in TOKENMILL_TOKENIZER_PATHS); if unset, a byte-level BPE is trained "
        "on deduplicated text",
    )
    vocab_size: int = setting(16384, "Vocabulary size when training")
    sample_mb: int = setting(64, "Text to train on, in MB")

    def __post_init__(self):
        # byte-level BPE: 256 bytes and the special tokens come first; uint16 shards above
        size = self.vocab_size
        if isinstance(size, int) and not 257 <= size <= 1 << 20:
            raise ValueError(f"vocab_size must lie in [257, 1048576], not {size}")
        if isinstance(self.sample_mb, int) and self.sample_mb < 1:
            raise ValueError(f"sample_mb must be 1 or more, not {self.sample_mb}")


@dataclass(frozen=True)
class DeploymentTokenizerSettings(TokenizerSettings):
    """The shared settings' `tokenizer:` section: the deployment's tokenizer, which every recipe
    without a tokenizer of its own uses (`tokenmill.recipes.catalog`)."""

    SECTION: ClassVar[str] = "tokenizer"
    recipe: str | None = setting(
        None,
        "The recipe whose deduplicated text trains the deployment's tokenizer (default: the "
        "first recipe, by name, that uses it); not needed with a path",
    )

    def own(self) -> dict[str, Any]:
        """The settings a recipe's tokenizer section would hold."""
        values = dataclasses.asdict(self)
        del values["recipe"]
        return values


@dataclass(frozen=True)
class TokenizeSettings:
    append_eod: bool = setting(True, "Append an end-of-document token")


def build_tokenizer(work: Work) -> StageReport:
    """Commit a tokenizer at TOKENIZER_KEY: a given tokenizer.json, or one trained on the lake."""
    lake, settings = work.lake, work.settings or TokenizerSettings()
    source, vocab_size, sample_bytes = settings.path, settings.vocab_size, settings.sample_mb << 20
    report = StageReport()
    if source:
        data = read_uri(lake, source)
        tokenizer = Tokenizer.from_str(data.decode())
        report.counts["source"] = source
    else:
        texts = list(sample_texts(lake, sample_bytes))
        if not texts:
            raise ValueError(
                "no deduplicated text to train a tokenizer on: materialize "
                "deduplicated first, or configure a tokenizer path"
            )
        tokenizer = train_byte_level_bpe(iter(texts), vocab_size)
        data = tokenizer.to_str().encode()
        # BPE stops merging when no pair occurs twice: a small sample gives fewer tokens
        report.counts["vocab_target"] = vocab_size
        report.records_in = len(texts)
        report.bytes_in = sum(len(t.encode()) for t in texts)
        report.counts["source"] = "trained byte-level BPE on deduplicated sample"
    report.counts.update(
        vocab_size=tokenizer.get_vocab_size(),
        sha256=hashlib.sha256(data).hexdigest(),
        eod_token=eod_token(tokenizer),
    )
    with PartitionWriter(lake, TOKENIZER, report) as out:
        out.open(TOKENIZER_FILE).write(data)
    return report


TOKENIZER_PATHS_ENV = "TOKENMILL_TOKENIZER_PATHS"


def read_uri(lake: Lake, uri: str) -> bytes:
    """A tokenizer file in the lake or a location TOKENMILL_TOKENIZER_PATHS allows."""
    with open_location(lake, uri, TOKENIZER_PATHS_ENV, "tokenizer") as f:
        return f.read()


# A trained vocabulary under this share of its target is reported by the tokenizer's check.
VOCAB_SHORTFALL = 0.9


def vocabulary_reaches_target(lake: Lake, _partition=None) -> Verdict:
    """A trained tokenizer's vocabulary is at least VOCAB_SHORTFALL of the `vocab_size` asked
    for (BPE stops merging when no pair occurs twice: too little text to train on)."""
    counts = require_committed(lake, TOKENIZER, "tokenizer")["counts"]
    target, size = counts.get("vocab_target"), counts["vocab_size"]
    if target is None:
        return Verdict(True, f"a given tokenizer of {size:,} tokens", {"vocab_size": size})
    figures = {"vocab_size": size, "vocab_target": target}
    if size < VOCAB_SHORTFALL * target:
        return Verdict(
            False,
            f"trained {size:,} tokens of the {target:,} asked for: the sample of "
            f"deduplicated text is too small (raise sample_mb, deduplicate more text, or "
            f"lower vocab_size)",
            figures,
        )
    return Verdict(True, f"trained {size:,} tokens of the {target:,} asked for", figures)


def eod_token(tokenizer: Tokenizer) -> str | None:
    return next((t for t in EOD_CANDIDATES if tokenizer.token_to_id(t) is not None), None)


def load_tokenizer(lake: Lake) -> tuple[Tokenizer, str]:
    require_committed(lake, TOKENIZER, "tokenizer")
    data = lake.read_bytes(TOKENIZER_KEY)
    return Tokenizer.from_str(data.decode()), hashlib.sha256(data).hexdigest()


def text_hashes(texts: pa.Array) -> pa.Array:
    """xxh3-64 of each text's UTF-8 bytes."""
    return pa.array(
        [xxhash.xxh3_64_intdigest(text.encode()) for text in texts.to_pylist()], pa.uint64()
    )


def tokenize_part(work: Work, batch_docs: int = 1024) -> StageReport:
    """The file's documents as a Megatron indexed dataset and its provenance sidecar; tokens a
    sibling recipe already made for the same text are copied (see token_reuse)."""
    lake = work.lake
    require_committed(lake, work.input(DEDUPLICATED), f"deduplicated {work.unit} file {work.part}")
    tokenizer, tokenizer_sha = load_tokenizer(lake)
    settings = work.settings or TokenizeSettings()
    eod_id = _eod_id(tokenizer) if settings.append_eod else None
    dtype = token_dtype(tokenizer.get_vocab_size())
    donor = Donor.find(lake, work.output, tokenizer_sha, eod_id, dtype)
    try:
        return _tokenize(work, tokenizer, tokenizer_sha, eod_id, dtype, donor, batch_docs)
    except DonorChanged:
        return _tokenize(work, tokenizer, tokenizer_sha, eod_id, dtype, None, batch_docs)


def _tokenize(
    work: Work, tokenizer: Tokenizer, tokenizer_sha: str, eod_id, dtype, donor, batch_docs: int
) -> StageReport:
    eod = [eod_id] if eod_id is not None else []
    report = StageReport()
    reused = 0
    with work.writer(report) as out:
        writer = IndexedDatasetWriter(out.open("tokens.bin"), dtype)
        sidecar = out.parquet("provenance.parquet", SIDECAR_SCHEMA)
        batches = read_batches(
            work.lake,
            f"{work.input(DEDUPLICATED)}/docs.parquet",
            [*SIDECAR_SOURCE_COLUMNS, "text"],
            batch_docs,
        )
        for batch, (documents, from_donor) in _encoded(tokenizer, batches, donor):
            reused += from_donor
            tokens = array(ARRAY_TYPECODES[dtype])
            lengths = np.empty(len(documents), np.int64)
            for index, ids in enumerate(documents):
                lengths[index] = len(ids)
                if isinstance(ids, np.ndarray):
                    tokens.frombytes(ids.tobytes())
                else:
                    tokens.extend(ids)  # a C loop, unlike numpy's conversion of Python lists
                tokens.extend(eod)
            doc_lengths = lengths + len(eod)
            first_doc = len(writer.lengths)
            starts = writer.tokens + np.cumsum(doc_lengths) - doc_lengths
            writer.add_documents(np.frombuffer(tokens, dtype), doc_lengths)
            sidecar.write_table(
                pa.Table.from_batches([batch.select(SIDECAR_SOURCE_COLUMNS)])
                .append_column(
                    "doc_index", pa.array(np.arange(first_doc, len(writer.lengths)), pa.int64())
                )
                .append_column("token_start", pa.array(starts, pa.int64()))
                .append_column("token_end", pa.array(starts + lengths, pa.int64()))
                .append_column("text_hash", text_hashes(batch.column("text")))
            )
            report.count_languages(batch.column("language"), doc_lengths)
            report.records_in += batch.num_rows
            report.bytes_in += pc.sum(pc.binary_length(batch.column("text"))).as_py() or 0
        writer.write_index(out.open("tokens.idx"))
        if donor is not None:
            donor.check_unchanged()  # before the commit: a torn read is never committed
        report.records_out = len(writer.lengths)
        report.counts[LANGUAGES_BY_FILE] = {f"{work.part:05d}": report.counts.get(LANGUAGES, {})}
        report.counts.update(
            tokens=writer.tokens,
            tokenizer_sha256=tokenizer_sha,
            dtype=str(writer.dtype),
            eod_id=eod_id,
            documents_reused=reused,
        )
    return report


def _encoded(
    tokenizer: Tokenizer, batches: Iterator[pa.RecordBatch], donor: Donor | None
) -> Iterator[tuple[pa.RecordBatch, tuple[list, int]]]:
    """Batches with their documents' token ids; the next batch is tokenized (GIL released, all
    cores) while the caller writes the current one."""

    def encode(batch: pa.RecordBatch) -> tuple[list, int]:
        texts = batch.column("text")
        return reused_or_encoded(
            tokenizer,
            batch.column("doc_id").to_pylist(),
            texts.to_pylist(),
            text_hashes(texts).to_pylist() if donor else [None] * len(texts),
            donor,
        )

    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = None
        for batch in batches:
            future = pool.submit(encode, batch)
            if pending is not None:
                yield pending[0], pending[1].result()
            pending = (batch, future)
        if pending is not None:
            yield pending[0], pending[1].result()


def _eod_id(tokenizer: Tokenizer) -> int:
    token = eod_token(tokenizer)
    if token is None:
        raise ValueError(
            f"tokenizer has none of the end-of-document tokens {EOD_CANDIDATES}; "
            "disable append_eod or use a tokenizer that has one"
        )
    return tokenizer.token_to_id(token)

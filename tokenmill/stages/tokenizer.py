"""tokenizer: the tokenizer every unit is tokenized with, configured or trained."""

from tokenmill.runtime.stage import Check, Pod, Scope, Stage
from tokenmill.storage.layout import DEDUPLICATED, TOKENIZER
from tokenmill.tokens.tokenization import (
    TokenizerSettings,
    build_tokenizer,
    vocabulary_reaches_target,
)

STAGE = Stage(
    name=TOKENIZER,
    scope=Scope.LAKE,
    run=build_tokenizer,
    settings=TokenizerSettings,
    upstream=(DEDUPLICATED,),
    group="tokenize",
    kinds=("huggingface",),
    pod=Pod("2", "4Gi", "4", "8Gi"),
    checks=(Check("vocabulary_reaches_target", vocabulary_reaches_target, warn_only=True),),
    description="The HuggingFace tokenizer every unit is tokenized with: a configured "
    "tokenizer.json, or a byte-level BPE trained on a sample of deduplicated text.",
)

"""`tokenmill train-classifier`: a fastText quality classifier from the lab's own examples."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from tokenmill.cli.context import chosen_crawls, default_lake

if TYPE_CHECKING:
    from tokenmill.storage.lake import Lake


def cmd_train_classifier(args: argparse.Namespace) -> None:
    from tokenmill.classifiers.settings import TRAINING_FLAGS
    from tokenmill.classifiers.training import TRAINING_PHASES, train_classifier
    from tokenmill.cli.progress import progress

    lake = default_lake()
    crawls = chosen_crawls(lake, args.crawl) if args.crawl else None
    with progress(len(TRAINING_PHASES), f"classifier {args.name}", unit="phases") as bar:

        def show(now) -> None:
            if now.finished:
                bar.advance()
            else:
                bar.status(f"{now.phase}: {now.documents:,} documents")

        card = train_classifier(
            lake,
            args.name,
            Path(args.positives),
            crawls=crawls,
            negatives=args.negatives,
            negatives_file=Path(args.negatives_from) if args.negatives_from else None,
            settings={f: v for f in TRAINING_FLAGS if (v := getattr(args, f)) is not None},
            progress=show,
        )
    print(f"settings: {card['settings_chosen']}")
    describe_card(lake, card)
    for warning in card["warnings"]:
        print(f"warning: {warning}")


def describe_card(lake: Lake, card: dict) -> None:
    from tokenmill.classifiers.training import CLASSIFIERS

    name, held, negatives = card["name"], card["held_out"], card["negatives"]
    source = negatives.get("file") or ", ".join(negatives["crawls"])
    print(
        f"classifier {name}: {card['positives']['documents']} positives, "
        f"{negatives['documents']} negatives from {source}; held out {held['documents']}: "
        f"precision {held['precision']}, recall {held['recall']}"
    )
    print(f"  model {lake.uri(f'{CLASSIFIERS}/{name}/model.bin')} ({card['model_bytes']:,} B)")
    print(f"  card  {lake.uri(f'{CLASSIFIERS}/{name}/card.json')}")

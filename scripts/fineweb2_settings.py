"""Write FineWeb-2's per-language filter settings as tokenmill's: tokenmill/languages/fineweb2.json
(with NOTICE.md and the upstream licence beside it).

A developer's tool, not run at build or run time. Give it a clone (bare or not) of
https://github.com/huggingface/fineweb-2; it reads ``configs/*.yml`` at that clone's HEAD::

    uv run python scripts/fineweb2_settings.py /path/to/fineweb-2

Each ``configs/{iso3}_{Script}.yml`` becomes one entry of ``languages``, keyed by the label
fastText's lid.176 (the language-ID model tokenmill uses) gives that language when the config is
that label's language in its default script (datatrove's ``tokenizer_assignment.csv``, plus the
few corrections in ``LID176_CONFIGS``), else by the config's own name ("srp_Latn", GlotLID's
style). FineWeb-2's keys become our filters' setting names (``FILTER_SETTINGS``); the values are
FineWeb-2's, except where ``_setting`` says (out-of-range values our settings refuse, rewritten
to ones that drop exactly the same documents).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess
import tarfile
from importlib.metadata import version
from importlib.resources import files
from pathlib import Path

import yaml

REPOSITORY = "huggingface/fineweb-2"
OUT_DIR = Path(__file__).resolve().parents[1] / "tokenmill" / "languages"

# fastText lid.176's 176 labels (tokenmill.text.language's default backend).
_LID176 = (
    "af als am an ar arz as ast av az azb ba bar bcl be bg bh bn bo bpy br bs bxr ca cbk ce ceb "
    "ckb co cs cv cy da de diq dsb dty dv el eml en eo es et eu fa fi fr frr fy ga gd gl gn gom "
    "gu gv he hi hif hr hsb ht hu hy ia id ie ilo io is it ja jbo jv ka kk km kn ko krc ku kv kw "
    "ky la lb lez li lmo lo lrc lt lv mai mg mhr min mk ml mn mr mrj ms mt mwl my myv mzn nah nap "
    "nds ne new nl nn no oc or os pa pam pfl pl pms pnb ps pt qu rm ro ru rue sa sah sc scn sco sd "
    "sh si sk sl so sq sr su sv sw ta te tg th tk tl tr tt tyv ug uk ur uz vec vep vi vls vo wa "
    "war wuu xal xmf yi yo yue zh"
)
LID176 = _LID176.split()

# lid.176 labels (Wikipedia language codes) whose FineWeb-2 config the CSV does not give.
LID176_CONFIGS = {
    # Wikipedia's "als" is Alemannic; ISO 639-3 als (FineWeb-2's als_Latn) is Tosk Albanian,
    # which is lid.176's "sq" (the CSV's default for sq)
    "als": "gsw_Latn",
    # lid.176 has "ckb" (Sorani) beside "ku", Kurmanji (ku.wikipedia); the CSV makes ckb the
    # default for ku
    "ku": "kmr_Latn",
    # no.wikipedia is Bokmål; FineWeb-2 has nob_Latn and nno_Latn ("nn"), no nor_Latn
    "no": "nob_Latn",
    # Tagalog: FineWeb-2 has fil_Latn, no tgl_Latn
    "tl": "fil_Latn",
    # bh.wikipedia ("Bihari") is written in Bhojpuri
    "bh": "bho_Deva",
}
# lid.176 labels left without a config: English keeps FineWeb's exact values; Serbo-Croatian has
# no FineWeb-2 config (its Croatian, Serbian and Bosnian ones are "hr", "sr", "bs").
UNMAPPED = ("en", "sh")

# FineWeb-2 config key -> (our filter, our setting, its JSON type) (fineweb-2-pipeline.py
# passes each to the datatrove argument of the same name).
FILTER_SETTINGS = {
    "min_avg_word_length": ("gopher_quality", "min_avg_word_length", float),
    "max_avg_word_length": ("gopher_quality", "max_avg_word_length", float),
    "max_non_alpha_words_ratio": ("gopher_quality", "max_non_alpha_words_ratio", float),
    "dup_line_frac": ("gopher_repetition", "dup_line_frac", float),
    "top_n_grams": ("gopher_repetition", "top_n_grams", list),
    "dup_n_grams": ("gopher_repetition", "dup_n_grams", list),
    "line_punct_thr": ("fineweb_quality", "line_punct_thr", float),
    "new_line_ratio": ("fineweb_quality", "new_line_ratio", float),
}
# The other two keys: stop words (gopher_quality's stop_words; the loader adds them there) and
# the language-ID threshold.
OTHER_KEYS = {"stopwords": "stop_words", "language_score": "language_id_threshold"}

# What fineweb-2-pipeline.py sets for every language (not per language), in our names, with
# the text that sets it there (checked). C4QualityFilter is not run at all.
PIPELINE = {
    ("gopher_repetition", "dup_para_frac", 0.0): "dup_para_frac=0,",
    ("gopher_repetition", "dup_line_char_frac", 0.0): "dup_line_char_frac=0,",
    ("gopher_repetition", "dup_para_char_frac", 0.0): "dup_para_char_frac=0,",
    # 999: off; a share of lines is at most 1, so null (off) drops the same documents
    ("fineweb_quality", "short_line_thr", None): "short_line_thr=999,",
    ("fineweb_quality", "char_duplicates_ratio", 0.1): "char_duplicates_ratio=0.1,",
    ("gopher_quality", "min_stop_words", 2): "min_stop_words=2,",
}
PIPELINE_SOURCE = "fineweb-2-pipeline.py"
C4_NOT_RUN = "# we do not apply the C4 filters"

# Settings whose measured ratio never exceeds 1 (a count of some elements over all of them, or
# characters within the text): a FineWeb-2 limit above 1 is one nothing exceeds, as 1.0 is.
AT_MOST_ONE = {"dup_line_frac", "dup_n_grams"}


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True).stdout


def read_repo(repo: Path) -> tuple[str, dict[str, dict], dict[str, str]]:
    """The HEAD commit, its configs by name, and the texts of its other files we read."""
    commit = git(repo, "rev-parse", "HEAD").decode().strip()
    tar = git(repo, "archive", "--format=tar", "HEAD", "configs", "LICENSE", PIPELINE_SOURCE)
    configs, texts = {}, {}
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        for member in archive.getmembers():
            if not member.isfile():
                continue
            data = archive.extractfile(member).read().decode()
            if member.name.startswith("configs/") and member.name.endswith(".yml"):
                configs[member.name.removeprefix("configs/").removesuffix(".yml")] = yaml.safe_load(
                    data
                )
            else:
                texts[member.name] = data
    return commit, configs, texts


def assignment() -> dict[tuple[str, str], dict[str, str]]:
    """datatrove's tokenizer_assignment.csv rows by (code_3, script)."""
    text = (files("datatrove") / "assets" / "tokenizer_assignment.csv").read_text()
    return {(row["code_3"], row["script"]): row for row in csv.DictReader(io.StringIO(text))}


def lid176_configs(configs: dict, rows: dict) -> dict[str, str]:
    """lid.176 label -> the FineWeb-2 config of its language in its default script."""
    found = {}
    for label in LID176:
        if label in UNMAPPED:
            continue
        if label in LID176_CONFIGS:
            choice = [LID176_CONFIGS[label]]
        elif len(label) == 2:  # an ISO 639-1 code: the CSV's default language and script for it
            choice = [
                name
                for name in configs
                if (row := rows[tuple(name.split("_"))])["code_1"] == label
                and row["default_code_1"] == "TRUE"
                and row["default_script"] == "TRUE"
            ]
        else:  # an ISO 639-3 code: its default script
            choice = [
                name
                for name in configs
                if name.split("_")[0] == label
                and rows[tuple(name.split("_"))]["default_script"] == "TRUE"
            ]
        if len(choice) != 1 or choice[0] not in configs:
            raise SystemExit(f"lid.176 label {label!r}: expected one config, found {choice}")
        found[label] = choice[0]
    claimed = sorted(found.values())
    if len(set(claimed)) != len(claimed):
        raise SystemExit(f"a config is claimed by two labels: {claimed}")
    return found


def _setting(name: str, value, kind: type):
    """FineWeb-2's value as our setting holds it. Unchanged but for types (an int where we hold
    a float) and limits that drop exactly what FineWeb-2's drop but our settings refuse: a
    negative minimum (line_punct_thr: -1, off) becomes 0.0 (off), and a maximum above 1 of a
    ratio that never exceeds 1 (AT_MOST_ONE) becomes 1.0."""
    if kind is list:
        pairs = [[int(n), float(limit)] for n, limit in value]
        if name in AT_MOST_ONE:
            pairs = [[n, min(limit, 1.0)] for n, limit in pairs]
        return pairs
    value = float(value)
    if name == "line_punct_thr" and value < 0:
        return 0.0
    if name in AT_MOST_ONE:
        return min(value, 1.0)
    return value


def entry(name: str, config: dict, row: dict) -> dict:
    unknown = set(config) - set(FILTER_SETTINGS) - set(OTHER_KEYS)
    if unknown:
        raise SystemExit(f"{name}: keys not mapped to a setting: {sorted(unknown)}")
    filters: dict[str, dict] = {}
    for key, (filter_name, setting, kind) in FILTER_SETTINGS.items():
        if key in config:
            filters.setdefault(filter_name, {})[setting] = _setting(setting, config[key], kind)
    tokenizer = row["type"] + (f":{row['tok_code']}" if row["tok_code"] else "")
    found = {
        "config": name,
        "script": name.split("_")[1],
        "name": row["name"],
        "word_tokenizer": tokenizer,
    }
    if "language_score" in config:
        found["language_id_threshold"] = float(config["language_score"])
    if "stopwords" in config:
        found["stop_words"] = [str(word) for word in config["stopwords"]]
    found["filters"] = {key: filters[key] for key in sorted(filters)}
    return found


def pipeline_settings(pipeline: str) -> dict[str, dict]:
    if C4_NOT_RUN not in pipeline:
        raise SystemExit(f"{PIPELINE_SOURCE} no longer says {C4_NOT_RUN!r}: check it")
    found: dict[str, dict] = {}
    for (filter_name, setting, value), text in PIPELINE.items():
        if text not in pipeline:
            raise SystemExit(f"{PIPELINE_SOURCE} no longer sets {text!r}: check it")
        found.setdefault(filter_name, {})[setting] = value
    return found


def build(repo: Path) -> tuple[dict, dict, str]:
    """The JSON's data, FineWeb-2's configs and its licence text."""
    commit, configs, texts = read_repo(repo)
    rows = assignment()
    missing = [name for name in configs if tuple(name.split("_")) not in rows]
    if missing:
        raise SystemExit(f"configs not in datatrove's tokenizer_assignment.csv: {missing}")
    labels = {config: label for label, config in lid176_configs(configs, rows).items()}
    languages = {
        labels.get(name, name): entry(name, configs[name], rows[tuple(name.split("_"))])
        for name in sorted(configs)
    }
    data = {
        "source": f"{REPOSITORY} configs/ (commit {commit})",
        "licence": "Apache-2.0",
        "datatrove": version("datatrove"),
        "configs": len(configs),
        "pipeline": pipeline_settings(texts[PIPELINE_SOURCE]),
        "languages": dict(sorted(languages.items())),
    }
    return data, configs, texts["LICENSE"]


NOTICE = """# FineWeb-2 per-language filter settings

`fineweb2.json` holds values from **FineWeb-2** by Guilherme Penedo, Hynek Kydlíček, Vinko
Sabolčec, Bettina Messmer, Negar Foroutan, Amir Hossein Kargaran, Colin Raffel, Martin Jaggi,
Leandro Von Werra and Thomas Wolf (Hugging Face, EPFL): "FineWeb2: One Pipeline to Scale Them
All -- Adapting Pre-Training Data Processing to Every Language", arXiv:2506.20920.

- Source: https://github.com/{repository}, `configs/*.yml` ({configs} files) at commit
  `{commit}`, and the settings `fineweb-2-pipeline.py` applies to every language.
- Licence: the repository's code is under the Apache License 2.0 (its README: "The code in
  this repository is licensed under the Apache 2.0 License"); its `LICENSE` is copied here
  unchanged as `FINEWEB2_LICENSE`. The dataset itself (not used here) is ODC-By.
- Written by `scripts/fineweb2_settings.py` (tokenmill). Changes made to the upstream files: the
  YAML is rewritten as JSON; each key is renamed to the tokenmill setting it configures:

{mapping}

  The values are copied unchanged, except: integers are written as floats where the setting
  holds a float; `line_punct_thr: -1` (FineWeb-2's "off", {negative} configs) is written 0.0,
  also off; a `dup_line_frac` or `dup_n_grams` limit above 1 ({above_one} configs) is written
  1.0 (those ratios never exceed 1, so both drop nothing). Entries are keyed by fastText lid.176
  label where the config is that label's language in its default script (datatrove's
  `tokenizer_assignment.csv`, Apache-2.0, also gives each entry's `name` and `word_tokenizer`),
  else by the config's name.
"""


def notice(data: dict, configs: dict) -> str:
    lines = [
        f"  - `{key}` -> `{filter_name}.{setting}`"
        for key, (filter_name, setting, _) in FILTER_SETTINGS.items()
    ]
    lines += [
        "  - `stopwords` -> `stop_words` (and `gopher_quality.stop_words`)",
        "  - `language_score` -> `language_id_threshold` (a GlotLID score)",
    ]
    negative = sum(c["line_punct_thr"] < 0 for c in configs.values())
    above_one = sum(
        c["dup_line_frac"] > 1 or any(t > 1 for _, t in c["dup_n_grams"]) for c in configs.values()
    )
    commit = data["source"].split("commit ")[1].rstrip(")")
    return NOTICE.format(
        repository=REPOSITORY,
        configs=data["configs"],
        commit=commit,
        mapping="\n".join(lines),
        negative=negative,
        above_one=above_one,
    )


def as_json(data: dict) -> str:
    """Indented, but each language on one line (a diff names the languages that changed)."""

    def dump(value) -> str:
        return json.dumps(value, ensure_ascii=False)

    head = [f" {dump(key)}: {dump(value)}," for key, value in data.items() if key != "languages"]
    languages = [f"  {dump(label)}: {dump(found)}" for label, found in data["languages"].items()]
    return "{\n" + "\n".join(head) + '\n "languages": {\n' + ",\n".join(languages) + "\n }\n}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", type=Path, help="a clone of huggingface/fineweb-2 (bare or not)")
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args()
    data, configs, licence = build(args.repo)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "fineweb2.json").write_text(as_json(data), encoding="utf-8")
    (args.out / "NOTICE.md").write_text(notice(data, configs), encoding="utf-8")
    (args.out / "FINEWEB2_LICENSE").write_text(licence, encoding="utf-8")
    print(f"{len(data['languages'])} languages from {data['source']} -> {args.out}")


if __name__ == "__main__":
    main()

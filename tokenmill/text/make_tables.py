"""Stores every per-code-point table (``tokenmill.text.code_point_tables``) in the cache: the
runtime image runs ``python -m tokenmill.text.make_tables`` when it is built."""

from tokenmill.text import language, ngrams, normal_form, word_scan


def main() -> None:
    normal_form._non_starters()
    word_scan.char_classes()
    ngrams.character_classes()
    ngrams.fold_table()
    language._script_ids()


if __name__ == "__main__":
    main()

"""URL filter (in the spirit of datatrove's URLFilter, with a small built-in list)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np
import polars as pl

from tokenmill.filters.protocol import Filter
from tokenmill.filters.rules import Rule

BLOCKED_DOMAINS = frozenset(
    {
        "pornhub.com",
        "xvideos.com",
        "xnxx.com",
        "xhamster.com",
        "redtube.com",
        "youporn.com",
        "tube8.com",
        "spankbang.com",
        "youjizz.com",
        "brazzers.com",
        "chaturbate.com",
        "livejasmin.com",
        "stripchat.com",
        "bongacams.com",
        "cam4.com",
        "myfreecams.com",
        "onlyfans.com",
        "xtube.com",
        "porn.com",
        "motherless.com",
        "eporner.com",
        "tnaflix.com",
        "beeg.com",
        "hentaihaven.xxx",
        "nhentai.net",
        "adultfriendfinder.com",
        "fapdu.com",
    }
)
# Whole words of the URL (split on non-alphanumerics, case-sensitive as in datatrove).
BANNED_URL_WORDS = frozenset(
    {
        "porn",
        "porno",
        "xxx",
        "sexcam",
        "sexo",
        "hentai",
        "nsfw",
        "milf",
        "bdsm",
        "blowjob",
        "camgirl",
        "cumshot",
        "dildo",
        "escorts",
        "fetish",
        "gangbang",
        "handjob",
        "orgy",
        "pornstar",
        "slut",
        "threesome",
        "upskirt",
        "viagra",
        "cialis",
        "xxxvideos",
        "hardcore",
    }
)
# At least ``soft_word_threshold`` different ones of these drop the URL.
SOFT_BANNED_URL_WORDS = frozenset(
    {
        "sex",
        "sexy",
        "nude",
        "naked",
        "adult",
        "erotic",
        "babes",
        "lingerie",
        "escort",
        "webcam",
        "fuck",
        "pussy",
        "dick",
        "boobs",
        "tits",
        "ass",
        "nipples",
        "amateur",
        "lesbian",
        "gay",
    }
)
# Substrings of the URL with non-alphanumerics removed and lowercased.
BANNED_URL_SUBWORDS = frozenset(
    {
        "pornhub",
        "xvideos",
        "xnxx",
        "xhamster",
        "youjizz",
        "redtube",
        "youporn",
        "chaturbate",
        "livejasmin",
        "brazzers",
        "spankbang",
        "freesex",
        "sexvideo",
        "xxxvideo",
        "pornvideo",
    }
)

_HOST_PATTERN = r"^(?:[A-Za-z][A-Za-z0-9+.-]*://)?(?:[^@/?#]*@)?([^:/?#]+)"


def _normalized_words(words: Iterable[str]) -> list[str]:
    return sorted({re.sub(r"[^a-zA-Z0-9]+", "", w).lower() for w in words} - {""})


class URLFilter(Filter):
    """Drops documents whose URL is on a blocklist: the host or one of its parent domains is
    blocked, the URL contains a banned word, ``soft_word_threshold`` soft-banned words, or a
    banned subword. ``extra_*`` arguments extend the built-in lists;
    ``use_integrated_lists=False`` uses only the extra ones."""

    name = "url"
    description = "URL blocklist filter"
    reads_text = False
    # Per document, how many of each list's entries its URL hits (the rules' values)
    signals = ("domain", "url", "banned_word", "soft_banned_words", "banned_subword")
    settings = {
        "soft_word_threshold": "This many soft-banned words in a URL drop its document",
        "extra_domains": "Blocked domains (and their subdomains) beside the built-in list",
        "extra_urls": "Blocked URLs",
        "banned_words": "Words that drop a URL containing them, beside the built-in list",
        "banned_subwords": "Character strings that drop a URL containing them",
        "soft_banned_words": "Soft-banned words beside the built-in list",
        "use_integrated_lists": "Use the built-in blocklists (datatrove's)",
    }

    def __init__(
        self,
        soft_word_threshold: int = 2,
        extra_domains: Iterable[str] = (),
        extra_urls: Iterable[str] = (),
        banned_words: Iterable[str] = (),
        banned_subwords: Iterable[str] = (),
        soft_banned_words: Iterable[str] = (),
        use_integrated_lists: bool = True,
    ):
        builtin = use_integrated_lists
        self.soft_word_threshold = soft_word_threshold
        self.domains = sorted(
            {d.strip().lower() for d in extra_domains} | (BLOCKED_DOMAINS if builtin else set())
        )
        self.urls = sorted({u.strip() for u in extra_urls})
        self.banned_words = _normalized_words(
            [*banned_words, *(BANNED_URL_WORDS if builtin else ())]
        )
        self.soft_banned_words = _normalized_words(
            [*soft_banned_words, *(SOFT_BANNED_URL_WORDS if builtin else ())]
        )
        self.banned_subwords = _normalized_words(
            [*banned_subwords, *(BANNED_URL_SUBWORDS if builtin else ())]
        )

    def measure_key(self) -> tuple:
        return tuple(map(tuple, self._lists().values()))

    def measure(self, docs: pl.DataFrame) -> pl.DataFrame:
        """Per document: whether its host is (under) a blocked domain, whether it is a blocked
        URL, and how many distinct banned words, soft-banned words and banned subwords it holds
        (0 where the list is empty)."""
        url = pl.col("url").fill_null("")
        host = url.str.extract(_HOST_PATTERN, 1).str.to_lowercase().str.strip_suffix(".")
        words = url.str.extract_all(r"[a-zA-Z0-9]+").list.unique()
        normalized = url.str.replace_all(r"[^a-zA-Z0-9]+", "").str.to_lowercase()
        hits = {
            "domain": lambda: _any_domain_suffix(host, self.domains),
            "url": lambda: url.is_in(self.urls),
            "banned_word": lambda: _words_in(words, self.banned_words),
            "soft_banned_words": lambda: _words_in(words, self.soft_banned_words),
            "banned_subword": lambda: normalized.str.contains_any(self.banned_subwords),
        }
        nothing = pl.repeat(0, pl.len(), dtype=pl.Int64)  # an empty list's column
        return docs.select(
            (hits[name]().cast(pl.Int64).fill_null(0) if listed else nothing).alias(name)
            for name, listed in self._lists().items()
        )

    def _lists(self) -> dict[str, list[str]]:
        return {
            "domain": self.domains,
            "url": self.urls,
            "banned_word": self.banned_words,
            "soft_banned_words": self.soft_banned_words,
            "banned_subword": self.banned_subwords,
        }

    def rules(self) -> list[Rule]:
        """A rule per list (off where it is empty), its reason the list's name, in order: one
        hit drops a document, but soft-banned words count up to ``soft_word_threshold`` (at
        most 0: every document, as ``count >= 0`` was)."""
        hits = dict.fromkeys(self.signals, 1)
        hits["soft_banned_words"] = (
            self.soft_word_threshold if self.soft_word_threshold > 0 else -np.inf
        )
        return [
            Rule(name, pl.col(name), ">=", hits[name] if listed else None, name)
            for name, listed in self._lists().items()
        ]


def _words_in(words: pl.Expr, listed: Sequence[str]) -> pl.Expr:
    return words.list.eval(pl.element().is_in(listed)).list.sum()


def _any_domain_suffix(host: pl.Expr, domains: Sequence[str]) -> pl.Expr:
    alternatives = "|".join(re.escape(d) for d in domains)
    return host.str.contains(rf"(?:^|\.)(?:{alternatives})$")

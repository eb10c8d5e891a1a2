"""URL filter (in the spirit of datatrove's URLFilter, with a small built-in list)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import polars as pl

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


class URLFilter:
    """Drops documents whose URL is on a blocklist: the host or one of its parent domains is
    blocked, the URL contains a banned word, ``soft_word_threshold`` soft-banned words, or a
    banned subword. ``extra_*`` arguments extend the built-in lists;
    ``use_integrated_lists=False`` uses only the extra ones."""

    name = "url"
    reads_text = False
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

    def __call__(self, docs: pl.DataFrame) -> pl.Series:
        url = pl.col("url").fill_null("")
        host = url.str.extract(_HOST_PATTERN, 1).str.to_lowercase().str.strip_suffix(".")
        words = url.str.extract_all(r"[a-zA-Z0-9]+").list.unique()
        normalized = url.str.replace_all(r"[^a-zA-Z0-9]+", "").str.to_lowercase()
        rules = [
            (self.domains, "domain", _any_domain_suffix(host, self.domains)),
            (self.urls, "url", url.is_in(self.urls)),
            (self.banned_words, "banned_word", _any_word(words, self.banned_words)),
            (self.soft_banned_words, "soft_banned_words", self._soft_words_hit(words)),
            (
                self.banned_subwords,
                "banned_subword",
                normalized.str.contains_any(self.banned_subwords),
            ),
        ]
        reasons = [
            pl.when(hit.fill_null(False)).then(pl.lit(label)) for lst, label, hit in rules if lst
        ]
        if not reasons:  # nothing listed: every document passes (a literal would be one row)
            return pl.Series("reason", [None] * docs.height, pl.Utf8)
        return docs.select(pl.coalesce(reasons).cast(pl.Utf8).alias("reason")).to_series()

    def _soft_words_hit(self, words: pl.Expr) -> pl.Expr:
        n_soft = words.list.eval(pl.element().is_in(self.soft_banned_words)).list.sum()
        return n_soft >= self.soft_word_threshold


def _any_domain_suffix(host: pl.Expr, domains: Sequence[str]) -> pl.Expr:
    alternatives = "|".join(re.escape(d) for d in domains)
    return host.str.contains(rf"(?:^|\.)(?:{alternatives})$")


def _any_word(words: pl.Expr, banned: Sequence[str]) -> pl.Expr:
    return words.list.eval(pl.element().is_in(banned)).list.any()

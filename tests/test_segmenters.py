"""The word segmenters of languages written without spaces (tokenmill/text/segmenters.py)."""

from __future__ import annotations

import gzip
import json

import polars as pl
import pytest

from testkit.shared_data import shared_path
from tokenmill.text.segmenters import segmenter, splits_below_words
from tokenmill.text.word_scan import count_words

JAPANESE = (
    "私は東京に住んでいます。「ＳＯＬＤ　ＯＵＴ」の商品は、注文できません！\n"
    "価格：32,800円（税込）　ポイント：1,640\tiPhone15を買った😀👍🏽\r\n"
    "ｶﾀｶﾅとＡ４ノートパソコン…〜\u3000https://example.jp/a?b=1 です。"
)
CHINESE = (
    "我来到北京清华大学，今天天气很好！“你好”——《红楼梦》第三回。\n"
    "iPhone手机售价5,999元（约合US$850）😀\r\n網頁設計與程式開發\u3000第二段。"
)
THAI = "วิธีการออกเสียงคำว่า 1300 ในภาษาอังกฤษ [en]\n  • ผู้ชายจากสหรัฐอเมริกา (Farmand) 😀"
AMHARIC = "የሰው፡ልጅ፡ሁሉ፡ሲወለድ፡ነጻ፡ነው።፡የተፈጥሮ፡ማስተዋልና፡ሕሊና፡አለው።\nሰው ሁሉ ነጻ ነው። ፡ ፡፡ a፡b"
MIXED = [
    JAPANESE,
    CHINESE,
    THAI,
    AMHARIC,
    *["", " ", "\n\n", "plain English, no CJK.", "😀", "中", "a中b"],
]


def _without_inserted(original: str, segmented: str) -> str:
    """`segmented` less the spaces that are not in `original` (they are inserted singly, never
    next to whitespace, so a space with a non-space on both sides that the original lacks)."""
    out, i = [], 0
    for c in segmented:
        if i < len(original) and c == original[i]:
            out.append(c)
            i += 1
        elif c != " ":
            out.append(c)  # not an inserted space: the comparison below fails
    return "".join(out)


def _assert_round_trip(texts: list[str], segmented: list[str]) -> None:
    assert len(segmented) == len(texts)
    for original, out in zip(texts, segmented, strict=True):
        assert _without_inserted(original, out) == original
        assert len(out) - len(original) == out.count(" ") - original.count(" ")
        # each inserted space stands between two non-whitespace characters
        inserted = _inserted_positions(original, out)
        for at in inserted:
            assert 0 < at < len(out) - 1
            assert not out[at - 1].isspace() and not out[at + 1].isspace()


def _inserted_positions(original: str, out: str) -> list[int]:
    positions, i = [], 0
    for at, c in enumerate(out):
        if i < len(original) and c == original[i]:
            i += 1
        else:
            assert c == " "
            positions.append(at)
    assert i == len(original)
    return positions


@pytest.mark.parametrize(
    "language", ["zh", "yue", "wuu", "ja", "th", "lo", "km", "my", "bo", "am", "ti"]
)
def test_round_trip(language):
    segment = segmenter(language)
    assert segment is not None
    _assert_round_trip(MIXED, segment(MIXED))
    # a text's segmentation does not depend on the batch around it
    assert segment(MIXED[::-1])[::-1] == segment(MIXED) == [segment([t])[0] for t in MIXED]
    assert segment([]) == []


def _real_texts() -> list[str]:
    """The 697 CC-MAIN-2019-30 documents and the main text of the Japanese WARC's pages."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding

    jsonl = shared_path("corpora", "text", "cc-main-2019-30-697docs.jsonl.gz")
    warc = shared_path("corpora", "warc", "clueweb-japanese-quirk.warc.gz")
    if jsonl is None or warc is None:
        pytest.skip("shared corpora absent")
    with gzip.open(jsonl, "rt", encoding="utf-8") as lines:
        texts = [json.loads(line).get("text") or "" for line in lines]
    with warc.open("rb") as stream:
        for record in ArchiveIterator(stream, record_types=WarcRecordType.response):
            body = record.reader.read()
            html = body[body.find(b"\r\n\r\n") + 4 :]
            texts.append(extract_plain_text(bytes_to_str(html, detect_encoding(html)), True))
    assert sum(len(t) for t in texts if "東京" in t or "です" in t) > 10_000
    return texts


@pytest.mark.parametrize("language", ["zh", "ja", "th"])
def test_round_trip_on_real_text(language):
    texts = _real_texts()
    _assert_round_trip(texts, segmenter(language)(texts))


def test_a_long_text_goes_in_pieces():
    text = ("東京に住んでいます。" * 3000 + "\n") * 3
    (out,) = segmenter("ja")([text])
    _assert_round_trip([text], [out])
    assert out.count("東京") == 9000


def test_more_words_than_the_scanner_saw():
    texts = ["私は東京に住んでいます", "我来到北京清华大学", "วิธีการออกเสียงคำว่าภาษาอังกฤษ"]
    before = count_words(pl.Series(texts)).to_list()
    assert before == [1, 1, 1]
    after = [
        count_words(pl.Series(segmenter(language)([text]))).item()
        for language, text in zip(["ja", "zh", "th"], texts, strict=True)
    ]
    assert all(n >= 4 for n in after), after


def test_known_segmentations():
    assert segmenter("ja")(["私は東京に住んでいます"]) == ["私 は 東京 に 住ん で い ます"]
    assert segmenter("zh")(["我来到北京清华大学"]) == ["我 来到 北京 清华大学"]
    (thai,) = segmenter("th")(["ภาษาไทยเป็นภาษาราชการ"])
    assert thai.split(" ")[:2] == ["ภาษาไทย", "เป็น"]
    assert segmenter("bo")(["བོད་ཀྱི་སྐད་ཡིག"]) == ["བོད་ ཀྱི་ སྐད་ ཡིག"]
    assert segmenter("lo")(["ພາສາລາວເປັນ"]) == ["ພາ ສາ ລາວ ເປັນ"]
    assert segmenter("km")(["ភាសាខ្មែរ"]) == ["ភា សា ខ្មែរ"]
    assert segmenter("my")(["မြန်မာဘာသာ"]) == ["မြန် မာ ဘာ သာ"]


def test_latin_inside_cjk_keeps_its_own_splitting():
    (out,) = segmenter("ja")(["価格32,800円 https://example.jp/a です U.S.A."])
    assert "32,800" in out and "https://example.jp/a" in out and "U.S.A." in out
    (out,) = segmenter("zh")(["iPhone手机"])
    assert out == "iPhone 手机"


@pytest.mark.parametrize("language", ["en", "de", "ru", "vi", "ar", "hi", "xx", "zh_Latn"])
def test_space_delimited_languages_have_none(language):
    assert segmenter(language) is None


def test_korean_particles_and_endings_split_off_their_stems():
    text = "모든 인간은 태어날 때부터 자유로우며 서로 형제애의 정신으로 행동하여야 한다."
    (out,) = segmenter("ko")([text])
    assert out.replace(" ", "") == text.replace(" ", "")
    for word in ("인간 은", "형제애 의", "정신 으로", "서로", "때부터"):  # short stems stay whole
        assert word in out, out
    assert count_words(pl.Series([out]))[0] > count_words(pl.Series([text]))[0]


def test_korean_numbers_are_words_apart_from_the_hangul_against_them():
    """A number's counter, unit or particle ("1993년에", "2.0판") and a prefix ("제1장") are
    words of their own, as a morpheme analyser splits them: the number is a word without a
    letter, as in the English original."""
    text = "1993년 8월에 0.01부터 2.0판까지 제1장"
    (out,) = segmenter("ko")([text])
    assert out == "1993 년 8 월에 0.01 부터 2.0 판까지 제 1 장"
    words = count_words(pl.Series([out]))[0]
    assert words == count_words(pl.Series([text]))[0] + 6
    assert segmenter("ko")(["１９９３년"]) == ["１９９３ 년"]  # fullwidth digits too
    (english,) = segmenter("ko")(["version 2.0 of 1993"])  # no Hangul beside: unchanged
    assert english == "version 2.0 of 1993"


def test_unknown_labels_fall_back_by_script():
    assert segmenter("lzh")(["學而時習之"]) == ["學 而 時 習 之"]
    assert segmenter("nan", "Hani")(["學而a"]) == ["學 而 a"]
    assert segmenter("ain", "Kana")(["アイヌ"]) == ["ア イ ヌ"]
    assert segmenter("xyz", "Jpan")(["日本"]) == ["日 本"]
    assert segmenter("xyz", "Latn") is None
    assert segmenter("xyz") is None
    # a Thai-script label without its own segmenter gets the Thai dictionary
    assert segmenter("kxm", "Thai") is segmenter("th")
    assert segmenter("cmn_Hani") is segmenter("zh")
    assert segmenter("jpn_Jpan") is segmenter("ja")


def test_the_fallbacks_but_ethiopic_cut_finer_than_words():
    finer = ["lzh", "my", "bo", "km", "lo", "mya_Mymr"]
    assert all(splits_below_words(label) for label in finer)
    assert splits_below_words("xyz", "Jpan") and splits_below_words("nan", "Hani")
    for label in ("zh", "ja", "th", "ko", "am", "en", "de", "xyz", "kxm_Thai"):
        assert not splits_below_words(label), label


def test_ethiopic_words_separated_by_the_wordspace_are_spaced():
    """Amharic written with the Ethiopic wordspace in place of spaces: a space after each, so
    C4 counts its words per line and its sentences as those of spaced Amharic; spaced text
    stays as it is, and the word scanner's words are the same."""
    segment = segmenter("am")
    assert segment is segmenter("amh_Ethi") is segmenter("ti") is segmenter("xyz", "Ethi")
    written, spaced = "ሰው፡ልጅ፡ነው።፡ሁሉ", "ሰው ልጅ ነው። ሁሉ"
    assert segment([written, spaced]) == ["ሰው፡ ልጅ፡ ነው።፡ ሁሉ", spaced]
    assert (
        count_words(pl.Series(segment([written]))).to_list()
        == count_words(pl.Series([written])).to_list()
    )


def test_loaded_once():
    assert segmenter("zh") is segmenter("zh")
    assert segmenter("ja") is segmenter("jpn")

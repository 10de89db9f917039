"""Words of tool names, descriptions and queries, as the search index counts them.

One function, :func:`terms`, turns any text into search terms, for the
documents indexed and the queries alike:

- identifiers are split where people read a boundary: ``deploy_status``,
  ``ops.deployStatus``, ``get-HTTPResponse`` and ``v2Items`` all give their words;
- words are lowercased, common English words dropped and the rest stemmed with
  the Snowball stemmer (``deploys``, ``deployment`` -> ``deploy``), so a query
  need not use a description's exact form;
- text in scripts written without spaces (Chinese, Japanese; Korean too, for
  simplicity) gives its characters and each pair of neighbouring characters:
  ``发送邮件`` -> ``发``, ``送``, ``邮``, ``件``, ``发送``, ``送邮``, ``邮件``. A pair
  carries most of a Chinese word's meaning, and needs no dictionary or segmenter
  that would have to be downloaded;
- other letters (``é``, Cyrillic, Greek) form words as in English, unstemmed.

The stemmer is PyStemmer (the Snowball project's own C implementation): the
per-word cost of a Python stemmer would be most of the time of a 10,000-tool
index build.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Iterator
from functools import lru_cache

__all__ = ["name_words", "terms", "words"]

# Runs of the scripts written without spaces between words.
_CJK = (
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # Han
    "\uac00-\ud7af"  # Hangul syllables
)
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W_]+", re.UNICODE)
# Inside a word: a lowercase or digit followed by an uppercase, an uppercase run
# followed by an uppercase-lowercase pair (HTTPResponse), letters next to digits.
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_IS_CJK = re.compile(rf"[{_CJK}]")

# Words that say nothing about which tool is meant (kept short on purpose: "get",
# "list" and "all" do tell tools apart).
_STOP_WORDS = (
    "a an and are as at be by can could do does for from has have how i if in into is it its "
    "me my of on or our please should so than that the their them then there these this those "
    "to was we were what when where which who whom why will with would you your"
)
_STOP = frozenset(_STOP_WORDS.split())

_local = threading.local()


def _stem(word: str) -> str:
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        import Stemmer  # PyStemmer; one per thread (it is not thread-safe)

        stemmer = _local.stemmer = Stemmer.Stemmer("english")
    return str(stemmer.stemWord(word))


@lru_cache(maxsize=65536)
def _word_terms(token: str) -> tuple[str, ...]:
    if _IS_CJK.match(token):
        chars = list(token)
        return (*chars, *(a + b for a, b in itertools.pairwise(chars)))
    out = []
    parts = _CAMEL.findall(token) if token.isascii() else [token]
    for part in parts or [token]:
        word = part.lower()
        if word in _STOP:
            continue
        out.append(_stem(word) if word.isascii() and word.isalpha() else word)
    return tuple(out)


def words(text: str) -> Iterator[str]:
    """The raw tokens of ``text``: identifiers and words, runs of CJK characters."""
    return (match.group() for match in _TOKEN.finditer(text))


def terms(text: str) -> list[str]:
    """The search terms of ``text``, in order, repeats kept (see the module docs)."""
    out: list[str] = []
    for token in words(text):
        out.extend(_word_terms(token))
    return out


def name_words(identifier: str) -> str:
    """An identifier as the words a person reads in it, lowercased and unstemmed:
    ``ops.getDeployStatus`` -> ``ops get deploy status``."""
    out: list[str] = []
    for token in words(identifier):
        if _IS_CJK.match(token) or not token.isascii():
            out.append(token.lower())
        else:
            out.extend(part.lower() for part in _CAMEL.findall(token) or [token])
    return " ".join(out)

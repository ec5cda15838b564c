"""The Porter stemmer as Google's ``rouge-score`` package uses it: NLTK's ``PorterStemmer`` in its default
``NLTK_EXTENSIONS`` mode, so that ADK-compatible ROUGE gives ADK's numbers.

Porter's five steps (M.F. Porter, "An algorithm for suffix stripping", 1980) plus the departures NLTK's mode
makes: a small table of irregular forms, words of two letters or fewer left alone, ``ies``/``ied`` on a
four-letter word becoming ``ie``, any other ``ied`` becoming ``i``, ``y`` -> ``i`` only after a consonant that
is not the first letter, ``bli`` -> ``ble`` instead of ``abli`` -> ``able``, ``alli`` -> ``al`` applied before
the rest of step 2, the extra step-2 rules ``fulli`` -> ``ful`` and ``logi`` -> ``log``, and a two-letter
vowel-consonant stem counting as ``*o``. Written from the paper and NLTK's documented behaviour; checked
against NLTK in ``bench/adk_side_by_side.py``.

A rule list works as in the paper: the first rule whose suffix the word ends with decides, and if its
condition fails the word is left as it is.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["stem"]

_VOWELS = frozenset("aeiou")

# NLTK_EXTENSIONS' irregular forms: word -> stem
_IRREGULAR = {
    "skies": "sky",
    "sky": "sky",
    "dying": "die",
    "lying": "lie",
    "tying": "tie",
    "news": "news",
    "innings": "inning",
    "inning": "inning",
    "outings": "outing",
    "outing": "outing",
    "cannings": "canning",
    "canning": "canning",
    "howe": "howe",
    "proceed": "proceed",
    "exceed": "exceed",
    "succeed": "succeed",
}

Condition = Callable[[str], bool] | None
Rule = tuple[str, str, Condition]


def _consonants(word: str) -> list[bool]:
    """Per letter: is it a consonant? ``y`` is one at the start or after a vowel, a vowel after a consonant."""
    flags: list[bool] = []
    for i, ch in enumerate(word):
        flags.append(ch not in _VOWELS and (ch != "y" or i == 0 or not flags[i - 1]))
    return flags


def _measure(stem: str) -> int:
    """m in ``[C](VC){m}[V]``: the number of vowel-to-consonant changes."""
    flags = _consonants(stem)
    return sum(1 for i in range(1, len(flags)) if flags[i] and not flags[i - 1])


def _m_positive(stem: str) -> bool:
    return _measure(stem) > 0


def _m_above_one(stem: str) -> bool:
    return _measure(stem) > 1


def _has_vowel(stem: str) -> bool:
    return not all(_consonants(stem))


def _double_consonant(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _consonants(word)[-1]


def _cvc(word: str) -> bool:
    """``*o``: ends consonant-vowel-consonant, the last not w, x or y (or, NLTK's extension, is vowel-consonant)."""
    flags = _consonants(word)
    if len(word) >= 3 and flags[-3] and not flags[-2] and flags[-1] and word[-1] not in "wxy":
        return True
    return len(word) == 2 and not flags[0] and flags[1]


def _apply(word: str, rules: list[Rule]) -> str:
    for suffix, replacement, condition in rules:
        if suffix == "*d":
            if not _double_consonant(word):
                continue
            stem = word[:-2]
        elif word.endswith(suffix):
            stem = word[: len(word) - len(suffix)]
        else:
            continue
        return stem + replacement if condition is None or condition(stem) else word
    return word


def _step1a(word: str) -> str:
    if word.endswith("ies") and len(word) == 4:
        return word[:-3] + "ie"
    return _apply(word, [("sses", "ss", None), ("ies", "i", None), ("ss", "ss", None), ("s", "", None)])


def _step1b(word: str) -> str:
    if word.endswith("ied"):
        return word[:-3] + ("ie" if len(word) == 4 else "i")
    if word.endswith("eed"):
        stem = word[:-3]
        return stem + "ee" if _measure(stem) > 0 else word
    for suffix in ("ed", "ing"):
        if word.endswith(suffix) and _has_vowel(word[: -len(suffix)]):
            stem = word[: -len(suffix)]
            break
    else:
        return word
    last = stem[-1]
    return _apply(
        stem,
        [
            ("at", "ate", None),
            ("bl", "ble", None),
            ("iz", "ize", None),
            ("*d", last, lambda _: last not in "lsz"),
            ("", "e", lambda s: _measure(s) == 1 and _cvc(s)),
        ],
    )


def _step1c(word: str) -> str:
    return _apply(word, [("y", "i", lambda s: len(s) > 1 and _consonants(s)[-1])])


_STEP2: list[Rule] = [
    ("ational", "ate", _m_positive),
    ("tional", "tion", _m_positive),
    ("enci", "ence", _m_positive),
    ("anci", "ance", _m_positive),
    ("izer", "ize", _m_positive),
    ("bli", "ble", _m_positive),
    ("alli", "al", _m_positive),
    ("entli", "ent", _m_positive),
    ("eli", "e", _m_positive),
    ("ousli", "ous", _m_positive),
    ("ization", "ize", _m_positive),
    ("ation", "ate", _m_positive),
    ("ator", "ate", _m_positive),
    ("alism", "al", _m_positive),
    ("iveness", "ive", _m_positive),
    ("fulness", "ful", _m_positive),
    ("ousness", "ous", _m_positive),
    ("aliti", "al", _m_positive),
    ("iviti", "ive", _m_positive),
    ("biliti", "ble", _m_positive),
    ("fulli", "ful", _m_positive),
]


def _step2(word: str) -> str:
    if word.endswith("alli") and _m_positive(word[:-4]):
        return _step2(word[:-4] + "al")
    # "logi" -> "log" when the word without "ogi" has m > 0 (NLTK measures the stem with its "l")
    return _apply(word, [*_STEP2, ("logi", "log", lambda _: _m_positive(word[:-3]))])


_STEP3: list[Rule] = [
    ("icate", "ic", _m_positive),
    ("ative", "", _m_positive),
    ("alize", "al", _m_positive),
    ("iciti", "ic", _m_positive),
    ("ical", "ic", _m_positive),
    ("ful", "", _m_positive),
    ("ness", "", _m_positive),
]

_STEP4: list[Rule] = [
    *((suffix, "", _m_above_one) for suffix in ("al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement")),
    ("ment", "", _m_above_one),
    ("ent", "", _m_above_one),
    ("ion", "", lambda s: _measure(s) > 1 and s[-1] in "st"),
    *((suffix, "", _m_above_one) for suffix in ("ou", "ism", "ate", "iti", "ous", "ive", "ize")),
]


def _step5a(word: str) -> str:
    if word.endswith("e"):
        stem = word[:-1]
        m = _measure(stem)
        if m > 1 or (m == 1 and not _cvc(stem)):
            return stem
    return word


def _step5b(word: str) -> str:
    return word[:-1] if word.endswith("ll") and _measure(word[:-1]) > 1 else word


def stem(word: str) -> str:
    """The stem of one lower-case word, as ``nltk.stem.PorterStemmer().stem`` gives it."""
    word = word.lower()
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if len(word) <= 2:
        return word
    for step in (_step1a, _step1b, _step1c, _step2):
        word = step(word)
    word = _apply(word, _STEP3)
    word = _apply(word, _STEP4)
    return _step5b(_step5a(word))

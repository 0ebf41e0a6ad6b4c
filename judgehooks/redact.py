"""Redactors: functions from text to text that the snapshot applies before anything leaves the process.

    AgentAsJudgeEval(..., redact=judgehooks.redact.PII)

`PII` masks emails, phone numbers, card numbers (Luhn-checked, written with spaces, dashes or dots),
IBANs (mod-97-checked), API keys and other credentials (vendor key prefixes, ``Authorization``
values, ``password=`` / ``api_key=`` / ``token=`` / ``*_access_key=`` assignments, the password in
a URL's ``user:password@``, PEM private keys, an AWS secret access key standing alone) and JWTs
with labelled placeholders (``[EMAIL]``, ``[PHONE]``, ``[CARD]``, ``[IBAN]``, ``[API_KEY]``,
``[PRIVATE_KEY]``, ``[JWT]``). Numbers are found in any script's digits and in full-width forms
(``４１１１ １１１１ …``), read as ASCII one character for one. Its patterns run in linear
time on hostile text: a match can start only where a run of the characters it is made of starts (a
lookbehind), and every quantifier is either bounded or runs over characters its neighbour cannot
match, so no input makes the engine retry a stretch twice over. `Presidio` adapts Microsoft
Presidio's analyzer (the ``pii`` extra) for named entities.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from typing import Any

__all__ = ("KINDS", "PII", "PIIRedactor", "Presidio", "luhn_valid", "iban_valid", "redactor_name")

#: what `PIIRedactor` can mask, in the order it masks them (tokens first: they hold digits and dots)
KINDS: tuple[str, ...] = ("jwt", "api_key", "email", "iban", "card", "phone")

_TOKEN = r"A-Za-z0-9_\-"
# A literal (or a one-character class) comes first, so the engine skips ahead to where a match can
# start; the lookbehind after it refuses a start inside a run the pattern would already have tried.
_JWT = re.compile(rf"eyJ(?<![{_TOKEN}]eyJ)[{_TOKEN}]{{4,}}\.eyJ[{_TOKEN}]{{4,}}\.[{_TOKEN}]*")
# Vendor prefixes of secret keys (OpenAI/Anthropic sk-, Stripe, GitHub, GitLab, Slack, AWS, Google,
# Hugging Face): one pattern each, so each starts with its literal.
_API_KEYS = tuple(re.compile(rf"{prefix}(?<![{_TOKEN}]{prefix}){rest}") for prefix, rest in (
    ("sk-", rf"[{_TOKEN}]{{16,}}"), ("sk_", "(?:live|test)_[A-Za-z0-9]{16,}"),
    ("rk_", "(?:live|test)_[A-Za-z0-9]{16,}"), ("pk_", "(?:live|test)_[A-Za-z0-9]{16,}"),
    ("gh", "[pousr]_[A-Za-z0-9]{30,}"), ("github_pat_", "[A-Za-z0-9_]{22,}"),
    ("glpat-", rf"[{_TOKEN}]{{20,}}"), ("xox", r"[abposr]-[A-Za-z0-9\-]{10,}"), ("AKIA", "[0-9A-Z]{16}(?![0-9A-Z])"),
    ("AIza", rf"[{_TOKEN}]{{35}}"), ("hf_", "[A-Za-z0-9]{30,}")))
_BEARER = re.compile(rf"Bearer [{_TOKEN}.~+/]{{16,}}=*")
# An AWS secret access key has no prefix: 40 characters of base64 standing alone (not inside a
# longer run, nor joined by _ or - to one). `_random_40` then wants both cases and a digit, which a
# git hash (hex, one case), a word or a number never has.
_B64 = "A-Za-z0-9/+"
_AWS_SECRET = re.compile(rf"[{_B64}](?<![{_B64}_\-][{_B64}])[{_B64}]{{39}}(?![{_B64}=_\-])")
# The value of an api_key / secret / token / password assignment (the name is kept), found from
# its ':' or '=' with the name looked for in the 24 characters before it.
_SEPARATOR = re.compile(r"[:=]")
_KEY_NAME = re.compile(r"(?i:api[_-]?key|secret|access[_-]?token|auth[_-]?token|password|passwd|access[_-]?key"
                       r"|private[_-]?key|authorization|token)[\"']?[ \t]{0,3}\Z")
# An Authorization value's scheme word is kept: `Authorization: Basic [API_KEY]`.
_VALUE = re.compile(r"[ \t]{0,3}[\"']?(?:(?:Basic|Bearer|Token|Digest)[ \t]{1,3})?([^\s\"',;]{8,})")
_ASSIGNED_HINTS = ("key", "secret", "token", "pass", "auth")
# The password of a URL's user:password@ (redis://:pw@host, postgresql://bob:pw@db): the user is kept.
_USERINFO = re.compile(r"://[^\s/@:]*:([^\s/@]{1,256})@")
# A PEM private key, whole: its body holds no '-', so the run stops at its END line.
_PEM = re.compile(r"-----BEGIN[A-Z ]{0,40}PRIVATE KEY-----[A-Za-z0-9+/=\s]*(?:-----END[A-Z ]{0,40}PRIVATE KEY-----)?")
_LOCAL = r"A-Za-z0-9._%+\-"
# An email is found from its @ (a fast literal search), then its local part by a match backwards.
_DOMAIN = re.compile(r"@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,24}(?![A-Za-z])")
_LOCAL_RUN = re.compile(rf"[{_LOCAL}]+")
_IBAN = re.compile(r"[A-Z](?<![A-Za-z0-9][A-Z])[A-Z][0-9]{2}(?: ?[A-Z0-9]){11,30}(?![A-Za-z0-9])")
# Groups apart by up to two spaces, dashes or dots: 4111 1111 1111 1111, 4111.1111.1111.1111.
_CARD = re.compile(r"[0-9](?<![0-9]{2})(?:[ .\-]{0,2}[0-9]){12,18}(?![0-9])")
# Phones: one pattern per form, each starting with a literal or a digit.
_PHONES = tuple(re.compile(p) for p in (
    r"\+(?<![\w+]\+)[1-9](?:[ .\-]?\(?[0-9]\)?){6,14}(?![0-9])",  # international: +49 30 1234567
    r"00(?<![\w+]00)[1-9](?:[ .\-]?\(?[0-9]\)?){6,14}(?![0-9])",  # 0044 20 7946 0958
    r"\((?<![\w+]\()[2-9][0-9]{2}\)[ .\-]?[2-9][0-9]{2}[ .\-][0-9]{4}(?![0-9])",  # (212) 555-0182
    r"[2-9](?<![\w+][2-9])[0-9]{2}[ .\-][2-9][0-9]{2}[ .\-][0-9]{4}(?![0-9])",  # 212-555-0182
    r"0(?<![\w+]0)[1-9][0-9]{0,3}[ /.\-][0-9]{2,4}(?:[ .\-]?[0-9]{2,4}){1,3}(?![0-9])",  # national: 030 1234567
))
# Any script's decimal digit (\d on text is Unicode's Nd), full-width ASCII (U+FF01-FF5E), and the
# spaces and dashes numbers are written with: each read as its ASCII character, one for one, so a
# match in the folded text is the same span of the original. Only the number kinds look at them.
_FOLDABLE = re.compile("(?![0-9])\\d|[\uff01-\uff5e\u00a0\u2007\u2009\u202f\u3000\u2010-\u2013\u2212]")
_SPACES, _DASHES = "\u00a0\u2007\u2009\u202f\u3000", "\u2010\u2011\u2012\u2013\u2212"
_DIGIT = re.compile(r"\d")


def luhn_valid(digits: str) -> bool:
    """Whether a string of digits passes the Luhn check that card numbers carry."""
    total = sum(_DOUBLED[ord(ch) - 48] if i % 2 else ord(ch) - 48 for i, ch in enumerate(reversed(digits)))
    return bool(digits) and total % 10 == 0


def iban_valid(iban: str) -> bool:
    """Whether an IBAN (upper case, no spaces) passes its ISO 13616 mod-97 check."""
    return 15 <= len(iban) <= 34 and _longest_iban(iban) == len(iban)


_DOUBLED = (0, 2, 4, 6, 8, 1, 3, 5, 7, 9)


def _longest_luhn(digits: str) -> int:
    """The longest prefix of 13-19 digits that passes the Luhn check (0: none), in one pass: a prefix
    of length n doubles the digits an odd distance from its end."""
    plain, doubled = [0, 0], [0, 0]  # sums over the digits at even and odd indices
    best = 0
    for i, ch in enumerate(digits[:19]):
        d = ord(ch) - 48
        plain[i % 2] += d
        doubled[i % 2] += _DOUBLED[d]
        last = i % 2  # the parity of this prefix's last index: those digits stay, the others double
        if i >= 12 and (plain[last] + doubled[1 - last]) % 10 == 0:
            best = i + 1
    return best


def _longest_iban(text: str) -> int:
    """The longest prefix of 15-34 characters that is a valid IBAN (0: none), in one pass: the
    country code and check digits move to the end, so each prefix's remainder is its body's, shifted
    by their six digits, plus theirs."""
    if len(text) < 15 or not (text[:2].isalpha() and text[2:4].isdigit()):
        return 0
    head = int("".join(str(int(ch, 36)) for ch in text[:4]))  # e.g. DE89 -> 131489
    rem, best = 0, 0
    for n, ch in enumerate(text[4:34], start=5):
        value = int(ch, 36)
        rem = (rem * (100 if value > 9 else 10) + value) % 97
        if n >= 15 and (rem * 1_000_000 + head) % 97 == 1 and _IBAN_LENGTHS.get(text[:2], n) == n:
            best = n
    return best


#: IBAN lengths by country (SWIFT's registry); a country not listed may have any length 15-34
_IBAN_LENGTHS = dict(
    AD=24, AE=23, AL=28, AT=20, AZ=28, BA=20, BE=16, BG=22, BH=22, BI=27, BR=29, BY=28, CH=21, CR=22, CY=28, CZ=24,
    DE=22, DJ=27, DK=18, DO=28, EE=20, EG=29, ES=24, FI=18, FK=18, FO=18, FR=27, GB=22, GE=22, GI=23, GL=18, GR=27,
    GT=28, HN=28, HR=21, HU=28, IE=22, IL=23, IQ=23, IS=26, IT=27, JO=30, KW=30, KZ=20, LB=28, LC=32, LI=21, LT=20,
    LU=20, LV=21, LY=25, MC=27, MD=24, ME=22, MK=19, MN=20, MR=27, MT=31, MU=30, NI=28, NL=18, NO=15, OM=23, PK=24,
    PL=28, PS=29, PT=25, QA=29, RO=24, RS=22, RU=33, SA=24, SC=31, SD=18, SE=24, SI=19, SK=24, SM=27, SO=23, ST=25,
    SV=28, TL=23, TN=24, TR=26, UA=29, VA=22, VG=24, XK=20, YE=30,
)


def _fold(text: str) -> str:
    """`text` with other digits, full-width forms, spaces and dashes as ASCII, one character for one."""
    if text.isascii():
        return text
    folds = {ord(ch): _ascii_of(ch) for ch in set(text) if not ch.isascii() and _FOLDABLE.match(ch)}
    return text.translate(folds) if folds else text  # the distinct characters found, then one C-level pass


def _ascii_of(ch: str) -> str:
    if "\uff01" <= ch <= "\uff5e":
        return chr(ord(ch) - 0xFEE0)
    if ch in _SPACES:
        return " "
    return "-" if ch in _DASHES else str(unicodedata.decimal(ch))


#: how much of a candidate to mask, from its start: 0 for none (it failed its check)
Measure = Callable[[str], int]


#: a number kind's text and its `_fold`, masked alike (a placeholder is ASCII: it folds to itself)
Folded = tuple[str, str]


def _mask(pattern: re.Pattern[str], label: str, measure: Measure, texts: Folded) -> Folded:
    """Each match of `pattern` in the folded text masked as ``[label]`` for the length `measure`
    gives, in both texts: ``４１１１ …`` is a card number as ``4111 …`` is."""
    text, seen = texts
    parts, folded, at = [], [], 0
    for match in pattern.finditer(seen):
        n = measure(match.group())
        if n:
            parts += [text[at:match.start()], f"[{label}]"]
            folded += [seen[at:match.start()], f"[{label}]"]
            at = match.start() + n
    if not parts:
        return texts
    return "".join(parts) + text[at:], "".join(folded) + seen[at:]


def _checked(strip: str, longest: Callable[[str], int]) -> Measure:
    """The longest prefix of a candidate whose characters (separators in `strip` left out) pass its
    check: a card number followed by an expiry date, or an IBAN by a word, is still found."""

    removed = str.maketrans("", "", strip)

    def measure(text: str) -> int:
        n = longest(text.translate(removed))
        return n and [i for i, ch in enumerate(text) if ch not in strip][n - 1] + 1  # where the n-th one ends

    return measure


class PIIRedactor:
    """Masks personal data and secrets with labelled placeholders: a function from text to text.

    ``PIIRedactor()`` masks every kind in `KINDS`; ``PIIRedactor("email", "card")`` only those.
    Phones are numbers written with ``+`` or ``00``, North American 10-digit forms, and national
    numbers starting with 0 that have a separator (so dates and plain ids are not phones)."""

    def __init__(self, *kinds: str) -> None:
        unknown = [k for k in kinds if k not in KINDS]
        if unknown:
            raise ValueError(f"unknown PII kind(s) {unknown}: choose from {', '.join(KINDS)}")
        self.kinds = tuple(k for k in KINDS if k in kinds) if kinds else KINDS
        self.name = "PII" if self.kinds == KINDS else f"PII({','.join(self.kinds)})"
        words: dict[str, Callable[[str], str]] = {
            "jwt": lambda text: _JWT.sub("[JWT]", text) if "eyJ" in text else text,
            "api_key": _api_keys,
            "email": _emails,
        }
        numbers: dict[str, Callable[[Folded], Folded]] = {
            "iban": lambda texts: _mask(_IBAN, "IBAN", _checked(" ", _longest_iban), texts),
            "card": lambda texts: _mask(_CARD, "CARD", _checked(" -.", _longest_luhn), texts),
            "phone": _phones,
        }
        self._words = [words[k] for k in self.kinds if k in words]
        self._numbers = [numbers[k] for k in self.kinds if k in numbers]  # after the words, as in KINDS

    def __call__(self, text: str) -> str:
        if not isinstance(text, str):
            raise TypeError(f"a redactor takes text, got {type(text).__name__}")
        for step in self._words:
            text = step(text)
        if self._numbers and _DIGIT.search(text) is not None:  # iban, card and phone need one
            texts = text, _fold(text)  # folded once, then masked alike
            for number in self._numbers:
                texts = number(texts)
            text = texts[0]
        return text

    def __repr__(self) -> str:
        return f"judgehooks.redact.{self.name}"


def _api_keys(text: str) -> str:
    if "PRIVATE KEY-----" in text:
        text = _PEM.sub("[PRIVATE_KEY]", text)
    if "://" in text:
        text = _USERINFO.sub(lambda m: m.group()[:m.start(1) - m.start()] + "[API_KEY]@", text)
    if ("=" in text or ":" in text) and any(hint in text.lower() for hint in _ASSIGNED_HINTS):
        text = _assigned(text)
    for pattern in _API_KEYS:
        text = pattern.sub("[API_KEY]", text)
    text = _AWS_SECRET.sub(lambda m: "[API_KEY]" if _random_40(m.group()) else m.group(), text)
    return _BEARER.sub("Bearer [API_KEY]", text) if "Bearer " in text else text


def _random_40(text: str) -> bool:
    """Whether 40 base64 characters look drawn at random, as a secret is: both cases and a digit,
    and not many of / and + (a path of words has them every few characters)."""
    return (any(ch.isupper() for ch in text) and any(ch.islower() for ch in text)
            and any(ch.isdigit() for ch in text) and text.count("/") + text.count("+") <= 5)


def _assigned(text: str) -> str:
    parts, at, kept = [], 0, 0  # kept: the end of a value left as it was (its separators are not names' ends)
    for separator in _SEPARATOR.finditer(text):
        i = separator.start()
        name = None if i < max(at, kept) else _KEY_NAME.search(text, max(at, i - 24), i)
        if name is None or (name.start() > 0 and text[name.start() - 1].isascii() and text[name.start() - 1].isalnum()):
            continue
        value = _VALUE.match(text, i + 1)
        if value is None:
            continue
        if name.group().rstrip("\"' \t").lower() == "token" and text[i] == ":" and not _mixed(value.group(1)):
            kept = value.end(1)  # prose says "token: ..." too: after a bare `token:`, only letters with digits
            continue
        parts += [text[at:value.start(1)], "[API_KEY]"]
        at = value.end(1)
    parts.append(text[at:])
    return "".join(parts)


def _mixed(text: str) -> bool:
    return any(ch.isdigit() for ch in text) and any(ch.isalpha() for ch in text)


def _phones(texts: Folded) -> Folded:
    for pattern in _PHONES:
        texts = _mask(pattern, "PHONE", _phone, texts)
    return texts


def _emails(text: str) -> str:
    """Each @domain found, with the run of local-part characters before it (none: not an email)."""
    if "@" not in text:
        return text
    reverse = text[::-1]
    parts, at = [], 0
    for match in _DOMAIN.finditer(text):
        local = _LOCAL_RUN.match(reverse, len(text) - match.start())
        start = max(at, match.start() - (0 if local is None else local.end() - local.start()))
        if start < match.start():
            parts += [text[at:start], "[EMAIL]"]
            at = match.end()
    parts.append(text[at:])
    return "".join(parts)


def _phone(text: str) -> int:
    """A phone has 7-15 digits written with + or 00, else at least 9 (so 01.02.2026 is a date)."""
    digits = sum(ch.isdigit() for ch in text)
    international = text.startswith(("+", "00"))
    return len(text) if (7 if international else 9) <= digits <= (17 if international else 15) else 0


#: every kind `PIIRedactor` knows: ``redact=judgehooks.redact.PII``
PII = PIIRedactor()


class Presidio:
    """Microsoft Presidio's analyzer as a redactor (``pip install 'judgehooks[pii]'``): every entity
    it finds with at least `score_threshold` becomes ``[ENTITY_TYPE]`` (``[PERSON]``, ...).

    `analyzer`: a ready ``presidio_analyzer.AnalyzerEngine``; by default one is built, which loads the
    spaCy model Presidio is configured with (``en_core_web_lg`` unless you configure another)."""

    def __init__(self, *, entities: Sequence[str] | None = None, language: str = "en",
                 score_threshold: float = 0.5, analyzer: Any = None) -> None:
        # a range check NaN fails too (every comparison with NaN is false): judgehooks.redact imports nothing
        if isinstance(score_threshold, bool) or not isinstance(score_threshold, (int, float)) \
                or not 0 <= score_threshold <= 1:
            raise ValueError(f"score_threshold must be a number from 0 to 1, got {score_threshold!r}")
        if analyzer is None:
            try:
                from presidio_analyzer import AnalyzerEngine  # optional extra: pip install 'judgehooks[pii]'
            except ImportError:
                raise ImportError("Presidio needs presidio-analyzer: pip install 'judgehooks[pii]'") from None
            analyzer = AnalyzerEngine()
        self.analyzer = analyzer
        self.entities = None if entities is None else list(entities)
        self.language, self.score_threshold = language, score_threshold
        self.name = "Presidio"

    def __call__(self, text: str) -> str:
        found = self.analyzer.analyze(text=text, language=self.language, entities=self.entities,
                                      score_threshold=self.score_threshold)
        return _mask_spans(text, ((r.start, r.end, r.entity_type) for r in found))

    def __repr__(self) -> str:
        return f"judgehooks.redact.Presidio(language={self.language!r})"


def _mask_spans(text: str, spans: Iterable[tuple[int, int, str]]) -> str:
    """`text` with each span replaced by its label; overlapping spans merge (the first label wins)."""
    merged: list[list[Any]] = []
    for start, end, label in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end, label])
    parts, at = [], 0
    for start, end, label in merged:
        parts += [text[at:start], f"[{label}]"]
        at = end
    parts.append(text[at:])
    return "".join(parts)


def redactor_name(redact: Callable[[str], str]) -> str:
    """What a record's ``redacted_by`` says: a redactor's ``name`` attribute, else its qualified name."""
    name = getattr(redact, "name", None)
    if isinstance(name, str) and name:
        return name
    module = getattr(redact, "__module__", None) or ""
    qualname = getattr(redact, "__qualname__", None) or type(redact).__qualname__
    return f"{module}.{qualname}" if module and module != "builtins" else qualname

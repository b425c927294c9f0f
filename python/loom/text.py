"""loom's text tools (text/ in C++): a word <-> id Vocabulary, an IdfTable of document frequencies,
stopwords and a crude stemmer. Not in CNTK, whose readers take ids prepared beforehand."""

from __future__ import annotations

from . import _loom

Vocabulary = _loom.text.Vocabulary
IdfTable = _loom.text.IdfTable
is_stopword = _loom.text.is_stopword
crude_stem = _loom.text.crude_stem

__all__ = ["IdfTable", "Vocabulary", "crude_stem", "is_stopword"]

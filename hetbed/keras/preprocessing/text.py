"""``keras.preprocessing.text``: Keras's word splitting, hashing and ``Tokenizer`` (a word index
by descending frequency, ties in first-seen order; 0 is never a word's index)."""

from __future__ import annotations

import collections
import hashlib
import json
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

__all__ = ["Tokenizer", "hashing_trick", "one_hot", "text_to_word_sequence", "tokenizer_from_json"]

_FILTERS = '!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\t\n'


def text_to_word_sequence(
    input_text: str, filters: str = _FILTERS, lower: bool = True, split: str = " "
) -> list[str]:
    """The words of ``input_text``: lower-cased, each of ``filters`` replaced by ``split``,
    split on ``split``, empty pieces dropped."""
    if lower:
        input_text = input_text.lower()
    input_text = input_text.translate(str.maketrans({c: split for c in filters}))
    return [w for w in input_text.split(split) if w]


def hashing_trick(
    text: str,
    n: int,
    hash_function: Any = None,
    filters: str = _FILTERS,
    lower: bool = True,
    split: str = " ",
    analyzer: Callable | None = None,
) -> list[int]:
    """``hash(word) % (n - 1) + 1`` for each word. ``hash_function`` None is Python's ``hash``
    (salted per process for strings unless PYTHONHASHSEED is set, as in Keras); ``'md5'`` is the
    stable md5 of the UTF-8 word, read as a big integer; or any function of a word."""
    if hash_function is None:
        hash_function = hash
    elif hash_function == "md5":

        def hash_function(w: str) -> int:
            return int(hashlib.md5(w.encode()).hexdigest(), 16)

    if analyzer is None:
        seq = text_to_word_sequence(text, filters=filters, lower=lower, split=split)
    else:
        seq = analyzer(text)
    return [hash_function(w) % (n - 1) + 1 for w in seq]


def one_hot(
    input_text: str,
    n: int,
    filters: str = _FILTERS,
    lower: bool = True,
    split: str = " ",
    analyzer: Callable | None = None,
) -> list[int]:
    """``hashing_trick`` with Python's ``hash``: word ids in [1, n) (not one-hot vectors)."""
    return hashing_trick(
        input_text,
        n,
        hash_function=hash,
        filters=filters,
        lower=lower,
        split=split,
        analyzer=analyzer,
    )


class Tokenizer:
    """Turns texts into id sequences or ``[len(texts), num_words]`` matrices. ``fit_on_texts``
    numbers the words by descending count from 1 (``oov_token``, if given, is 1);
    ``texts_to_sequences`` keeps the ids below ``num_words`` (when given) and maps other words
    to the ``oov_token``'s id, or drops them without one."""

    def __init__(
        self,
        num_words: int | None = None,
        filters: str = _FILTERS,
        lower: bool = True,
        split: str = " ",
        char_level: bool = False,
        oov_token: Any = None,
        analyzer: Callable | None = None,
        **kwargs: Any,
    ):
        if "nb_words" in kwargs:
            warnings.warn(
                "The `nb_words` argument in `Tokenizer` has been renamed `num_words`.",
                stacklevel=2,
            )
            num_words = kwargs.pop("nb_words")
        document_count = kwargs.pop("document_count", 0)
        if kwargs:
            raise TypeError("Unrecognized keyword arguments: " + str(kwargs))
        self.word_counts: dict = collections.OrderedDict()
        self.word_docs: dict = collections.defaultdict(int)
        self.filters, self.split, self.lower = filters, split, lower
        self.num_words = num_words
        self.document_count = document_count
        self.char_level = char_level
        self.oov_token = oov_token
        self.index_docs: dict = collections.defaultdict(int)
        self.word_index: dict = {}
        self.index_word: dict = {}
        self.analyzer = analyzer

    def _tokens(self, text: Any) -> Any:
        if self.char_level or isinstance(text, list):
            if self.lower:
                text = [t.lower() for t in text] if isinstance(text, list) else text.lower()
            return text
        if self.analyzer is not None:
            return self.analyzer(text)
        return text_to_word_sequence(text, filters=self.filters, lower=self.lower, split=self.split)

    def fit_on_texts(self, texts: Iterable) -> None:
        """Count the words of ``texts`` (strings, or lists of tokens) and renumber them."""
        for text in texts:
            self.document_count += 1
            seq = self._tokens(text)
            for w in seq:
                self.word_counts[w] = self.word_counts.get(w, 0) + 1
            for w in set(seq):
                self.word_docs[w] += 1
        wcounts = list(self.word_counts.items())
        wcounts.sort(key=lambda x: x[1], reverse=True)
        vocab = [] if self.oov_token is None else [self.oov_token]
        vocab.extend(w for w, _ in wcounts)
        self.word_index = dict(zip(vocab, range(1, len(vocab) + 1)))
        self.index_word = {c: w for w, c in self.word_index.items()}
        for w, c in list(self.word_docs.items()):
            self.index_docs[self.word_index[w]] = c

    def fit_on_sequences(self, sequences: Any) -> None:
        """Count documents per id (for ``sequences_to_matrix``'s tfidf) from id sequences."""
        self.document_count += len(sequences)
        for seq in sequences:
            for i in set(seq):
                self.index_docs[i] += 1

    def texts_to_sequences(self, texts: Iterable) -> list[list[int]]:
        return list(self.texts_to_sequences_generator(texts))

    def texts_to_sequences_generator(self, texts: Iterable) -> Iterator[list[int]]:
        num_words = self.num_words
        oov = self.word_index.get(self.oov_token)
        for text in texts:
            vect = []
            for w in self._tokens(text):
                i = self.word_index.get(w)
                if i is not None:
                    if num_words and i >= num_words:
                        if oov is not None:
                            vect.append(oov)
                    else:
                        vect.append(i)
                elif self.oov_token is not None:
                    vect.append(oov)
            yield vect

    def sequences_to_texts(self, sequences: Iterable) -> list[str]:
        return list(self.sequences_to_texts_generator(sequences))

    def sequences_to_texts_generator(self, sequences: Iterable) -> Iterator[str]:
        num_words = self.num_words
        oov = self.word_index.get(self.oov_token)
        for seq in sequences:
            vect = []
            for num in seq:
                word = self.index_word.get(num)
                if word is not None:
                    if num_words and num >= num_words:
                        if oov is not None:
                            vect.append(self.index_word[oov])
                    else:
                        vect.append(word)
                elif self.oov_token is not None:
                    vect.append(self.index_word[oov])
            yield " ".join(vect)

    def texts_to_matrix(self, texts: Iterable, mode: str = "binary") -> np.ndarray:
        """``sequences_to_matrix(texts_to_sequences(texts), mode)``."""
        return self.sequences_to_matrix(self.texts_to_sequences(texts), mode=mode)

    def sequences_to_matrix(self, sequences: Any, mode: str = "binary") -> np.ndarray:
        """A float64 ``[len(sequences), num_words]`` matrix (``len(word_index) + 1`` columns
        without ``num_words``): per row and id below that, ``binary`` 1, ``count`` c, ``freq``
        c / len(seq), or ``tfidf`` (1 + log c) * log(1 + docs / (1 + docs with the id))."""
        if not self.num_words:
            if not self.word_index:
                raise ValueError(
                    "Specify a dimension (`num_words` argument), or fit on some text data first."
                )
            num_words = len(self.word_index) + 1
        else:
            num_words = self.num_words
        if mode == "tfidf" and not self.document_count:
            raise ValueError("Fit the Tokenizer on some data before using tfidf mode.")
        if mode not in ("binary", "count", "freq", "tfidf"):
            raise ValueError("Unknown vectorization mode:", mode)
        x = np.zeros((len(sequences), num_words))
        for i, seq in enumerate(sequences):
            if not seq:
                continue
            counts: dict = collections.defaultdict(int)
            for j in seq:
                if j < num_words:
                    counts[j] += 1
            for j, c in counts.items():
                if mode == "count":
                    x[i][j] = c
                elif mode == "freq":
                    x[i][j] = c / len(seq)
                elif mode == "binary":
                    x[i][j] = 1
                else:
                    idf = np.log(1 + self.document_count / (1 + self.index_docs.get(j, 0)))
                    x[i][j] = (1 + np.log(c)) * idf
        return x

    def get_config(self) -> dict:
        return {
            "num_words": self.num_words,
            "filters": self.filters,
            "lower": self.lower,
            "split": self.split,
            "char_level": self.char_level,
            "oov_token": self.oov_token,
            "document_count": self.document_count,
            "word_counts": json.dumps(self.word_counts),
            "word_docs": json.dumps(self.word_docs),
            "index_docs": json.dumps(self.index_docs),
            "index_word": json.dumps(self.index_word),
            "word_index": json.dumps(self.word_index),
        }

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(
            {"class_name": type(self).__name__, "config": self.get_config()}, **kwargs
        )


def tokenizer_from_json(json_string: str) -> Tokenizer:
    """The ``Tokenizer`` ``to_json`` wrote."""
    config = json.loads(json_string).get("config")
    word_counts = json.loads(config.pop("word_counts"))
    word_docs = json.loads(config.pop("word_docs"))
    index_docs = {int(k): v for k, v in json.loads(config.pop("index_docs")).items()}
    index_word = {int(k): v for k, v in json.loads(config.pop("index_word")).items()}
    word_index = json.loads(config.pop("word_index"))
    tok = Tokenizer(**config)
    tok.word_counts, tok.word_docs, tok.index_docs = word_counts, word_docs, index_docs
    tok.word_index, tok.index_word = word_index, index_word
    return tok

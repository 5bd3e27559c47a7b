"""``keras.preprocessing.sequence``: padding of id sequences and word2vec skip-gram pairs, with
Keras's semantics (``pad_sequences`` pads and truncates at the front by default, into int32)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np

__all__ = ["make_sampling_table", "pad_sequences", "skipgrams"]


def pad_sequences(
    sequences: Any,
    maxlen: int | None = None,
    dtype: Any = "int32",
    padding: str = "pre",
    truncating: str = "pre",
    value: Any = 0.0,
) -> np.ndarray:
    """A ``[len(sequences), maxlen, *sample_shape]`` array of ``value`` holding each sequence,
    cut to its last (``truncating='pre'``) or first (``'post'``) ``maxlen`` items and placed at
    the end (``padding='pre'``) or start (``'post'``) of its row. ``maxlen`` defaults to the
    longest sequence; the items' own shape is taken from the first non-empty sequence."""
    if not hasattr(sequences, "__len__"):
        raise ValueError("`sequences` must be iterable.")
    lengths = []
    sample_shape: tuple = ()
    found = False
    for x in sequences:
        try:
            lengths.append(len(x))
        except TypeError as e:
            raise ValueError(
                f"`sequences` must be a list of iterables. Found non-iterable: {x}"
            ) from e
        if not found and len(x):
            sample_shape = np.asarray(x).shape[1:]
            found = True
    if maxlen is None:
        if not lengths:
            raise ValueError("pad_sequences: no sequences and no maxlen")
        maxlen = int(np.max(lengths))
    is_str = np.issubdtype(dtype, np.str_)
    if isinstance(value, str) and dtype != object and not is_str:  # noqa: E721 - Keras's test
        raise ValueError(
            f"`dtype` {dtype} is not compatible with `value`'s type: {type(value)}\n"
            "You should set `dtype=object` for variable length strings."
        )
    out = np.full((len(sequences), maxlen, *sample_shape), value, dtype=dtype)
    for i, s in enumerate(sequences):
        if not len(s):
            continue
        if truncating == "pre":
            kept = s[-maxlen:] if maxlen else s[:0]
        elif truncating == "post":
            kept = s[:maxlen]
        else:
            raise ValueError(f'Truncating type "{truncating}" not understood')
        kept = np.asarray(kept, dtype=dtype)
        if kept.shape[1:] != sample_shape:
            raise ValueError(
                f"Shape of sample {kept.shape[1:]} of sequence at position {i} is different "
                f"from expected shape {sample_shape}"
            )
        if padding == "post":
            out[i, : len(kept)] = kept
        elif padding == "pre":
            if len(kept):
                out[i, -len(kept) :] = kept
        else:
            raise ValueError(f'Padding type "{padding}" not understood')
    return out


def make_sampling_table(size: int, sampling_factor: float = 1e-5) -> np.ndarray:
    """word2vec's keep probabilities by word rank (Zipf's law for the word frequencies), as
    Keras computes them; entry 0 is the rank-1 value."""
    gamma = 0.577
    rank = np.arange(size)
    rank[0] = 1
    inv_fq = rank * (np.log(rank) + gamma) + 0.5 - 1.0 / (12.0 * rank)
    f = sampling_factor * inv_fq
    return np.minimum(1.0, f / np.sqrt(f))


def skipgrams(
    sequence: Any,
    vocabulary_size: int,
    window_size: int = 4,
    negative_samples: float = 1.0,
    shuffle: bool = True,
    categorical: bool = False,
    sampling_table: Any = None,
    seed: int | None = None,
) -> tuple[list, list]:
    """(word, context word) pairs labelled 1 within ``window_size`` of each other (id 0 is
    skipped), plus ``negative_samples`` times as many (word, random id in [1, vocabulary_size))
    pairs labelled 0, shuffled; Python's ``random`` drawn in Keras's order, so a given
    ``random.seed`` gives Keras's pairs."""
    couples: list = []
    labels: list = []
    for i, wi in enumerate(sequence):
        if not wi:
            continue
        if sampling_table is not None and sampling_table[wi] < random.random():
            continue
        for j in range(max(0, i - window_size), min(len(sequence), i + window_size + 1)):
            if j != i and sequence[j]:
                couples.append([wi, sequence[j]])
                labels.append([0, 1] if categorical else 1)
    if negative_samples > 0:
        n_neg = int(len(labels) * negative_samples)
        words = [c[0] for c in couples]
        random.shuffle(words)
        couples += [
            [words[i % len(words)], random.randint(1, int(vocabulary_size - 1))]
            for i in range(n_neg)
        ]
        labels += [[1, 0] if categorical else 0 for _ in range(n_neg)]
    if shuffle:
        if seed is None:
            seed = random.randint(0, int(10e6))
        random.seed(seed)
        random.shuffle(couples)
        random.seed(seed)
        random.shuffle(labels)
    return couples, labels

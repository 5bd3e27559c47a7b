"""``keras.preprocessing``: ``sequence`` (pad_sequences, skipgrams, make_sampling_table) and
``text`` (Tokenizer, text_to_word_sequence, one_hot, hashing_trick), numpy and plain Python as
Keras's own (keras_preprocessing); no ``image``."""

from . import sequence, text  # noqa: F401

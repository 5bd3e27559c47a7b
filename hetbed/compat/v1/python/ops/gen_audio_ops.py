"""``tensorflow.python.ops.gen_audio_ops``: TF's audio ops (``decode_wav``, ``encode_wav``,
``audio_spectrogram``, ``mfcc``) as later TF1 speech programs import them."""

from hetbed.runtime.ops.audio import audio_spectrogram, decode_wav, encode_wav, mfcc

__all__ = ["audio_spectrogram", "decode_wav", "encode_wav", "mfcc"]

"""Whisper's audio front end in NumPy: samples in, the log-mel features a Whisper model's
``input_features`` takes out, as transformers' ``WhisperFeatureExtractor`` computes them (the
model itself starts at its convolutions)::

    import wave, numpy as np, ein.audio
    with wave.open("speech.wav") as f:              # 16 kHz, 16-bit mono
        samples = np.frombuffer(f.readframes(f.getnframes()), np.int16) / 32768.0
    features = ein.audio.log_mel_spectrogram(samples)[None]      # [1, 80, 3000]
    tokens = whisper.generate(start_ids, encoder_inputs={"input_features": features})
"""
from typing import Optional

import numpy as np

__all__ = ["log_mel_spectrogram", "mel_filters"]

N_FFT, HOP_LENGTH = 400, 160


def _hz_to_mel(hz):
    """The Slaney mel scale: linear below 1 kHz, logarithmic above."""
    hz = np.asarray(hz, np.float64)
    return np.where(hz < 1000.0, 3.0 * hz / 200.0, 15.0 + np.log(np.maximum(hz, 1e-10) / 1000.0) * 27.0 / np.log(6.4))


def _mel_to_hz(mel):
    mel = np.asarray(mel, np.float64)
    return np.where(mel < 15.0, 200.0 * mel / 3.0, 1000.0 * np.exp(np.log(6.4) / 27.0 * (mel - 15.0)))


def mel_filters(n_mels: int = 80, sampling_rate: int = 16000, n_fft: int = N_FFT) -> np.ndarray:
    """[1 + n_fft // 2, n_mels] triangular filters from 0 Hz to the Nyquist frequency, spaced on
    the Slaney mel scale and each normalised to unit area (librosa's and transformers' "slaney")."""
    mel_points = np.linspace(_hz_to_mel(0.0), _hz_to_mel(sampling_rate / 2), n_mels + 2)
    edges = _mel_to_hz(mel_points)
    fft_freqs = np.linspace(0, sampling_rate / 2, 1 + n_fft // 2)
    widths = np.diff(edges)
    slopes = edges[None, :] - fft_freqs[:, None]
    down = -slopes[:, :-2] / widths[:-1]
    up = slopes[:, 2:] / widths[1:]
    filters = np.maximum(0.0, np.minimum(down, up))
    return filters * (2.0 / (edges[2:n_mels + 2] - edges[:n_mels]))


def log_mel_spectrogram(audio, *, n_mels: int = 80, sampling_rate: int = 16000,
                        chunk_seconds: Optional[float] = 30.0) -> np.ndarray:
    """The log-mel features [n_mels, frames] (float32) of mono ``audio`` (floats in [-1, 1] at
    ``sampling_rate``): zero-padded or cut to ``chunk_seconds`` (Whisper's 30 s give 3000 frames;
    None keeps the length), a 400-point Hann-windowed STFT every 160 samples (reflect-padded
    at the ends), its power through the mel filters, log10 clamped at 1e-10 and to 8 below its
    maximum, then (x + 4) / 4."""
    audio = np.asarray(audio, np.float64)
    if audio.ndim != 1:
        raise ValueError(f"audio must be one channel of samples (a 1-d array), got shape {audio.shape}")
    if chunk_seconds is not None:
        length = int(round(chunk_seconds * sampling_rate))
        audio = np.pad(audio[:length], (0, max(0, length - audio.shape[0])))
    if audio.shape[0] < 2:
        raise ValueError("audio must hold at least 2 samples")
    padded = np.pad(audio, N_FFT // 2, mode="reflect")
    frames = 1 + (padded.shape[0] - N_FFT) // HOP_LENGTH
    window = np.hanning(N_FFT + 1)[:-1]  # periodic
    starts = np.arange(frames)[:, None] * HOP_LENGTH + np.arange(N_FFT)[None, :]
    power = np.abs(np.fft.rfft(padded[starts] * window, n=N_FFT)) ** 2  # [frames, 1 + n_fft // 2]
    mel = mel_filters(n_mels, sampling_rate).T @ power.T                # [n_mels, frames]
    log_spec = np.log10(np.maximum(mel, 1e-10))[:, :-1]  # Whisper drops the last frame
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return ((log_spec + 4.0) / 4.0).astype(np.float32)

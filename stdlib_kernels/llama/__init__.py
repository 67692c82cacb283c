"""Running llama-family GGUF models with stdlib kernels: `Llama.from_gguf(path)`,
`Tokenizer.from_gguf(path)`, `python -m stdlib_kernels.llama MODEL.gguf` (docs/llama.md)."""
from __future__ import annotations

from .loader import GGUFModel, Hparams, read_gguf
from .model import Llama
from .tokenizer import Tokenizer

__all__ = ["Llama", "Tokenizer", "read_gguf", "GGUFModel", "Hparams"]

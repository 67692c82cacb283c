"""`Tokenizer.from_gguf(path)`: the vocabulary a GGUF file carries, encoding as llama.cpp does.

* `tokenizer.ggml.model = "llama"` (SentencePiece BPE, llama 1/2, Mistral): spaces become U+2581
  (a leading one is added when `tokenizer.ggml.add_space_prefix` is true, the default); the text
  is split into characters and the adjacent pair whose concatenation is a token with the
  highest score (`tokenizer.ggml.scores`; ties: the leftmost) is merged until none is; a
  piece that is not a token is spelled with the byte tokens `<0xXX>` (byte fallback), or
  `<unk>` without them.
* `tokenizer.ggml.model = "gpt2"` (byte-level BPE, llama 3): the text is split by the
  pre-tokenizer regex `tokenizer.ggml.pre` names ("llama-bpe" / "llama3": llama 3's, "default"
  / absent: GPT-2's), each piece's UTF-8 bytes are spelled in GPT-2's byte alphabet and merged
  by `tokenizer.ggml.merges` rank (lowest first, ties: the leftmost).

Control tokens (token_type 3) and user-defined ones (4) written in the text are matched whole
(llama.cpp's `parse_special`; a SentencePiece vocabulary's space prefix is added to the text
after each of them too, as llama.cpp does — transformers adds it only at the start, and does
not add a second one to text that starts with a space); `<s>` / BOS is prepended when `tokenizer.ggml.add_bos_token`
says so (default true for "llama", false for "gpt2"), EOS appended when `add_eos_token` does.
"""
from __future__ import annotations

import heapq
import os

PRE_SPLITS = {
    "default": r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
    "llama-bpe": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
}
PRE_SPLITS["llama3"] = PRE_SPLITS["llama-bpe"]
PRE_SPLITS["llama-v3"] = PRE_SPLITS["llama-bpe"]
PRE_SPLITS["gpt2"] = PRE_SPLITS["default"]

SPACE = "\u2581"
CONTROL, USER_DEFINED, BYTE = 3, 4, 6


def byte_unicode() -> dict:
    """GPT-2's byte → printable character table (the byte-level BPE alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


class Tokenizer:
    """Text ↔ token ids for a GGUF vocabulary (module docstring)."""

    def __init__(self, meta: dict, path: str = "<metadata>"):
        model = meta.get("tokenizer.ggml.model")
        if model is None:
            raise ValueError(f"Tokenizer: {path!r} lacks the metadata key "
                             f"'tokenizer.ggml.model'")
        if model not in ("llama", "gpt2"):
            raise ValueError(f"Tokenizer: tokenizer.ggml.model {model!r} is not supported "
                             f"(only 'llama' and 'gpt2')")
        tokens = meta.get("tokenizer.ggml.tokens")
        if tokens is None:
            raise ValueError(f"Tokenizer: {path!r} lacks the metadata key "
                             f"'tokenizer.ggml.tokens'")
        self.model, self.tokens = model, list(tokens)
        self.ids = {}
        for i, t in enumerate(self.tokens):
            self.ids.setdefault(t, i)
        n = len(self.tokens)
        self.types = list(meta.get("tokenizer.ggml.token_type") or [1] * n)
        self.bos = meta.get("tokenizer.ggml.bos_token_id")
        self.eos = meta.get("tokenizer.ggml.eos_token_id")
        self.unk = meta.get("tokenizer.ggml.unknown_token_id")
        self.add_bos = bool(meta.get("tokenizer.ggml.add_bos_token", model == "llama"))
        self.add_eos = bool(meta.get("tokenizer.ggml.add_eos_token", False))
        self.add_space_prefix = bool(meta.get("tokenizer.ggml.add_space_prefix", True))
        self.special = sorted((t for t, ty in zip(self.tokens, self.types)
                               if ty in (CONTROL, USER_DEFINED) and t), key=len, reverse=True)
        if model == "llama":
            scores = meta.get("tokenizer.ggml.scores")
            if scores is None:
                raise ValueError(f"Tokenizer: {path!r} lacks the metadata key "
                                 f"'tokenizer.ggml.scores' (needed by a 'llama' vocabulary)")
            self.scores = list(scores)
            self.byte_ids = {}
            for b in range(256):
                i = self.ids.get(f"<0x{b:02X}>")
                if i is not None:
                    self.byte_ids[b] = i
        else:
            merges = meta.get("tokenizer.ggml.merges")
            if merges is None:
                raise ValueError(f"Tokenizer: {path!r} lacks the metadata key "
                                 f"'tokenizer.ggml.merges' (needed by a 'gpt2' vocabulary)")
            self.ranks = {}
            for r, m in enumerate(merges):
                a, _, b = m.partition(" ")
                self.ranks.setdefault((a, b), r)
            pre = meta.get("tokenizer.ggml.pre", "default")
            if pre not in PRE_SPLITS:
                raise ValueError(f"Tokenizer: tokenizer.ggml.pre {pre!r} is not supported "
                                 f"(supported: {', '.join(sorted(PRE_SPLITS))})")
            import regex
            self.split = regex.compile(PRE_SPLITS[pre])
            self.byte_chars = byte_unicode()
            self.char_bytes = {c: b for b, c in self.byte_chars.items()}

    @classmethod
    def from_gguf(cls, path) -> "Tokenizer":
        """The tokenizer of a GGUF file's `tokenizer.ggml.*` metadata."""
        from .loader import _open, read_metadata
        path = os.fspath(path)
        reader = _open(path)
        try:
            meta = read_metadata(reader)
        finally:
            del reader
        return cls(meta, path)

    def __len__(self) -> int:
        return len(self.tokens)

    # -- encoding ------------------------------------------------------------------------------
    def encode(self, text: str, add_special: bool = True, parse_special: bool = True) -> list:
        """Token ids of `text` (BOS / EOS per the file when `add_special`; control tokens in
        the text matched whole when `parse_special`)."""
        if not isinstance(text, str):
            raise TypeError(f"Tokenizer.encode: text must be a str, got {type(text).__name__}")
        out = []
        if add_special and self.add_bos and self.bos is not None:
            out.append(int(self.bos))
        prev_special = True                          # llama.cpp: a space before the text and
        for piece, special in self._fragments(text, parse_special):   # after each special
            if special:
                out.append(self.ids[piece])
            elif self.model == "llama":
                if self.add_space_prefix and prev_special:
                    piece = " " + piece
                out.extend(self._spm(piece))
            else:
                for word in self.split.findall(piece):
                    out.extend(self._bpe(word))
            prev_special = special
        if add_special and self.add_eos and self.eos is not None:
            out.append(int(self.eos))
        return out

    def _fragments(self, text: str, parse_special: bool):
        """(text, False) and (special token, True) pieces in order."""
        if not parse_special or not self.special:
            if text:
                yield text, False
            return
        i, start = 0, 0
        while i < len(text):
            for s in self.special:
                if text.startswith(s, i):
                    if start < i:
                        yield text[start:i], False
                    yield s, True
                    i += len(s)
                    start = i
                    break
            else:
                i += 1
        if start < len(text):
            yield text[start:], False

    def _spm(self, text: str) -> list:
        """llama.cpp's SPM tokenizer: best-score bigram merges over characters."""
        syms = list(text.replace(" ", SPACE))
        if not syms:
            return []
        prev = list(range(-1, len(syms) - 1))
        nxt = list(range(1, len(syms) + 1))
        nxt[-1] = -1
        alive = [True] * len(syms)
        heap = []

        def push(left):
            right = nxt[left]
            if right == -1:
                return
            tid = self.ids.get(syms[left] + syms[right])
            if tid is not None:
                heapq.heappush(heap, (-self.scores[tid], left, syms[left], syms[right]))

        for i in range(len(syms) - 1):
            push(i)
        while heap:
            _, left, a, b = heapq.heappop(heap)
            right = nxt[left]
            if not alive[left] or right == -1 or syms[left] != a or syms[right] != b:
                continue                             # stale
            syms[left] = a + b
            alive[right] = False
            nxt[left] = nxt[right]
            if nxt[right] != -1:
                prev[nxt[right]] = left
            if prev[left] != -1:
                push(prev[left])
            push(left)
        out = []
        i = 0
        while i != -1:
            s = syms[i]
            tid = self.ids.get(s)
            if tid is not None:
                out.append(tid)
            else:
                for b in s.encode("utf-8"):
                    if b in self.byte_ids:
                        out.append(self.byte_ids[b])
                    elif self.unk is not None:
                        out.append(int(self.unk))
            i = nxt[i]
        return out

    def _bpe(self, word: str) -> list:
        """Byte-level BPE of one pre-tokenized piece: lowest-rank merges first."""
        syms = [self.byte_chars[b] for b in word.encode("utf-8")]
        while len(syms) > 1:
            best, at = None, -1
            for i in range(len(syms) - 1):
                r = self.ranks.get((syms[i], syms[i + 1]))
                if r is not None and (best is None or r < best):
                    best, at = r, i
            if best is None:
                break
            syms[at:at + 2] = [syms[at] + syms[at + 1]]
        out = []
        for s in syms:
            tid = self.ids.get(s)
            if tid is not None:
                out.append(tid)
            else:                                    # not in the vocabulary: byte by byte
                out.extend(self.ids[c] for c in s if c in self.ids)
        return out

    # -- decoding ------------------------------------------------------------------------------
    def token_bytes(self, tid: int) -> bytes:
        """The bytes token `tid` stands for (control tokens: their text)."""
        t = self.tokens[tid]
        ty = self.types[tid] if tid < len(self.types) else 1
        if ty == CONTROL:
            return t.encode("utf-8")
        if self.model == "llama":
            if ty == BYTE and len(t) == 6 and t.startswith("<0x"):
                return bytes([int(t[3:5], 16)])
            return t.replace(SPACE, " ").encode("utf-8")
        if ty == USER_DEFINED:
            return t.encode("utf-8")
        try:
            return bytes(self.char_bytes[c] for c in t)
        except KeyError:
            return t.encode("utf-8")

    def decode(self, ids, skip_special: bool = True) -> str:
        """Text of token ids (a SentencePiece vocabulary's leading space removed)."""
        parts = []
        for tid in ids:
            tid = int(tid)
            if not 0 <= tid < len(self.tokens):
                raise ValueError(f"Tokenizer.decode: token id {tid} is outside the "
                                 f"vocabulary [0, {len(self.tokens)})")
            if skip_special and self.types[tid] == CONTROL:
                continue
            parts.append(self.token_bytes(tid))
        text = b"".join(parts).decode("utf-8", errors="replace")
        if self.model == "llama" and self.add_space_prefix and text.startswith(" "):
            text = text[1:]
        return text

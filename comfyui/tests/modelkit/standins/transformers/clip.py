"""CLIPTokenizer: the CLIP byte-level BPE over a tokenizer folder's
vocab.json and merges.txt, as transformers' slow CLIPTokenizer does it
without ftfy (its usual path): BERT-style text cleaning (control
characters dropped, whitespace normalised, CJK characters split, NFC,
lower case, accents kept), CLIP's pre-tokenisation (the special tokens,
contractions, runs of letters, single digits, runs of other symbols),
bytes mapped to printable characters, merges applied by rank with "</w>"
marking each word's end."""
import functools
import json
import os
import re
import unicodedata

CONTRACTIONS = ("s", "t", "re", "ve", "m", "ll", "d")  # after "'", in CLIP's order


@functools.lru_cache(maxsize=1)
def byte_to_char():
    """GPT-2/CLIP's map of the 256 byte values to printable characters:
    printable Latin-1 bytes stand for themselves, the rest for 256 + i."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("\xa1"), ord("\xac") + 1),
            *range(ord("\xae"), ord("\xff") + 1)]
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def is_cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def clean_text(text):
    """BERT's basic tokenizer as CLIP uses it: words separated by single
    spaces, lower-cased, with CJK characters as words of their own."""
    chars = []
    for c in text:
        cp, cat = ord(c), unicodedata.category(c)
        if cp in (0, 0xFFFD) or (cat.startswith("C") and c not in "\t\n\r"):
            continue
        if c in " \t\n\r" or cat == "Zs":
            chars.append(" ")
        elif is_cjk(cp):
            chars.append(f" {c} ")
        else:
            chars.append(c)
    text = unicodedata.normalize("NFC", "".join(chars))
    return " ".join(w.lower() for w in text.split())


def _kind(c):
    """'L' letter, 'N' number, ' ' whitespace, or '' anything else."""
    if c.isspace():
        return " "
    cat = unicodedata.category(c)[0]
    return cat if cat in "LN" else ""


def pre_tokenize(text, specials):
    """CLIP's regex, <|startoftext|>|<|endoftext|>|'s|'t|'re|'ve|'m|'ll|
    'd|[\\p{L}]+|[\\p{N}]|[^\\s\\p{L}\\p{N}]+ (ignoring case), as a scan."""
    out, i = [], 0
    while i < len(text):
        special = next((s for s in specials if text.startswith(s, i)), None)
        if special:
            out.append(special)
            i += len(special)
            continue
        if text[i] == "'":
            c = next((c for c in CONTRACTIONS if text[i + 1:i + 1 + len(c)].lower() == c), None)
            if c:
                out.append(text[i:i + 1 + len(c)])
                i += 1 + len(c)
                continue
        kind, j = _kind(text[i]), i + 1
        if kind == " ":
            i = j
            continue
        if kind != "N":
            while j < len(text) and _kind(text[j]) == kind:
                j += 1
        out.append(text[i:j])
        i = j
    return out


def bpe(word, ranks):
    """The merged symbols of @word (already byte-mapped), the last one
    ending in "</w>"."""
    symbols = list(word[:-1]) + [word[-1] + "</w>"]
    while len(symbols) > 1:
        pairs = {(a, b) for a, b in zip(symbols, symbols[1:])}
        best = min(pairs, key=lambda p: ranks.get(p, float("inf")))
        if best not in ranks:
            break
        merged, i = [], 0
        while i < len(symbols):
            if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == best:
                merged.append(symbols[i] + symbols[i + 1])
                i += 2
            else:
                merged.append(symbols[i])
                i += 1
        symbols = merged
    return symbols


def special_content(value):
    """A special token's text from a tokenizer config entry (a string or
    an AddedToken dict)."""
    return value.get("content") if isinstance(value, dict) else value


def read_json(path):
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


class CLIPTokenizer:
    """The tokenizer SD1's text encoder uses (comfy/sd1_tokenizer)."""

    def __init__(self, vocab_file, merges_file, bos_token="<|startoftext|>",
                 eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                 unk_token="<|endoftext|>", model_max_length=77, errors="replace", **_):
        """The vocabulary, the first 48894 merges (as CLIP's own tokenizer
        reads merges.txt) and the special tokens; other configuration
        entries (do_lower_case, add_prefix_space, ...) are what this
        tokenizer does anyway."""
        with open(vocab_file, encoding="utf-8") as f:
            self.encoder = json.load(f)
        self.decoder = {v: k for k, v in self.encoder.items()}
        with open(merges_file, encoding="utf-8") as f:
            lines = f.read().strip().split("\n")[1:49152 - 256 - 2 + 1]
        self.ranks = {tuple(line.split()): i for i, line in enumerate(lines)}
        self.bos_token, self.eos_token = special_content(bos_token), special_content(eos_token)
        self.pad_token, self.unk_token = special_content(pad_token), special_content(unk_token)
        self.model_max_length, self.errors = model_max_length, errors
        self.byte_encoder = byte_to_char()
        self.byte_decoder = {v: k for k, v in self.byte_encoder.items()}
        self._bpe = functools.lru_cache(maxsize=65536)(lambda w: tuple(bpe(w, self.ranks)))

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        """The tokenizer of folder @path (vocab.json, merges.txt and the
        special tokens of tokenizer_config.json and special_tokens_map.json);
        @kwargs override the configuration."""
        if not os.path.isdir(path):
            raise OSError(f"{path} is not a tokenizer folder "
                          "(this stand-in loads local folders only)")
        config = read_json(os.path.join(path, "tokenizer_config.json"))
        config.update(read_json(os.path.join(path, "special_tokens_map.json")))
        config.update(kwargs)
        return cls(os.path.join(path, "vocab.json"), os.path.join(path, "merges.txt"), **config)

    @property
    def specials(self):
        """The special tokens' texts, longest first (matched before words)."""
        tokens = {self.bos_token, self.eos_token, self.pad_token, self.unk_token}
        return sorted(tokens, key=len, reverse=True)

    @property
    def bos_token_id(self):
        return self.encoder.get(self.bos_token)

    @property
    def eos_token_id(self):
        return self.encoder.get(self.eos_token)

    @property
    def pad_token_id(self):
        return self.encoder.get(self.pad_token)

    @property
    def unk_token_id(self):
        return self.encoder.get(self.unk_token)

    @property
    def vocab_size(self):
        return len(self.encoder)

    def __len__(self):
        return len(self.encoder)

    def get_vocab(self):
        return dict(self.encoder)

    def tokenize(self, text):
        """The BPE tokens of @text, special tokens kept whole."""
        pattern = "(" + "|".join(re.escape(s) for s in self.specials) + ")"
        out = []
        for part in re.split(pattern, text):
            if part in self.specials:
                out.append(part)
                continue
            for word in pre_tokenize(clean_text(part), self.specials):
                mapped = "".join(self.byte_encoder[b] for b in word.encode("utf-8"))
                out.extend(self._bpe(mapped))
        return out

    def convert_tokens_to_ids(self, tokens):
        if isinstance(tokens, str):
            return self.encoder.get(tokens, self.unk_token_id)
        return [self.encoder.get(t, self.unk_token_id) for t in tokens]

    def convert_ids_to_tokens(self, ids):
        if isinstance(ids, int):
            return self.decoder.get(ids, self.unk_token)
        return [self.decoder.get(i, self.unk_token) for i in ids]

    def encode(self, text, add_special_tokens=True):
        ids = self.convert_tokens_to_ids(self.tokenize(text))
        return [self.bos_token_id, *ids, self.eos_token_id] if add_special_tokens else ids

    def __call__(self, text, add_special_tokens=True, **_):
        """{"input_ids", "attention_mask"} of @text (or of each text of a
        list), with the start and end tokens around it."""
        if isinstance(text, (list, tuple)):
            ids = [self.encode(t, add_special_tokens) for t in text]
            return {"input_ids": ids, "attention_mask": [[1] * len(i) for i in ids]}
        ids = self.encode(text, add_special_tokens)
        return {"input_ids": ids, "attention_mask": [1] * len(ids)}

    def convert_tokens_to_string(self, tokens):
        raw = bytearray(self.byte_decoder[c] for c in "".join(tokens))
        return raw.decode("utf-8", errors=self.errors).replace("</w>", " ").strip()

    def decode(self, token_ids, skip_special_tokens=False, **_):
        """The text of @token_ids; special tokens as themselves unless
        skipped, separated from the text around them by spaces."""
        specials = set(self.specials)
        parts, run = [], []
        for tok in self.convert_ids_to_tokens([int(i) for i in token_ids]):
            if tok in specials:
                if run:
                    parts.append(self.convert_tokens_to_string(run))
                run = []
                if not skip_special_tokens:
                    parts.append(tok)
            else:
                run.append(tok)
        if run:
            parts.append(self.convert_tokens_to_string(run))
        return " ".join(parts)

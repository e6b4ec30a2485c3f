#!/usr/bin/env python3
"""Trains small tokenizers that exercise the tokenizer.json components other than the
MiniMax pipeline (NFKC, Replace, Prepend, Metaspace, Digits, ByteLevel with its own regex,
TemplateProcessing, added tokens with lstrip/rstrip/single_word/normalized, Fuse/Strip decoders)
and records reference encodings for a string list. Needs the `tokenizers` library.
Usage: make_tokenizer_variants.py STRINGS.json OUT_DIR
Writes OUT_DIR/NAME.tokenizer.json and OUT_DIR/NAME.encodings.json per variant.
"""
import json
import os
import sys

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers


def train(tok, strings, vocab, special):
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=special, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
                                  if isinstance(tok.pre_tokenizer, pre_tokenizers.ByteLevel) else [])
    tok.train_from_iterator([s * 2 for s in strings], trainer)


def variants():
    # 1. sentencepiece-like: NFKC + Metaspace, TemplateProcessing with BOS/EOS.
    t = Tokenizer(models.BPE(unk_token="<unk>"))
    t.normalizer = normalizers.NFKC()
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    t.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    yield "metaspace", t, ["<unk>", "<s>", "</s>"], lambda t: setattr(t, "post_processor", processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> $B:1 </s>:1",
        special_tokens=[("<s>", t.token_to_id("<s>")), ("</s>", t.token_to_id("</s>"))]))
    # 2. GPT-2-like ByteLevel with its own regex and prefix space, digits split, ByteLevel post-processor.
    t = Tokenizer(models.BPE())
    t.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Replace("\u00a0", " ")])
    t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                               pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)])
    t.decoder = decoders.ByteLevel()
    yield "bytelevel_digits", t, ["<|endoftext|>"], lambda t: setattr(t, "post_processor", processors.ByteLevel(trim_offsets=True))
    # 3. llama-2-like: Prepend + Replace normalizers, no pre-tokenizer, Replace/Fuse/Strip decoders.
    t = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True))
    t.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    t.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    yield "prepend_replace", t, ["<unk>", "<s>", "</s>"], lambda t: setattr(t, "post_processor", processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A $B", special_tokens=[("<s>", t.token_to_id("<s>"))]))


def main():
    strings = json.load(open(sys.argv[1]))
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    for name, tok, special, post in variants():
        train(tok, strings, 3000, special)
        post(tok)
        tok.add_tokens([AddedToken("<tool>", lstrip=True, rstrip=False, special=False),
                        AddedToken("</tool>", rstrip=True, special=False),
                        AddedToken("word", single_word=True, special=False),
                        AddedToken("ＮＯＲＭ", normalized=True, special=False)])
        tok.add_special_tokens([AddedToken("<|sep|>", special=True)])
        tok.save(f"{out}/{name}.tokenizer.json")
        extra = ["a <tool> b </tool> c", "word words sword word.", "x<|sep|>y", "ＮＯＲＭ NORM", "  <tool>  x"]
        rows = []
        for s in strings + extra:
            ids = tok.encode(s, add_special_tokens=False).ids
            rows.append({"text": s, "ids": ids, "ids_with_special": tok.encode(s, add_special_tokens=True).ids,
                         "decoded": tok.decode(ids, skip_special_tokens=False),
                         "decoded_skip_special": tok.decode(ids, skip_special_tokens=True)})
        json.dump(rows, open(f"{out}/{name}.encodings.json", "w"), ensure_ascii=False, indent=0)
        print(name, tok.get_vocab_size(), len(rows))


if __name__ == "__main__":
    main()

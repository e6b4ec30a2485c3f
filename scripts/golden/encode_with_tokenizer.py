#!/usr/bin/env python3
"""Reference encodings of a string list with an existing tokenizer.json (Hugging Face `tokenizers`).
Usage: encode_with_tokenizer.py TOKENIZER.json STRINGS.json OUT.json
Rows: {"text", "ids" (no special-token addition), "ids_with_special" (post-processor applied),
       "decoded", "decoded_skip_special"}
"""
import json
import sys

from tokenizers import Tokenizer


def main():
    tok = Tokenizer.from_file(sys.argv[1])
    rows = []
    for s in json.load(open(sys.argv[2])):
        ids = tok.encode(s, add_special_tokens=False).ids
        rows.append({"text": s, "ids": ids, "ids_with_special": tok.encode(s, add_special_tokens=True).ids,
                     "decoded": tok.decode(ids, skip_special_tokens=False),
                     "decoded_skip_special": tok.decode(ids, skip_special_tokens=True)})
    json.dump(rows, open(sys.argv[3], "w"), ensure_ascii=False, indent=0)
    print(sys.argv[3], len(rows))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Builds a deterministic tokenizer test corpus (JSON list of strings): the shared strings,
multilingual prose, source code from the Python standard library, emoji, whitespace runs,
special tokens inline and random Unicode. Runs on the GPU machine (needs only python3).
Usage: make_corpus_strings.py SHARED_STRINGS.json OUT.json [N_CODE]
"""
import glob
import json
import random
import sys
import sysconfig

PROSE = [
    "The committee postponed its decision until the auditors' report arrived on Tuesday.",
    "Le gouvernement a annoncé jeudi une réforme des retraites très contestée.",
    "Die Straßenbahn fährt heute wegen Bauarbeiten nicht über den Hauptbahnhof.",
    "El niño comió paella y bebió horchata en la plaza mayor de Valencia.",
    "Москва — столица России, крупнейший по численности населения город страны.",
    "北京是中华人民共和国的首都，也是全国的政治、文化中心。",
    "東京都は日本の首都であり、世界有数の大都市です。ラーメンが好きです！",
    "서울특별시는 대한민국의 수도이자 최대 도시이다.",
    "القاهرة هي عاصمة جمهورية مصر العربية وأكبر مدنها.",
    "עברית היא שפה שמית מקבוצת השפות הכנעניות.",
    "हिन्दी भारत की सबसे अधिक बोली जाने वाली भाषा है।",
    "ภาษาไทยเป็นภาษาราชการของประเทศไทย",
    "Tiếng Việt là ngôn ngữ chính thức của Việt Nam.",
    "Ελλάδα: η χώρα του ήλιου και της θάλασσας, με 11 εκατομμύρια κατοίκους.",
    "Türkçe'de ğ, ş, ı ve ç harfleri bulunur; İstanbul büyük bir şehirdir.",
    "Þetta er íslenska; æ, ö og ð eru stafir.",
    "Zażółć gęślą jaźń — polski pangram.",
    "ᚠᛇᚻ᛫ᛒᛦᚦ᛫ᚠᚱᚩᚠᚢᚱ᛫ᚠᛁᚱᚪ᛫ᚷᛖᚻᚹᛦᛚᚳᚢᛗ",
    "∀x∈ℝ: x² ≥ 0 ⇒ √(x²) = |x|; ∑ᵢ aᵢ ≤ ∞",
    "ﬁnancial ﬂow ① ② ③ ㎏ ㍿ Ⅻ ½ ¼ ™ ℃",
]
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "🇯🇵", "❤️", "🏳️‍🌈", "🧑🏿‍💻", "✊🏻", "🦀", "🐍", "1️⃣", "©️", "🫠"]
SPECIAL = ["]~!b[", "]~b]", "[e~[", "]!p~[", "<think>", "</think>", "]<]image[>[", "]<]video[>[",
           "]<]start of image[>[", "]<]end of image[>[", "<minimax:tool_call>", "</minimax:tool_call>"]


def main():
    rng = random.Random(20261120)
    shared = json.load(open(sys.argv[1]))
    n_code = int(sys.argv[3]) if len(sys.argv) > 3 else 120
    out = list(shared) + PROSE
    files = sorted(glob.glob(sysconfig.get_paths()["stdlib"] + "/**/*.py", recursive=True))
    for f in rng.sample(files, min(n_code, len(files))):
        try:
            lines = open(f, encoding="utf-8").read().splitlines(keepends=True)
        except (OSError, UnicodeDecodeError):
            continue
        if not lines:
            continue
        a = rng.randrange(len(lines))
        out.append("".join(lines[a:a + rng.randint(3, 40)]))
    for _ in range(60):
        parts = []
        for _ in range(rng.randint(2, 12)):
            k = rng.random()
            if k < 0.25:
                parts.append(rng.choice(EMOJI) * rng.randint(1, 3))
            elif k < 0.45:
                parts.append(rng.choice([" ", "  ", "\t", "\n", "\r\n", "\n\n", "   \n", "\u00a0", "\u3000"]) * rng.randint(1, 6))
            elif k < 0.6:
                parts.append(rng.choice(SPECIAL))
            elif k < 0.8:
                parts.append(rng.choice(PROSE)[: rng.randint(1, 40)])
            else:
                parts.append("".join(chr(rng.choice([rng.randint(0x20, 0x7e), rng.randint(0xa0, 0x24f),
                                                     rng.randint(0x370, 0x3ff), rng.randint(0x4e00, 0x4fff),
                                                     rng.randint(0x1f300, 0x1f64f), rng.randint(0x300, 0x36f)]))
                                     for _ in range(rng.randint(1, 20))))
        out.append("".join(parts))
    out.append(" " * 300 + "x" + "\n" * 50 + "\t" * 20)
    out.append("1234567890" * 30)
    json.dump(out, open(sys.argv[2], "w"), ensure_ascii=False, indent=0)
    print("strings", len(out))


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# Run on the GPU machine (device tool), from the repository root: dumps the reference source and
# makes the extra golden sets (m3-alt; the tokenizer corpus, encodings, retrained tokenizer and
# variants) into $OUT. SHARED: the shared folder beside the repository (its tools/ and golden/),
# carried; default build-device/shared. Usage: bash scripts/golden/device_goldens.sh
set -x
S=$(realpath "${SHARED:-$PWD/build-device/shared}")
cd "$(dirname "$0")"
R=$(python3 -c "import transformers.models.minimax_m3_vl as m; print(m.__path__[0])")
tar czf $OUT/ref_src.tgz -C "$R" . 
python3 -c "import tokenizers, transformers, torch; print(tokenizers.__version__, transformers.__version__, torch.__version__)" > $OUT/versions.txt
mkdir -p /tmp/g/alt /tmp/g/tok
python3 $S/tools/make_golden.py m3-alt.spec.json /tmp/g/alt > $OUT/alt.log 2>&1
python3 make_corpus_strings.py $S/golden/tokenizer_strings.json /tmp/g/tok/corpus.json 150
python3 encode_with_tokenizer.py $S/golden/tokenizer/tokenizer.json /tmp/g/tok/corpus.json /tmp/g/tok/minimax.encodings.json
python3 $S/tools/make_tokenizer_golden.py /tmp/g/tok/corpus.json /tmp/g/tok/retrained 32000 > $OUT/tokretrain.log 2>&1
python3 make_tokenizer_variants.py /tmp/g/tok/corpus.json /tmp/g/tok/variants > $OUT/variants.log 2>&1
tar czf $OUT/alt.tgz -C /tmp/g/alt .
tar czf $OUT/tok.tgz -C /tmp/g/tok .
ls -la $OUT

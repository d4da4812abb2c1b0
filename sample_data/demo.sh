#!/bin/sh
# The whole calib pipeline on sample_data/, each step printing what it found.
# Run it with `make demo` (which installs calib into .venv first).
set -eu
CALIB=${CALIB:-calib}
OUT=${OUT:-demo_output}
DATA=sample_data
mkdir -p "$OUT"

step() { printf '\n\033[1m==> %s\033[0m\n$ %s\n' "$1" "$2"; }

step "1. Is a rare-event model calibrated, overall and per segment? (weighted)" \
     "calib reliability $DATA/transactions.csv --weight-col weight --by segment --bins 8"
"$CALIB" reliability "$DATA/transactions.csv" --weight-col weight --by segment --bins 8 \
    --strategy quantile

step "2. Downsample negatives at 10% for training, recording the rate" \
     "calib resample $DATA/train.csv -o $OUT/train_sample.csv --negative-rate 0.1 --key-col id --seed 42"
"$CALIB" resample "$DATA/train.csv" -o "$OUT/train_sample.csv" --negative-rate 0.1 \
    --key-col id --seed 42

step "3. A model trained on that sample over-predicts; the record's rate corrects it" \
     "calib recalibrate $DATA/holdout_scored_sampled_model.csv --sampling-record $OUT/train_sample.csv.sampling.json -o $OUT/holdout_calibrated.csv"
"$CALIB" recalibrate "$DATA/holdout_scored_sampled_model.csv" \
    --sampling-record "$OUT/train_sample.csv.sampling.json" -o "$OUT/holdout_calibrated.csv"

step "4. An over-confident model: choose a calibrator by cross-validation, save it, get honest out-of-fold scores" \
     "calib recalibrate $DATA/overconfident.csv --cross-fit 5 --method auto --save-model $OUT/overconfident.model.json -o $OUT/overconfident_calibrated.parquet"
"$CALIB" recalibrate "$DATA/overconfident.csv" --cross-fit 5 --method auto \
    --save-model "$OUT/overconfident.model.json" -o "$OUT/overconfident_calibrated.parquet"

step "5. Apply the saved calibrator to new rows (no labels needed) and check the result" \
     "calib recalibrate $DATA/overconfident.csv --model $OUT/overconfident.model.json -o - | calib reliability - --score-col score --score-col calibrated --fail-above-ece 0.02"
"$CALIB" recalibrate "$DATA/overconfident.csv" --model "$OUT/overconfident.model.json" -o - -q \
    | "$CALIB" reliability - --score-col score --score-col calibrated --bins 8 \
        --strategy quantile --fail-above-ece 0.02 \
    || echo "(quality gate: the raw score fails --fail-above-ece 0.02, exit $?)"

step "6. The fraud rate moved: estimate each day's positive rate from the scores alone, recalibrate, move the threshold" \
     "calib estimate-shift --reference $DATA/transactions.csv --target $DATA/shifted_batch.csv --batch-col day --costs 1:20 -o $OUT/shifted_decided.csv"
"$CALIB" estimate-shift --reference "$DATA/transactions.csv" --target "$DATA/shifted_batch.csv" \
    --batch-col day --costs 1:20 -o "$OUT/shifted_decided.csv" --report "$OUT/shift.json"

step "7. One model per stratum, each trained on its own undersample: re-rank them together" \
     "calib rerank-strata --reference $DATA/strata_reference.csv --target $DATA/strata_target.csv --strata-col stratum -o $OUT/strata_reranked.csv"
"$CALIB" rerank-strata --reference "$DATA/strata_reference.csv" \
    --target "$DATA/strata_target.csv" --strata-col stratum -o "$OUT/strata_reranked.csv"

step "8. A real public table: ISLR's Default data, cross-fitted logistic scores" \
     "calib reliability $DATA/credit_default_scores.csv --by student --bootstrap 200"
"$CALIB" reliability "$DATA/credit_default_scores.csv" --by student --bins 10 \
    --strategy quantile --bootstrap 200 --seed 1

printf '\nDone: outputs and records are in %s/\n' "$OUT"

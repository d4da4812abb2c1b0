#!/bin/sh
# The whole calib pipeline on sample_data/, each step printing what it found.
# Run it with `make demo` (which installs calib into .venv first). Every step shows the exact
# command it runs ("calib" is $CALIB).
set -eu
CALIB=${CALIB:-calib}
OUT=${OUT:-demo_output}
DATA=sample_data
mkdir -p "$OUT"

step() { printf '\n\033[1m==> %s\033[0m\n' "$1"; }
run() { printf '$ calib %s\n' "$*"; "$CALIB" "$@"; }

step "1. Is a rare-event model calibrated, overall and per segment? (weighted, equal-mass bins)"
run reliability "$DATA/transactions.csv" --weight-col weight --by segment --bins 8 \
    --strategy quantile --plot "$OUT/reliability.png" --plot-scale logit

step "2. Downsample negatives at 10% for training, recording the rate"
run resample "$DATA/train.csv" -o "$OUT/train_sample.csv" --negative-rate 0.1 --key-col id \
    --seed 42

step "3. A model trained on that sample over-predicts; the record's rate corrects it"
run recalibrate "$DATA/holdout_scored_sampled_model.csv" \
    --sampling-record "$OUT/train_sample.csv.sampling.json" -o "$OUT/holdout_calibrated.csv"

step "4. An over-confident model: choose a calibrator by cross-validation, save it, get honest out-of-fold scores"
run recalibrate "$DATA/overconfident.csv" --cross-fit 5 --method auto \
    --save-model "$OUT/overconfident.model.json" -o "$OUT/overconfident_calibrated.parquet"
run show "$OUT/overconfident.model.json" --plot "$OUT/calibrator.png" --plot-scale logit

step "5. Apply the saved calibrator without labels (here to the same rows; in production, to each new batch), then gate on ECE"
printf '$ calib recalibrate %s --model %s -o - -q | calib reliability - --score-col score --score-col calibrated --bins 8 --strategy quantile --fail-above-ece 0.02\n' \
    "$DATA/overconfident.csv" "$OUT/overconfident.model.json"
"$CALIB" recalibrate "$DATA/overconfident.csv" --model "$OUT/overconfident.model.json" -o - -q \
    | "$CALIB" reliability - --score-col score --score-col calibrated --bins 8 \
        --strategy quantile --fail-above-ece 0.02 \
    || echo "(the quality gate failed, exit 1: the raw score's ECE is above 0.02, the calibrated one's is not)"

step "6. The fraud rate moved: estimate each day's positive rate from the scores alone, recalibrate, move the threshold"
run estimate-shift --reference "$DATA/transactions.csv" --target "$DATA/shifted_batch.csv" \
    --batch-col day --costs 1:20 -o "$OUT/shifted_decided.csv" --report "$OUT/shift.json" \
    --plot "$OUT/shift.png"

step "7. One model per stratum, each trained on its own undersample: re-rank them together"
run rerank-strata --reference "$DATA/strata_reference.csv" --target "$DATA/strata_target.csv" \
    --strata-col stratum -o "$OUT/strata_reranked.csv" --plot "$OUT/rerank.png"

step "8. A real public table: ISLR's Default data, cross-fitted logistic scores"
run reliability "$DATA/credit_default_scores.csv" --by student --bins 10 --strategy quantile \
    --bootstrap 200 --seed 1

printf '\nDone: outputs, records and pictures (*.png) are in %s/\n' "$OUT"

#!/usr/bin/env bash
# Issue 93's report sample R (RAMDocs dev rows 360-439), the runs of notes/2026-12-ramdocs-protocol.md. Each is
# resumable (rows already in the folder are skipped). Run one at a time, nothing else CPU-heavy beside it.
#   tools/p93_sample_r.sh rag                     # the pairing baseline
#   tools/p93_sample_r.sh method verdict|diva RULE [groups]
#       full run with the step and checkpoints, then from its settle states the no-step replay and the rule's replay,
#       on all 80, or with `groups` only where RULE forms a group (tools/settle_groups.py; as DIVA's were run)
#   tools/p93_sample_r.sh madam ours|official     # madam in one wording
# RUNS (default runs/p93) holds the folders; AMBIGQA (default .venv/bin/ambigqa) the CLI.
set -euo pipefail
RUNS=${RUNS:-runs/p93}
AMBIGQA=${AMBIGQA:-.venv/bin/ambigqa}
export HF_HUB_OFFLINE=1 ANONYMIZED_TELEMETRY=False
EVAL="$AMBIGQA eval --dataset ../shared/data/ramdocs/dev.jsonl --offset 360 --limit 80 --llm local"
mkdir -p "$RUNS"
usage() { sed -n '2,9p' "$0"; exit 2; }
case ${1:-} in
rag)
    $EVAL --methods rag --out "$RUNS/R-rag" ;;
method)
    [ $# -eq 3 ] || { [ $# -eq 4 ] && [ "$4" = groups ]; } || usage
    M=$2 RULE=$3 IDS=()
    STEP="--set $M.settle_conflicts=true --set $M.judge_both_orders=true --set $M.subject_rule=$RULE"
    echo "full $(date)"; $EVAL --methods "$M" $STEP --checkpoints --out "$RUNS/R-$M"
    if [ $# -eq 4 ]; then
        "$(dirname "$AMBIGQA")/python" "$(dirname "$0")/settle_groups.py" "$RUNS/R-$M" > "$RUNS/R-$M-groups.txt"
        IDS=(--ids "$(awk -v r="$RULE" '$1==r {print $3}' "$RUNS/R-$M-groups.txt")")
    fi
    echo "no step $(date)"
    AMBIGQA_LOCAL_DISK_STATES_MB=0 $EVAL --methods "$M" --replay "$RUNS/R-$M" --at settle "${IDS[@]}" \
        --set "$M.settle_conflicts=false" --out "$RUNS/R-$M-false"
    echo "$RULE $(date)"
    AMBIGQA_LOCAL_DISK_STATES_MB=0 $EVAL --methods "$M" $STEP --replay "$RUNS/R-$M" --at settle "${IDS[@]}" \
        --out "$RUNS/R-$M-$RULE"
    echo "done $(date)" ;;
madam)
    [ $# -eq 2 ] || usage
    if [ "$2" = official ]; then
        $EVAL --methods madam --set madam.wording=official --out "$RUNS/R-madam-official"
    else
        $EVAL --methods madam --out "$RUNS/R-madam"
    fi ;;
*)
    usage ;;
esac

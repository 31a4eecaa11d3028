#!/usr/bin/env bash
# Regenerates every table, chart and sample report the README and the book publish, from one
# real run, so they never go stale:
#
#   bench/publish.sh             # the debug build (what the published run used unless it says)
#   bench/publish.sh --release   # the release build
#   SCENARIO=smoke bench/publish.sh   # a quick check of the script itself (about a minute)
#   bench/publish.sh --from DIR  # publish a run already made (kept in DIR when a step failed)
#
# It runs `oversell compare --backend postgres,mysql` on flash-100 (all eight strategies, and
# naive's oversell against the rush: five rushes per backend; the servers as for any run:
# DATABASE_URL, MYSQL_URL, REDIS_URL), then
#   - copies headline.png, latency-percentiles.png, integrity.png and the law's charts
#     (law-naive-<backend>.png) into docs/src/results/,
#   - copies report.md there as sample-report.md, and takes a headless-Chromium screenshot of
#     the run's report.html (report-html.png; OVERSELL_CHROMIUM names the binary, default
#     chromium); the page itself (8.5 MB at 42 runs, its charts inline) stays in the run's folder,
#     not in the repository,
#   - writes docs/src/results/overview.md (the full table, the verdicts, the charts, the run's
#     build, date, load average and server versions),
#   - rewrites the README's table, verdicts and law between their <!-- publish:... --> markers,
#   - writes the report schema the binary wrote into reports/README.md.
# Needs jq. Extra arguments go to `oversell compare` (e.g. --repeat 3).
set -euo pipefail
cd "$(dirname "$0")/.."

profile=debug
cargo_flags=()
if [ "${1:-}" = "--release" ]; then
  profile=release
  cargo_flags=(--release)
  shift
fi
scenario=${SCENARIO:-flash-100}
backends=${BACKENDS:-postgres,mysql}
chromium=${OVERSELL_CHROMIUM:-chromium}
out=docs/src/results
for tool in jq "$chromium"; do
  command -v "$tool" >/dev/null || { echo "publish: $tool is needed (Debian package: $tool)" >&2; exit 2; }
done

# The run stays in $work when a later step fails: `bench/publish.sh --from $work` publishes it
# without running it again.
if [ "${1:-}" = "--from" ]; then
  work=$2
  shift 2
  read -r load_before load_after started profile <"$work/run.txt"
else
  cargo build "${cargo_flags[@]}" --locked --bin oversell
  bin=target/$profile/oversell
  work=$(mktemp -d)
  load_before=$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' /)
  started=$(date -u +%FT%TZ)
  echo "publish: $bin compare --scenario $scenario --backend $backends $* (load average $load_before)" >&2
  # compare exits 0 when every run finished (naive oversells on purpose: that is no failure).
  "$bin" compare --scenario "$scenario" --backend "$backends" --out "$work/reports" --quiet --json "$@" \
    >"$work/summary.json"
  load_after=$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' /)
  echo "$load_before $load_after $started $profile" >"$work/run.txt"
fi
trap 'echo "publish: failed; the run is kept: bench/publish.sh --from $work" >&2' ERR
dir=$(jq -r .report_dir "$work/summary.json")
report="$dir/report.json"
[ -f "$report" ] || { echo "publish: no report.json in $dir" >&2; exit 1; }

mkdir -p "$out"
for chart in headline latency-percentiles integrity; do
  cp "$dir/$chart.png" "$out/$chart.png"
done
# The post-mortem's law: naive's oversell against the rush, one chart per backend.
rm -f "$out"/law-*.png
for law in "$dir"/law-*.png; do
  [ -e "$law" ] && cp "$law" "$out/"
done
# The law's charts are kept as PNG, its rushes' own reports not at all: their links become text.
sed -E 's/\]\((law-[^)]*)\.svg\)/](\1.png)/g; s/\[([^]]*)\]\(law\/[^)]*\)/\1/g' "$dir/report.md" \
  >"$out/sample-report.md"
html=$(realpath "$dir/report.html")
"$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1600,2200 \
  --screenshot="$PWD/$out/report-html.png" "file://$html" 2>/dev/null
[ -s "$out/report-html.png" ] || { echo "publish: the screenshot was not written" >&2; exit 1; }

# The full headline table and the verdicts, from report.md; the README's short table is the
# headline table's first columns.
awk '/^\| strategy /{on=1} on && !/^\|/{exit} on' "$dir/report.md" >"$work/headline.md"
awk -F' [|] ' -v want='strategy|oversold units|avg order latency|error rate|DB peak QPS|sold / stock' '
  BEGIN { n = split(want, names, "|") }
  NR == 1 {
    sub(/^[|] /, ""); sub(/ [|]$/, "")
    for (i = 1; i <= NF; i++) col[$i] = i
    for (k = 1; k <= n; k++) if (!(names[k] in col)) { print "no column " names[k] > "/dev/stderr"; exit 1 }
    line = "|"; rule = "|---|"
    for (k = 1; k <= n; k++) { line = line " " names[k] " |"; if (k > 1) rule = rule "---:|" }
    print line; print rule; next
  }
  NR == 2 { next }
  {
    sub(/^[|] /, ""); sub(/ [|]$/, "")
    line = "|"
    for (k = 1; k <= n; k++) line = line " " $(col[names[k]]) " |"
    print line
  }' "$work/headline.md" >"$work/table.md"
awk '/^## Verdicts/{on=1; next} /^## /{on=0} on && /^- /' "$dir/report.md" \
  | sed -E 's/^- \*\*([^*]+)\*\*: /\1: /' >"$work/verdicts.txt"
# The README shows only the verdicts that differ from "sold every unit: no oversell" (each with
# its first two findings), then how many runs said just that.
clean='^[^:]+: sold ([0-9]+) of \1: no oversell$'
grep -Ev "$clean" "$work/verdicts.txt" | sed -E 's/^([^;]*(;[^;]*)?);.*/\1; .../' >"$work/differ.txt" || true
total=$(wc -l <"$work/verdicts.txt")
plain=$(grep -Ec "$clean" "$work/verdicts.txt" || true)
{
  if [ -s "$work/differ.txt" ]; then
    printf '```\n'; cat "$work/differ.txt"; printf '```\n\n'
    printf 'The other %s of the %s runs: every unit sold, no oversell.\n' "$plain" "$total"
  else
    printf 'All %s runs: every unit sold, no oversell.\n' "$total"
  fi
} >"$work/verdicts.md"

# Replaces what lies between <!-- NAME --> and <!-- /NAME --> in FILE with the file CONTENT.
splice() { # FILE NAME CONTENT
  grep -qx "<!-- $2 -->" "$1" && grep -qx "<!-- /$2 -->" "$1" \
    || { echo "publish: $1 lacks the <!-- $2 --> markers" >&2; exit 1; }
  awk -v first="<!-- $2 -->" -v last="<!-- /$2 -->" -v content="$3" '
    $0 == first { print; while ((getline line < content) > 0) print line; skip = 1; next }
    $0 == last { skip = 0 }
    !skip { print }' "$1" >"$1.publish" && mv "$1.publish" "$1"
}
bound=$(jq '[.runs[] | select(.generator_bound == true)] | length' "$report")
runs=$(jq '.runs | length' "$report")
cores=$(jq -r '.machine.cores' "$report")
repeat=$(jq '[.runs[] | .repeat // 1] | max' "$report")
note="The $profile build on $cores cores, $started, load average ${load_before%%/*} at the start"
[ "$repeat" -gt 1 ] && note="$note; each figure the median of $repeat runs, min–max in brackets"
if [ "$bound" -gt 0 ]; then
  note="$note; † marks the $bound of $runs runs that were generator-bound (their details say why)"
fi
printf '\n%s: see [Results](docs/src/results/overview.md).\n' "$note" >>"$work/table.md"
# The law's section of report.md, its charts as the PNGs copied above and its rushes' reports
# (not kept here) named without a link.
awk '/^## Oversell against the rush/{on=1; next} on && /^## /{exit} on' "$dir/report.md" \
  | sed -E 's/\]\((law-[^)]*)\.svg\)/](\1.png)/; s/\[([^]]*)\]\(law\/[^)]*\)/\1/' >"$work/law.md"
# The README: each law's sentence and chart.
grep -E '^\*\*.*per 100 buyers/s' "$work/law.md" | sed -E 's/^\*\*(.*)\*\*$/- \1/' >"$work/law-readme.md" || true
for law in "$out"/law-*.png; do
  [ -e "$law" ] && printf '\n![%s](docs/src/results/%s)\n' "naive's oversell against the arrival rate" "$(basename "$law")" >>"$work/law-readme.md"
done
splice README.md publish:table "$work/table.md"
splice README.md publish:verdicts "$work/verdicts.md"
splice README.md publish:law "$work/law-readme.md"

schema=$(jq -r .schema "$report")
sed -i -E "s#oversell\.report/v[0-9]+#$schema#" reports/README.md

versions=$(jq -r '.metadata.servers // [] | map("\(.service) \(.version)") | join(", ")' "$report")
[ -n "$versions" ] || versions="as the report's metadata names them"
commit=$(jq -r '.metadata.git_commit // "unknown"' "$report")
cat >"$out/overview.md" <<EOF
# Results: every strategy on $scenario

Written by \`bench/publish.sh\` (do not edit: run it again). \`oversell compare --scenario
$scenario --backend $backends\`, the **$profile build** at commit \`$commit\`, started $started
on $cores cores, load average $load_before before and $load_after after (the machine may have
been shared: read the figures as one sample, and the ratios between strategies of this one run
as the robust part). Servers: $versions.
$( [ "$bound" -gt 0 ] && echo "
† marks the $bound of $runs runs that were generator-bound: the generator's lateness could
change their figures ([the rule](../running/generator.md)); each one's details in [the
report](sample-report.md) give its latency without the send lag." )

$(cat "$work/headline.md")

\`\`\`
$(cat "$work/verdicts.txt")
\`\`\`

![The post-mortem's headline metrics per strategy and backend](headline.png)

## Oversell against the rush

$(cat "$work/law.md")

Oversold units (the oracle), average order latency and order error rate (the clients' records)
for every run; the database's peak rate gets one panel per counter (PostgreSQL transactions/s,
MariaDB Questions/s), since the two never share an axis.

![Order latency by percentile](latency-percentiles.png)

Order latency from each request's intended send time (HdrHistogram), one line per run: the
strategy's colour, paler and dashed on the second backend.

![Oversold, undersold and lost acknowledged orders](integrity.png)

The whole report: [report.md](sample-report.md), and report.html (written beside it in the
run's folder; 8.5 MB with its charts inline, so not kept here) as the browser shows it:

![report.html in headless Chromium](report-html.png)

How these compare with the post-mortem's figures (2100 ms average, 4200 peak QPS, 6.8 % errors
before; 120 ms, 380 and 0.2 % after), and why each design lands where it does: An earlier
run (\`docs/lab/earlier-run.md\`), [the hot-row strategies](../strategies/hot-row.md).
EOF
echo "publish: wrote $out/ (from $dir), README.md's table and verdicts, reports/README.md ($schema)" >&2
rm -rf "$work"

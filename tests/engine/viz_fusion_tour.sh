#!/bin/sh
# The compiler viewer on examples/fusion_tour: the page is written with the expected kernels, and
# where Debian's chromium is installed, its script renders them (DOM check) and a screenshot is
# saved as <build>/viz_fusion_tour.png. Usage: viz_fusion_tour.sh <build dir>
set -u
build=$(cd "$1" && pwd) || exit 1
page=$build/viz_fusion_tour.html
fail() { echo "viz_fusion_tour: $*"; exit 1; }
rm -f "$page" "$build/viz_fusion_tour.png"
KILN_VIZ=1 KILN_VIZ_OUT=$page "$build/examples/fusion_tour" >/dev/null || fail "fusion_tour failed"
[ -s "$page" ] || fail "no page at $page"
for want in '"name":"E_3_2"' '"name":"E_2048_2048"' '"name":"r_' 'a root of the realize' \
  'broadcast into a reduce' '"repeat_of":' '"op":"EXP2"' '"source":'; do
  grep -q "$want" "$page" || fail "the page has no $want"
done
[ "$(grep -o '</script>' "$page" | wc -l)" -eq 2 ] || fail "the data closes a script element"

chromium=${KILN_TEST_CHROMIUM:-/usr/bin/chromium}  # the variable is for checking the skip
if [ ! -x "$chromium" ]; then
  echo "viz_fusion_tour: browser check skipped: $chromium is not installed (apt-get install chromium)"
  exit 0
fi
profile=$(mktemp -d) || fail "mktemp"
trap 'rm -rf "$profile"' EXIT
run_chromium() {
  timeout 120 "$chromium" --headless --disable-gpu --no-sandbox --user-data-dir="$profile" "$@" \
    "file://$page" 2>/dev/null
}
dom=$(run_chromium --dump-dom) || fail "chromium --dump-dom failed"
# what only the page's script makes: the realize list, the schedule table, the node rows
for want in 'data-ready="1"' '<div id="error"></div>' '<small>E_3_2</small>' '<small>E_2048_2048</small>' \
  'class="kernel sel"' 'class="card sel"' 'class="node hl hl-out"' 'class="node realized' \
  '>realize #'; do
  printf '%s' "$dom" | grep -qF "$want" || fail "the rendered page has no $want"
done
realizes=$(printf '%s' "$dom" | grep -o 'data-realize="' | wc -l)
[ "$realizes" -ge 10 ] || fail "the rendered page lists $realizes realizes, expected at least 10"
run_chromium --screenshot="$build/viz_fusion_tour.png" --window-size=1400,1000 >/dev/null
[ -s "$build/viz_fusion_tour.png" ] || fail "no screenshot"
echo "viz_fusion_tour: page and rendering ok, screenshot at $build/viz_fusion_tour.png"

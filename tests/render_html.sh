#!/bin/sh
# render_html.sh PAGE.html OUTDIR — open an HTML report in headless Chromium and check
# that the charts were drawn: the DOM (OUTDIR/dom.html) holds the expected number of
# <svg> charts, with polylines and bars, and the screenshot (OUTDIR/page.png) is not
# blank (many distinct colours, enough non-white pixels).
#   MIN_SVG (env, default 1): the least number of <svg> elements expected.
# Exit: 0 checked, 77 skipped (no chromium or no python3), 1 a check failed.
set -u
page=$1
out=$2
min_svg=${MIN_SVG:-1}

browser=
for c in chromium chromium-browser; do
    if command -v "$c" >/dev/null 2>&1; then
        browser=$c
        break
    fi
done
if [ -z "$browser" ]; then
    echo "chromium not installed: skipped"
    exit 77
fi
if ! command -v python3 >/dev/null 2>&1; then
    echo "python3 not installed: skipped"
    exit 77
fi
mkdir -p "$out" || exit 1
case $page in /*) url=file://$page ;; *) url=file://$(pwd)/$page ;; esac
flags="--headless --disable-gpu --no-sandbox --disable-dev-shm-usage --hide-scrollbars --no-first-run --disable-extensions"
flags="$flags --user-data-dir=$out/profile"

# shellcheck disable=SC2086
timeout 120 "$browser" $flags --dump-dom "$url" >"$out/dom.html" 2>"$out/chromium-dom.log" || {
    echo "chromium --dump-dom failed:"; tail -5 "$out/chromium-dom.log"; exit 1; }
# shellcheck disable=SC2086
timeout 120 "$browser" $flags --window-size=1200,3000 --screenshot="$out/page.png" "$url" \
    >"$out/chromium-shot.log" 2>&1 || {
    echo "chromium --screenshot failed:"; tail -5 "$out/chromium-shot.log"; exit 1; }

python3 - "$out/dom.html" "$out/page.png" "$min_svg" <<'EOF'
import struct, sys, zlib

dom_path, png_path, min_svg = sys.argv[1], sys.argv[2], int(sys.argv[3])
dom = open(dom_path, encoding="utf-8", errors="replace").read()
ok = True
def check(cond, what):
    global ok
    print(("ok   " if cond else "FAIL ") + what)
    ok &= bool(cond)

n_svg = dom.count("<svg")
check(n_svg >= min_svg, "DOM has %d <svg> charts (want >= %d)" % (n_svg, min_svg))
check(dom.count("<polyline") >= 1, "DOM has %d <polyline> elements" % dom.count("<polyline"))
check(dom.count('<rect class="bar"') >= 1, "DOM has %d histogram bars" % dom.count('<rect class="bar"'))

# Decode the PNG (8-bit RGB/RGBA, non-interlaced, as Chromium writes it).
data = open(png_path, "rb").read()
check(data[:8] == b"\x89PNG\r\n\x1a\n", "screenshot is a PNG")
pos, idat, w = 8, b"", 0
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
check(depth == 8 and ctype in (2, 6) and interlace == 0, "PNG is 8-bit RGB(A), not interlaced")
bpp = 3 if ctype == 2 else 4
raw = zlib.decompress(idat)
stride = w * bpp
prev = bytearray(stride)
colours, nonwhite = set(), 0
for y in range(h):
    f = raw[y * (stride + 1)]
    line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    if f == 2:
        line = bytearray((u + v) & 255 for u, v in zip(line, prev))
    elif f in (1, 3, 4):
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 3:
                line[i] = (line[i] + ((a + b) >> 1)) & 255
            else:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    nonwhite += stride - line.count(255)  # channel bytes that are not white
    if y % 4 == 0:
        colours.update(bytes(line[x:x + 3]) for x in range(0, stride, bpp * 2))
    prev = line
frac = nonwhite / (h * stride)
check(len(colours) >= 64, "screenshot %dx%d has %d distinct colours (want >= 64)" % (w, h, len(colours)))
check(frac >= 0.02, "screenshot is %.1f%% non-white (want >= 2%%)" % (100 * frac))
sys.exit(0 if ok else 1)
EOF

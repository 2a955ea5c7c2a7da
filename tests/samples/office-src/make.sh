#!/bin/sh
# Rebuild the LibreOffice-written samples of tests/samples/office from the flat ODF sources
# here (see tests/samples/office/ORIGIN.md).  LibreOffice 7.4.7.2 writes every output; the
# default-password workbook is lo-notes.xlsx encrypted by msoffcrypto-tool 6.1.0.
# Usage: sh tests/samples/office-src/make.sh [PYTHON]   (from the repository root)
set -eu
py=${1:-/work/main/.venv/bin/python}
src=tests/samples/office-src
out=tests/samples/office
tmp=$(mktemp -d)
export HOME="$tmp"  # a throw-away LibreOffice profile
for conv in "lo-notes.fodt odt" "lo-notes.fodt docx" "lo-notes.fods ods" \
            "lo-notes.fods xlsx:Calc MS Excel 2007 XML" "lo-notes.fodp odp" "lo-notes.fodp pptx" \
            "lo-master.fodp odp" "lo-dates.fods ods" "lo-dates.fods xlsx:Calc MS Excel 2007 XML" \
            "lo-dates.fods xls:MS Excel 97" "lo-nested.fodt odt"; do
    file=${conv%% *}
    soffice --headless --convert-to "${conv#* }" --outdir "$out" "$src/$file"
done
"$py" - "$out/lo-notes.xlsx" "$out/lo-velvet.xlsx" <<'PY'
import sys
from msoffcrypto.format.ooxml import OOXMLFile
with open(sys.argv[1], "rb") as f, open(sys.argv[2], "wb") as out:
    OOXMLFile(f).encrypt("VelvetSweatshop", out)  # Excel's default password
PY
rm -rf "$tmp"

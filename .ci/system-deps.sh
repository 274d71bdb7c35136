#!/bin/sh
# The system packages dpbundle needs (docs/install.md), installed with apt-get where they are
# missing: Debian and Ubuntu only, as root or through password-less sudo. Elsewhere it says what
# to install and leaves it to you.
#   required:     a venv-capable Python (Debian's python3-venv), Pango for WeasyPrint, a font
#   recommended:  fontconfig, HarfBuzz-Subset (faster PDF fonts), openssl and ssh-keygen (the
#                 standard-tool verification recipes and their tests)
#   --fonts:      also Noto fonts for every script (a spec's title or labels in Hebrew, Arabic,
#                 Chinese...; about 100 MB); CI passes it
# DPBUNDLE_DEPS_DRY_RUN=1 only prints what it would install. Exit 1 only when a required package
# is missing and cannot be installed here.
set -eu
fonts=""
[ "${1:-}" = "--fonts" ] && fonts="fonts-noto-core fonts-noto-cjk"
required="" recommended=""
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"; }
if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  python3 -c "import weasyprint" >/dev/null 2>&1 || \
    echo "dpbundle: not a Debian/Ubuntu system: install Pango 1.44 or later, fontconfig and a font (e.g. DejaVu) with your package manager (docs/install.md)" >&2
  exit 0
fi
python3 -c "import ensurepip" >/dev/null 2>&1 || required="$required python3-venv"
for p in libpango-1.0-0 libpangoft2-1.0-0 fonts-dejavu-core; do
  have_pkg "$p" || required="$required $p"
done
for p in fontconfig libharfbuzz-subset0 openssl openssh-client $fonts; do
  have_pkg "$p" || recommended="$recommended $p"
done
missing="$required$recommended"
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -eq 0 ]; then sudo=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"
else sudo="none"
fi
if [ "$sudo" = none ] || [ "${DPBUNDLE_DEPS_DRY_RUN:-}" = 1 ]; then
  echo "dpbundle: missing system packages; install them with: sudo apt-get install -y$missing" >&2
  if [ -n "$required" ] && [ "${DPBUNDLE_DEPS_DRY_RUN:-}" != 1 ]; then exit 1; fi
  exit 0
fi
echo "dpbundle: installing system packages:$missing" >&2
$sudo apt-get update -qq
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null

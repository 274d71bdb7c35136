#!/usr/bin/env bash
# Re-derivation is byte-identical across the supported dependency range (docs/reproducibility.md).
#
# Builds dpbundle's wheel from this checkout once, then, each in a fresh virtual environment
# (one after the other: the machine may be shared), installs it with
#   lowest   every dependency that pyproject.toml bounds above, pinned to its lower bound
#            (numpy>=2.3,<2.5 -> numpy==2.3, i.e. 2.3.0); the others as pip resolves them;
#   highest  no pins: the newest versions that pyproject.toml allows and pip can resolve here;
#   numpy    in the highest environment, the newest patch release of every NumPy feature release
#            (X.Y) that pyproject.toml allows, one after the other (pip re-resolves the rest);
# imports every bounded dependency, and runs tests/test_rederive_golden.py (golden SHA-256 of
# three re-derived data.csv files and of every NumPy method they use; the spec's YAML 1.1) with
# tests/test_prepare.py and tests/test_spec_hostile.py (reading the data with pandas, the spec
# with PyYAML). Not part of CI (several environments, about 3 to 5 minutes); run it before
# raising a bound or regenerating constraints.txt, and record the result in
# docs/reproducibility.md.
#
# Usage: .ci/check-range.sh [lowest] [highest] [numpy]     (default: all three)
# Environment: PYTHON (default python3), RANGE_TESTS (test files, default above),
# DPBUNDLE_RANGE_DIR (work folder, kept; default a new temporary one, removed at the end).
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-python3}"
WORK="${DPBUNDLE_RANGE_DIR:-$(mktemp -d -t dpbundle-range.XXXXXX)}"
mkdir -p "$WORK"
PROFILES=("$@")
[ ${#PROFILES[@]} -eq 0 ] && PROFILES=(lowest highest numpy)
read -r -a TEST <<< "${RANGE_TESTS:-tests/test_rederive_golden.py tests/test_prepare.py tests/test_spec_hostile.py}"
RESULTS="$WORK/results.txt"
: > "$RESULTS"
failed=0

cleanup() { [ -n "${DPBUNDLE_RANGE_DIR:-}" ] || rm -rf "$WORK"; }
trap cleanup EXIT

say() { echo "== $*" >&2; }

# "name==lower" for every dependency with an upper bound (read from pyproject.toml)
lower_pins() {
  "$PY" - "$ROOT/pyproject.toml" <<'EOF'
import re, sys, tomllib
deps = tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]
for d in deps:
    m = re.fullmatch(r"([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*(.*)", d.strip())
    name, spec = m.group(1), m.group(3)
    lo = re.search(r">=\s*([0-9][0-9A-Za-z.]*)", spec)
    if "<" in spec.replace("<=", "<") and lo:
        print(f"{name}=={lo.group(1)}")
EOF
}

numpy_spec() {
  "$PY" - "$ROOT/pyproject.toml" <<'EOF'
import re, sys, tomllib
for d in tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]:
    if re.match(r"numpy\b", d):
        print(d[len("numpy"):].strip())
EOF
}

versions() {  # the bounded dependencies' versions in a venv, one line
  "$1/bin/python" - <<'EOF'
from importlib.metadata import version
print(", ".join(f"{p} {version(p)}" for p in ("numpy", "pandas", "pyyaml", "opendp", "pypdf", "scipy")))
EOF
}

run_test() {  # venv label
  local venv="$1" label="$2" out="$WORK/$2.log" v
  v="$(versions "$venv")"
  say "$label: $v"
  if (cd "$ROOT" && "$venv/bin/python" -c 'import numpy, pandas, scipy.sparse.csgraph, opendp, yaml, pypdf, dpbundle.release.prepare, dpbundle.audit.rederive' \
        && "$venv/bin/python" -m pytest -q -p no:cacheprovider "${TEST[@]}") > "$out" 2>&1; then
    echo "PASS  $label: $v" | tee -a "$RESULTS"
  else
    tail -n 30 "$out" >&2
    echo "FAIL  $label: $v  (log: $out)" | tee -a "$RESULTS"
    failed=1
  fi
}

new_venv() {  # dir, pip arguments... -> 0 if installed
  local venv="$1"; shift
  rm -rf "$venv"
  "$PY" -m venv "$venv" || return 1
  "$venv/bin/python" -m pip install -q "$@" pytest hypothesis > "$venv.pip.log" 2>&1 \
    || { tail -n 20 "$venv.pip.log" >&2; return 1; }
}

say "building the wheel of $ROOT"
rm -rf "$WORK/wheel"
"$PY" -m pip wheel -q --no-deps -w "$WORK/wheel" "$ROOT" > "$WORK/wheel.log" 2>&1 \
  || { cat "$WORK/wheel.log" >&2; exit 2; }
WHEEL="$(ls "$WORK"/wheel/dpbundle-*.whl)"

for profile in "${PROFILES[@]}"; do
  case "$profile" in
    lowest)
      mapfile -t pins < <(lower_pins)
      say "lowest: ${pins[*]}"
      if new_venv "$WORK/venv-lowest" "$WHEEL" "${pins[@]}"; then
        run_test "$WORK/venv-lowest" lowest
      else
        echo "FAIL  lowest: cannot install ${pins[*]} (log: $WORK/venv-lowest.pip.log)" | tee -a "$RESULTS"
        failed=1
      fi
      rm -rf "$WORK/venv-lowest"
      ;;
    highest)
      if new_venv "$WORK/venv-highest" "$WHEEL"; then
        run_test "$WORK/venv-highest" highest
      else
        echo "FAIL  highest: cannot install (log: $WORK/venv-highest.pip.log)" | tee -a "$RESULTS"
        failed=1
      fi
      ;;
    numpy)
      venv="$WORK/venv-highest"
      [ -x "$venv/bin/python" ] || new_venv "$venv" "$WHEEL" || { echo "FAIL  numpy: cannot install" | tee -a "$RESULTS"; failed=1; continue; }
      spec="$(numpy_spec)"
      # the newest patch of every feature release that the bounds allow
      mapfile -t each < <("$venv/bin/python" -m pip index versions numpy 2>/dev/null \
        | sed -n 's/^Available versions: //p' | tr ',' '\n' | sed 's/ //g' \
        | "$venv/bin/python" -c '
import sys
from packaging.specifiers import SpecifierSet
from packaging.version import Version
spec = SpecifierSet(sys.argv[1])
best = {}
for line in sys.stdin:
    v = Version(line.strip())
    if not v.is_prerelease and v in spec:
        key = v.release[:2]
        best[key] = max(best.get(key, v), v)
print("\n".join(str(best[k]) for k in sorted(best)))' "$spec")
      say "numpy $spec: ${each[*]}"
      for v in "${each[@]}"; do
        if "$venv/bin/python" -m pip install -q "numpy==$v" "$WHEEL" > "$WORK/numpy-$v.pip.log" 2>&1; then
          run_test "$venv" "numpy-$v"
        else
          echo "FAIL  numpy-$v: cannot install (log: $WORK/numpy-$v.pip.log)" | tee -a "$RESULTS"
          failed=1
        fi
      done
      ;;
    *) echo "unknown profile $profile (lowest, highest, numpy)" >&2; exit 2 ;;
  esac
done
rm -rf "$WORK/venv-highest"

echo
echo "Python $("$PY" -c 'import platform; print(platform.python_version(), platform.machine())'), dpbundle wheel $(basename "$WHEEL")"
cat "$RESULTS"
exit "$failed"

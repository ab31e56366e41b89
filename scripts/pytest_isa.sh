#!/usr/bin/env bash
# The integration tests again at the ISA levels below the host's best (`make pytest` runs them at the best):
# greedy outputs, batch invariance and speculation identity are properties of the kernels of each level, and a
# test that holds at one level can fail at another (a near-tie, a kernel whose multi-row path differs).
#  - On an AVX-512 host the whole suite runs once more at AVX2 (the level most servers without AVX-512 run).
#  - Every other lower level (scalar) runs the tests whose outputs depend on the kernels most directly, chosen to
#    fit the time budget (the scalar level decodes ~5x slower): ISA_TESTS.
# Usage: scripts/pytest_isa.sh PYTHON TACHYON_BIN
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$1 BIN=$2
ISA_TESTS="tests/integration/test_spec.py::test_greedy_identical_alone tests/integration/test_spec.py::test_stop_and_max_tokens
           tests/integration/test_api.py tests/integration/test_gemma3_api.py"
levels=$("$BIN" info --cpu | sed -n 's/.*host levels: \([^;)]*\).*/\1/p')
best=${levels##* }
for isa in $levels; do
    [ "$isa" = "$best" ] && continue
    if [ "$isa" = avx2 ] && [ "$best" = avx512 ]; then
        tests="tests/integration"
    else
        tests=$ISA_TESTS
    fi
    echo "== integration tests at TACHYON_ISA=$isa (host best: $best): $(echo $tests)"
    # shellcheck disable=SC2086
    TACHYON_ISA=$isa TACHYON_BIN=$BIN "$PY" -m pytest -q -rs -m "not bench" $tests
done
